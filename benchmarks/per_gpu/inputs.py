"""Package sets to measure: the builder run with ``--index`` on an artifact tree, and the
sample tree of real binaries in both modes."""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
from pathlib import Path

from .pip import PackageSet, load_set, run

__all__ = ["VERSION", "build_set", "sample_trees"]

REPO = Path(__file__).resolve().parents[2]
VERSION = "7.99.0.dev0"


def build_set(mode: str, tree: Path, work: Path) -> PackageSet:
    """The builder's output for ``tree``, with its index, under ``work``."""
    dest, index = work / f"{mode}-out", work / f"{mode}-index"
    argv = [sys.executable, str(REPO / "build_tools/build_python_packages.py"), "-q"]
    argv += ["--artifact-dir", str(tree), "--dest-dir", str(dest), "--index", str(index)]
    run([*argv, "--version", VERSION], os.environ.copy())
    return dataclasses.replace(load_set(mode, dest / "dist", index), origin=f"built from {tree}")


def sample_trees(work: Path, *, with_rocsparse: bool) -> tuple[Path, Path]:
    """The sample tree of real binaries in kpack and legacy mode (one family, gfx90a-dcgpu)."""
    from sample_tree.make_sample_tree import DEFAULT_FAMILY, make_sample_tree

    kpack = make_sample_tree(work / "kpack-tree", kpack_split=True)
    legacy = make_sample_tree(work / "legacy-tree", kpack_split=False)
    if with_rocsparse:
        _add_rocsparse(kpack, "generic")
        _add_rocsparse(legacy, DEFAULT_FAMILY)
    return kpack, legacy


def _add_rocsparse(tree: Path, target: str) -> None:
    """Debian's librocsparse (a real fat library, 1.31 GB) as the ``blas`` library."""
    from sample_tree.debian_inputs import fetch_debs

    root = fetch_debs(["librocsparse0"])["librocsparse0"]
    real = next((root / "usr/lib/x86_64-linux-gnu").glob("librocsparse.so.0.*"))
    stage = "math-libs/BLAS/rocSPARSE/stage"
    lib = tree / f"blas_lib_{target}" / stage / "lib"
    lib.mkdir(parents=True)
    (tree / f"blas_lib_{target}" / "artifact_manifest.txt").write_text(stage + "\n")
    try:
        os.link(real, lib / real.name)
    except OSError:
        shutil.copyfile(real, lib / real.name)
    (lib / "librocsparse.so.0").symlink_to(real.name)
