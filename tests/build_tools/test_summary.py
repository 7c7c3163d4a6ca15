"""The builder's list at 80 columns (issue 33, item 5): on the sample trees in both modes
and on trees with the longest names a release holds (per-family directories and libraries
wheels, generic targets, ``manylinux_2_28_x86_64`` and ``win_amd64`` tags), no line is
longer than 80 and none folds, and each row, read back with the title's version and tag,
names a file on disk, every file once, with its size and its share of the budget."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.dist_listing import read_listing

from ..conftest import require
from .conftest import VERSION

pytestmark = [pytest.mark.real, pytest.mark.compile]

ROOT = Path(__file__).resolve().parents[2]
BUDGET = 400_000_000
UNITS = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}


def _build(tree: Path, dest: Path, tag: str | None = None) -> str:
    """Run the builder as a user does, its stdout a pipe 80 columns wide; its stdout."""
    env = {**os.environ, "COLUMNS": "80"}
    env.pop("ROCM_SDK_WHEEL_PLATFORM_TAG", None)
    if tag is not None:
        env["ROCM_SDK_WHEEL_PLATFORM_TAG"] = tag
    argv = ["--artifact-dir", tree, "--dest-dir", dest, "--version", VERSION,
            "--max-wheel-size", str(BUDGET)]  # fmt: skip
    proc = subprocess.run(
        [sys.executable, ROOT / "build_tools/build_python_packages.py", *map(str, argv)],
        capture_output=True, text=True, env=env, check=False, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _check(stdout: str, dist: Path, tag: str) -> list[str]:
    """The list read back against ``dist``; returns its first cells' file names."""
    *table, last = stdout.splitlines()
    assert last == str(dist)
    listing = read_listing("\n".join(table))
    assert listing.title == f"Packages written: version {VERSION}, tag py3-none-{tag}"
    assert listing.header == ("package", "files", "size", "% of 400.0 MB")
    on_disk = {p.relative_to(dist).as_posix(): p.stat().st_size for p in dist.rglob("*")
               if p.is_file()}  # fmt: skip
    assert sorted(listing.rows) == sorted(on_disk)
    for name, (files, size, share) in listing.rows.items():
        number, unit = size.split()
        assert abs(float(number) * UNITS[unit] - on_disk[name]) <= 0.05 * UNITS[unit], name
        assert int(files) > 0
        if name.endswith(".whl"):
            percent = 100 * on_disk[name] / BUDGET
            assert share == ("<1" if percent < 0.5 else str(round(percent))), name
        else:
            assert share == "-"
    return list(listing.rows)


def test_a_two_family_legacy_set(sample_tree: Path, tmp_path: Path) -> None:
    """``dist/<family>/`` rows, the longest family libraries wheels, a manylinux tag."""
    tree = tmp_path / "artifacts"
    shutil.copytree(sample_tree, tree, symlinks=True)
    for name in ("rand", "fft"):
        shutil.copytree(
            tree / f"{name}_lib_gfx90a-dcgpu", tree / f"{name}_lib_gfx110X-all", symlinks=True
        )
    tag = "manylinux_2_28_x86_64"
    stdout = _build(tree, tmp_path / "out", tag)
    names = _check(stdout, tmp_path / "out" / "dist", tag)
    assert f"gfx110X-all/rocm_sdk_devel-{VERSION}-py3-none-{tag}.whl" in names
    assert "rocm-sdk-libraries-gfx90a-dcgpu  " in stdout


@pytest.fixture(scope="module")
def kpack_sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require(shutil.which("hipcc") is not None, "hipcc is not installed")
    from sample_tree.make_sample_tree import make_sample_tree

    out = tmp_path_factory.mktemp("kpack") / "artifacts"
    return make_sample_tree(out, cache_dir=None, family="gfx90a-dcgpu", kpack_split=True)


def test_the_kpack_sample_tree(kpack_sample: Path, tmp_path: Path) -> None:
    """Device wheels in their targets' natural order."""
    names = _check(
        _build(kpack_sample, tmp_path / "out"), tmp_path / "out" / "dist", "linux_x86_64"
    )
    devices = [n.split("-")[0].removeprefix("rocm_sdk_device_") for n in names if "device" in n]
    assert devices == ["gfx803", "gfx900", "gfx906", "gfx908", "gfx90a", "gfx1030"]


def test_generic_targets_on_manylinux(tmp_path: Path) -> None:
    from .test_shared_owner import _tree

    tag = "manylinux_2_28_x86_64"
    out = tmp_path / "out"
    names = _check(_build(_tree(tmp_path / "artifacts"), out, tag), out / "dist", tag)
    assert f"rocm_sdk_device_gfx12_5_generic-{VERSION}-py3-none-{tag}.whl" in names


@pytest.mark.slow
def test_a_windows_set(tmp_path: Path) -> None:
    from tests.pypi_inputs import rocm7_bundles

    from .windows_tree import write_windows_tree

    tree = tmp_path / "artifacts"
    write_windows_tree(tree, rocm7_bundles(tmp_path / "jax"), kpack=True, family="gfx110X-all")
    out = tmp_path / "out"
    names = _check(_build(tree, out, "win_amd64"), out / "dist", "win_amd64")
    assert f"rocm_sdk_device_gfx9_4_generic-{VERSION}-py3-none-win_amd64.whl" in names


def test_the_dry_run_plan_in_target_order(kpack_sample: Path, tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "80"}
    argv = ["--artifact-dir", kpack_sample, "--dest-dir", tmp_path / "out", "--version", VERSION,
            "--dry-run"]  # fmt: skip
    proc = subprocess.run(
        [sys.executable, ROOT / "build_tools/build_python_packages.py", *map(str, argv)],
        capture_output=True, text=True, env=env, check=False, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = proc.stdout[proc.stdout.index("Packages planned") :].splitlines()[:-2]
    assert all(len(line) <= 80 for line in table), table
    # the split before it: every line fits, each split says its stage once and names each
    # archive by its target (the targets of the kernels in the tree's fat binaries)
    split = proc.stdout[: proc.stdout.index("Packages planned")].splitlines()
    assert [line for line in [*split, *proc.stderr.splitlines()] if len(line) > 80] == []
    rand = split[split.index("split rand_lib_generic (in math-libs/rocRAND/stage):") :]
    archives = [line.split(":")[0].strip() for line in rand[2:] if "uncompressed" in line]
    assert sorted(t.split(":")[0] for t in archives) == sorted(
        ["gfx803", "gfx900", "gfx906", "gfx908", "gfx90a", "gfx90a", "gfx1030"]
    )
    assert "  lib/librocrand.so.1.1:" in rand
    devices = [line.split()[1] for line in table if "rocm-sdk-device-" in line]
    assert devices == ["gfx803", "gfx900", "gfx906", "gfx908", "gfx90a", "gfx1030"]
    assert not (tmp_path / "out").exists()
