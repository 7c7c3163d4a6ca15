#!/usr/bin/env python3
"""What a user downloads for one GPU against every GPU, pip being the judge (issue 32, item 6).

    python benchmarks/bench_per_gpu.py --sample [--with-rocsparse]
    python benchmarks/bench_per_gpu.py --kpack-tree TREE [--legacy-tree TREE]
    python benchmarks/bench_per_gpu.py --kpack-set DIST INDEX [--legacy-set DIST INDEX]
        [--targets gfx942,gfx1100] [--markdown] [--json FILE] [--work-dir DIR]

No timing: bytes. For every GPU the kpack-split set has a ``device-<gfx>`` extra for (or
``--targets``), pip resolves ``rocm[libraries,device]==V`` from the set's index
(``pip install --dry-run --ignore-installed --report``, ``--index-url file://…``) with that GPU
forced as a user's machine would report it (``ROCM_BOOTSTRAP_FORCE_GFX_ARCH``: the ``rocm``
sdist is built on the "installing machine" and picks the device wheels), and once
``rocm[libraries,device-all]==V`` (no GPU needed). The bytes are those of every file in pip's
report (the ``rocm`` sdist included), each checked against the set's ``dist/``: same name, size
and sha256 as pip's. With a legacy set, ``rocm[libraries]==V`` from the index of the GPU's
family (a multi-family set has one per family, ``INDEX/<family>/``, as TheRock's nightlies do)
gives the legacy figure; ``—`` where no family of the set serves the GPU. Where the builder's
``report.json`` lies beside ``dist/``, its per-target download figures are compared with pip's
(a difference is printed and makes the exit status 1).

``--sample`` builds the sample tree of real Debian and hipcc-compiled binaries in both modes
(six processors; the legacy set is one family, gfx90a-dcgpu, whose libraries wheel holds the
fat binaries; ``--with-rocsparse`` adds Debian's 1.31 GB librocsparse, a real fat binary for
the same six). ``--kpack-tree``/``--legacy-tree`` build the given artifact trees (e.g. those of
``benchmarks/make_release_inputs.py tree``). Each build goes through the builder with
``--index`` into a temporary directory (``--work-dir``), removed at the end.
``--kpack-set``/``--legacy-set`` measure sets already built (``DIST``: the builder's
``DEST/dist``; ``INDEX``: its ``--index``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.per_gpu.inputs import build_set, sample_trees  # noqa: E402
from benchmarks.per_gpu.measure import measure  # noqa: E402
from benchmarks.per_gpu.pip import PackageSet, load_set, pip_version  # noqa: E402
from benchmarks.per_gpu.render import report  # noqa: E402
from kpack.common.cli import split_list  # noqa: E402
from kpack.errors import RocmPackagingError, UsageError  # noqa: E402

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="bench_per_gpu.py", description=__doc__.split("\n\n")[0])
    kpack = ap.add_mutually_exclusive_group(required=True)
    kpack.add_argument("--sample", action="store_true", help="the sample tree, both modes")
    kpack.add_argument("--kpack-tree", type=Path, metavar="TREE")
    kpack.add_argument("--kpack-set", type=Path, nargs=2, metavar=("DIST", "INDEX"))
    legacy = ap.add_mutually_exclusive_group()
    legacy.add_argument("--legacy-tree", type=Path, metavar="TREE")
    legacy.add_argument("--legacy-set", type=Path, nargs=2, metavar=("DIST", "INDEX"))
    ap.add_argument("--with-rocsparse", action="store_true", help="--sample: add librocsparse")
    ap.add_argument("--targets", default="", help="only these GPUs (comma-separated)")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--json", type=Path, metavar="FILE", help="also write the figures here")
    ap.add_argument("--work-dir", type=Path, help="parent of the temporary build directory")
    return ap


def _sets(args: argparse.Namespace, work: Path) -> tuple[PackageSet, PackageSet | None]:
    if args.sample:
        if args.legacy_tree or args.legacy_set:
            raise UsageError("--sample builds its own legacy set")
        kpack_tree, legacy_tree = sample_trees(work, with_rocsparse=args.with_rocsparse)
        return build_set("kpack", kpack_tree, work), build_set("legacy", legacy_tree, work)
    if args.with_rocsparse:
        raise UsageError("--with-rocsparse goes with --sample")
    kpack = (
        build_set("kpack", args.kpack_tree, work)
        if args.kpack_tree
        else load_set("kpack", *args.kpack_set)
    )
    if args.legacy_tree:
        return kpack, build_set("legacy", args.legacy_tree, work)
    return kpack, load_set("legacy", *args.legacy_set) if args.legacy_set else None


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        targets = split_list(args.targets)
        with tempfile.TemporaryDirectory(prefix="bench-per-gpu-", dir=args.work_dir) as tmp:
            kpack, legacy = _sets(args, Path(tmp))
            m = measure(kpack, legacy, Path(tmp), targets)
            print(report(m, kpack, legacy, args.markdown))
        if args.json:
            figures: dict[str, Any] = {"pip": pip_version(), "version": kpack.version}
            text = json.dumps(figures | asdict(m), indent=1) + "\n"
            try:
                args.json.write_text(text, encoding="utf-8")
            except OSError as exc:
                raise UsageError(f"cannot write: {exc.strerror or exc}", path=args.json) from exc
    except RocmPackagingError as exc:
        print(f"bench_per_gpu.py: error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, UsageError) else 1
    for line in m.mismatches:
        print(f"bench_per_gpu.py: {line}", file=sys.stderr)
    return 1 if m.mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
