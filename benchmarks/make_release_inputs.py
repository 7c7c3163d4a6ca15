#!/usr/bin/env python3
"""Make release-size benchmark inputs from real code objects (issue 31, item 1).

    python benchmarks/make_release_inputs.py tree OUTPUT --mode legacy|kpack [--scale GB]
    python benchmarks/make_release_inputs.py wheel OUT_DIR [--code-objects N]

``tree``: a TheRock-layout artifact tree of at least ``--scale`` GB (default 8; 0.5, 1, 2,
4 ... all work) covering every target TheRock builds — 28 processors, 7 generic targets and
gfx1250-strict — in legacy (per release family) or kpack (fat ``_generic`` artifacts) mode,
with ``OUTPUT.inputs.json`` beside it saying what is real and what is relabelled
(``benchmarks/release_inputs/``). ``wheel``: a torch-sized fat wheel
(:mod:`benchmarks.release_inputs.wheel`). Outputs depend only on the cached inputs and the
gcc/zstd/libdeflate versions: the same command gives the same bytes. Libraries are cached
under ``<cache>/bench/libs/`` (``--cache-dir``, default ``$ROCM_PACKAGING_CACHE`` or
``~/.cache/rocm-packaging``), so a second run, or a smaller scale, reuses them; an
interrupted run resumes. Not run in CI.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kpack.errors import RocmPackagingError, UsageError  # noqa: E402
from sample_tree.debian_inputs import default_cache_dir  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="make_release_inputs.py", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--cache-dir", type=Path, default=None)
    ap.add_argument("-v", "--verbose", action="store_true")
    sub = ap.add_subparsers(dest="what", required=True)
    tree = sub.add_parser("tree", help="a release-size artifact tree")
    tree.add_argument("output", type=Path)
    tree.add_argument("--mode", choices=("legacy", "kpack"), required=True)
    tree.add_argument("--scale", type=float, default=8.0, help="size in GB (10^9 bytes)")
    wheel = sub.add_parser("wheel", help="a torch-sized fat wheel")
    wheel.add_argument("out_dir", type=Path)
    wheel.add_argument("--code-objects", type=int, default=20_000)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    cache = args.cache_dir or default_cache_dir()
    start = time.monotonic()
    try:
        if args.what == "tree":
            from benchmarks.release_inputs.tree import make_release_tree

            made = make_release_tree(args.output, mode=args.mode, scale=args.scale, cache=cache)
            print(
                f"wrote {args.mode} tree {made.path} ({made.bytes / 1e9:.2f} GB) and "
                f"{made.provenance.name} in {time.monotonic() - start:.0f} s"
            )
        else:
            from benchmarks.release_inputs.wheel import make_release_wheel

            whl = make_release_wheel(args.out_dir, code_objects=args.code_objects, cache=cache)
            size = whl.path.stat().st_size / 1e9
            print(
                f"wrote {whl.path} ({size:.2f} GB, {whl.content_bytes / 1e9:.2f} GB of "
                f"members, {whl.code_objects} code objects, {whl.targets} targets) in "
                f"{time.monotonic() - start:.0f} s"
            )
    except RocmPackagingError as exc:
        print(f"make_release_inputs: error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, UsageError) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
