"""Assemble a small but real TheRock artifact tree from Debian packages and hipcc builds.

The tree follows TheRock's layout (``artifact-tree.md``): one ``{name}_{component}_{target}``
directory per artifact, each with an ``artifact_manifest.txt`` and its stage directories.
Its contents are real: ROCm runtime libraries, headers and CMake files from Debian bookworm
(fetched with :func:`sample_tree.debian_inputs.fetch_debs`), plus small HIP fat binaries and
host programs compiled from ``sample_tree/sample_sources/`` with ``hipcc`` (always with
``HIP_PLATFORM=amd``) and ``cc``. Debian's files are laid out as TheRock lays them: libraries
with their SONAME and linker-name links in ``lib``, and the CMake packages of hip, rocRAND and
their dependencies (hsa-runtime64, amd_comgr, AMDDeviceLibs) in ``lib/cmake/<pkg>/``,
rewritten to find their prefix three levels up and their files under ``lib/``, so
``find_package(hip)`` works against an installed devel tree.

It covers the cases packaging must handle: SONAME-versioned libraries with their symlinks, a
symlink to an ELF executable (launcher stub), a Perl script that needs its
sibling modules, a GNU-ld and an lld-linked (PT_PHDR) fat library with ``xnack`` variants, a
test executable, profiler libraries and programs, and one relpath that two artifacts provide
with identical bytes. ``--edge-cases`` also plants what a happy-path build must warn about
(a dangling symlink, which the builder drops with a warning); the default tree builds
without a single warning.

Modes (``--mode``):

- ``legacy``: ``flags.KPACK_SPLIT_ARTIFACTS`` is false; fat libraries live in ``rand_lib_F``
  and ``fft_lib_F`` for the family ``F`` (``--family``).
- ``kpack``: the flag is true and ``--family`` is not used. The tree is *fat*: the fat
  libraries stay whole in ``rand_lib_generic`` and ``fft_lib_generic``. The builder splits
  them itself; ``kpack split-artifacts`` turns them into the pre-split form.

Compiled products depend only on the sources, the command line and the compiler; they are
cached under ``<cache>/sample-build/<key>/``. Every file gets a fixed mode and mtime and the
tree is written to ``OUTPUT.partial`` and then renamed, so two runs give identical trees.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kpack.common.outputs import check_outputs, publish, record_beside, staging
from kpack.errors import RocmPackagingError, UsageError
from sample_tree.compile import (
    build_products,
    locate_compilers,
)
from sample_tree.debian_inputs import default_cache_dir, fetch_debs
from sample_tree.layout import TreePlan, plan_tree

__all__ = ["DEB_PACKAGES", "DEFAULT_FAMILY", "main", "make_sample_tree"]

log = logging.getLogger(__name__)

DEFAULT_FAMILY = "gfx90a-dcgpu"
DEB_PACKAGES = (
    "hipcc",
    "libamd-comgr-dev",
    "libamd-comgr2",
    "libamdhip64-5",
    "libamdhip64-dev",
    "libhiprand-dev",
    "libhiprand1",
    "libhsa-runtime-dev",
    "libhsa-runtime64-1",
    "librocprim-dev",
    "librocrand-dev",
    "librocrand1",
    "rocm-device-libs",
)
FIXED_MTIME = 315532800  # 1980-01-01T00:00:00Z, the earliest time a zip entry can hold


# --- data model -------------------------------------------------------------------------


# --- locating tools -----------------------------------------------------------------------


def _debs_missing(cache: Path) -> bool:
    return any(not any((cache / "debs").glob(f"{n}_*.deb")) for n in DEB_PACKAGES)


# --- planning -----------------------------------------------------------------------------


# --- writing ------------------------------------------------------------------------------


def _edited(source: Path, edits: tuple[tuple[str, str], ...]) -> str:
    text = source.read_text(encoding="utf-8")
    for old, new in edits:
        text = text.replace(old, new)
    return text


def write_tree(plan: TreePlan, root: Path) -> None:
    """Create ``root`` from ``plan`` with fixed modes and mtimes."""
    root.mkdir()
    for artifact, stages in plan.stages.items():
        for stage in stages:
            (root / artifact / stage).mkdir(parents=True, exist_ok=True)
        (root / artifact / "artifact_manifest.txt").write_text(
            "\n".join(stages) + "\n", encoding="utf-8"
        )
    for e in plan.entries:
        dest = root / e.artifact / e.stage / e.relpath
        dest.parent.mkdir(parents=True, exist_ok=True)
        if e.link is not None:
            os.symlink(e.link, dest)
            continue
        if e.source is not None and e.edits:
            dest.write_text(_edited(e.source, e.edits), encoding="utf-8")
        elif e.source is not None:
            shutil.copyfile(e.source, dest)
        else:
            dest.write_text(e.text or "", encoding="utf-8")
        dest.chmod(e.mode)
    for dirpath, dirnames, filenames in os.walk(root, topdown=False):
        for name in filenames + dirnames:
            os.utime(os.path.join(dirpath, name), (FIXED_MTIME, FIXED_MTIME), follow_symlinks=False)
        os.chmod(dirpath, 0o755)
        os.utime(dirpath, (FIXED_MTIME, FIXED_MTIME))


#: The sample tree's record of what it wrote, beside the tree (:mod:`kpack.common.outputs`).
TOOL = "make-sample-tree"


def make_sample_tree(
    output: Path,
    *,
    cache_dir: Path | None = None,
    family: str = DEFAULT_FAMILY,
    kpack_split: bool = False,
    edge_cases: bool = False,
) -> Path:
    """Build the sample artifact tree at ``output`` (replacing an earlier sample tree)."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9-]*", family):
        raise UsageError(f"invalid family {family!r}: use letters, digits and '-' only")
    output = Path(output).absolute()
    record = record_beside(output, TOOL)
    check_outputs(output.parent, [output.name], record=record, tool=TOOL, force=False)
    cache = cache_dir or default_cache_dir()
    compilers = locate_compilers(need_apt=_debs_missing(cache))
    debs = fetch_debs(list(DEB_PACKAGES), cache)
    products = build_products(compilers, cache / "sample-build")
    if kpack_split:
        log.info("kpack mode: --family %s is not used; fat binaries stay in _generic", family)
    plan = plan_tree(debs, products, family=family, kpack_split=kpack_split, edge_cases=edge_cases)
    with staging(output.parent, TOOL) as staged:
        write_tree(plan, staged / output.name)
        publish(output.parent, staged, [output.name], record=record, tool=TOOL, force=False)
    log.info("wrote %d artifacts, %d entries to %s", len(plan.stages), len(plan.entries), output)
    return output


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="make_sample_tree.py",
        description="Assemble a real TheRock-style artifact tree from Debian packages and "
        "hipcc-built samples.",
    )
    parser.add_argument("--output", type=Path, required=True, help="artifact root to write")
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="download/compile cache (default: $ROCM_PACKAGING_CACHE or ~/.cache/rocm-packaging)",
    )
    parser.add_argument(
        "--mode",
        choices=("legacy", "kpack"),
        default="legacy",
        help="value of flags.KPACK_SPLIT_ARTIFACTS (kpack = true)",
    )
    parser.add_argument(
        "--family",
        default=DEFAULT_FAMILY,
        help=f"target of the fat-library artifacts in legacy mode (default {DEFAULT_FAMILY})",
    )
    parser.add_argument(
        "--edge-cases",
        action="store_true",
        help="also plant inputs the builder warns about (a dangling symlink)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    start = time.monotonic()
    try:
        root = make_sample_tree(
            args.output,
            cache_dir=args.cache_dir,
            family=args.family,
            kpack_split=args.mode == "kpack",
            edge_cases=args.edge_cases,
        )
    except RocmPackagingError as exc:
        print(f"make_sample_tree: error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, UsageError) else 1  # argparse's status for a usage error
    print(f"wrote {args.mode} sample tree to {root} in {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
