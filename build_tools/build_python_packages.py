#!/usr/bin/env python3
"""Build the rocm / rocm-sdk-* Python packages from a TheRock artifact tree.

    python build_tools/build_python_packages.py --artifact-dir ARTIFACTS --dest-dir OUT \\
        --version 7.99.0.dev0

Writes OUT/dist/: the ``rocm`` selector sdist, ``rocm-sdk-core``, one
``rocm-sdk-libraries-<family>`` per GPU family (legacy mode), ``rocm-sdk-devel`` and
``rocm-profiler``. ``dist/`` is replaced as a whole at the end; a failed run leaves the
previous one intact.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kpack.common.jsonfile import load_json_object
from kpack.errors import UsageError
from kpack.targets import is_isa_target

if TYPE_CHECKING:
    from build_tools.options import BuildOptions
    from build_tools.progress import Progress

__all__ = ["main"]

log = logging.getLogger("build_python_packages")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="build-python-packages",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--artifact-dir", type=Path, required=True, help="exploded artifact root")
    p.add_argument(
        "--dest-dir",
        type=Path,
        required=True,
        help="output root; packages go to DEST/dist (replaced as a whole)",
    )
    p.add_argument(
        "--build-packages",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="build wheels and the sdist (--no-build-packages: only stage the "
        "package trees, including the devel tarball, under DEST/<dist-name>)",
    )
    p.add_argument(
        "--version",
        default="",
        help="package version (PEP 440; the canonical form is used everywhere)",
    )
    p.add_argument(
        "--version-file",
        type=Path,
        help="version.json whose 'rocm-version' + '.dev0' is used without --version",
    )
    p.add_argument(
        "--version-suffix",
        "--package-nonce",
        dest="nonce",
        default="",
        help="package-NAME nonce appended to every platform package "
        "(_rocm_sdk_core<NONCE>); despite its name it does not change the version",
    )
    p.add_argument(
        "--devel-tarball-compression",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="ship the devel payload as _devel.tar.xz instead of _devel.tar",
    )
    p.add_argument(
        "--wheel-compression",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="deflate wheel members (--no-wheel-compression: store them)",
    )
    p.add_argument(
        "--linux-amdgpu-families",
        default=None,
        help="','/';'-separated GPU families for Linux (empty: not given)",
    )
    p.add_argument(
        "--windows-amdgpu-families",
        default=None,
        help="','/';'-separated GPU families for Windows (empty: not given)",
    )
    p.add_argument(
        "--targets",
        default=None,
        help="kpack-split mode: build only these device wheels (','/';'-separated base gfx "
        "targets); every other output is byte-identical whatever the subset, so CI jobs can "
        "each build a share (see build_tools/assemble_shards.py)",
    )
    p.add_argument(
        "--targets-cmake",
        type=Path,
        help="parse family -> target table from TheRock's therock_amdgpu_targets.cmake",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan (packages, file counts, sizes) and write nothing",
    )
    p.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=os.cpu_count() or 2,
        help="worker threads for scanning and compression (default: CPU count)",
    )
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv: debug)")
    p.add_argument(
        "-q", "--quiet", action="store_true",
        help="print errors only (no progress lines, notices or tables)",
    )  # fmt: skip
    return p


def _version(args: argparse.Namespace) -> str:
    from build_tools.options import canonical_version

    if args.version.strip():
        return canonical_version(args.version.strip())
    if args.version_file is None:
        raise UsageError("--version is required (or --version-file pointing at version.json)")
    data = load_json_object(args.version_file, error=UsageError)
    base = data.get("rocm-version")
    if not isinstance(base, str) or not base.strip():
        raise UsageError(
            f"'rocm-version' must be a non-empty string, got {base!r}", path=args.version_file
        )
    return canonical_version(f"{base.strip()}.dev0")


def _nonce(text: str) -> str:
    if text and not all(c.isalnum() or c == "_" for c in text):
        raise UsageError(f"--version-suffix {text!r} may only hold letters, digits and '_'")
    return text


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB"):
        if value < 1000:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"


def _table(rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _check_dirs_apart(artifact_dir: Path, dest_dir: Path) -> None:
    """Neither directory may lie inside the other: a dest inside the input tree (or inside a
    stage dir) would feed this build's output into the next build as input."""
    art, dest = artifact_dir.resolve(), dest_dir.resolve()
    if dest.is_relative_to(art):
        raise UsageError(
            f"--dest-dir {dest_dir} lies inside --artifact-dir {artifact_dir}: the next build "
            "would read this build's output as input; choose a directory outside the tree"
        )
    if art.is_relative_to(dest):
        raise UsageError(
            f"--artifact-dir {artifact_dir} lies inside --dest-dir {dest_dir}; choose a "
            "destination outside the tree"
        )


def _options(args: argparse.Namespace) -> BuildOptions:
    from build_tools.options import BuildOptions, default_platform_tag, source_date_epoch
    from build_tools.targets import load_family_table, parse_family_list, parse_targets_cmake

    _check_dirs_apart(args.artifact_dir, args.dest_dir)
    table = parse_targets_cmake(args.targets_cmake) if args.targets_cmake else load_family_table()
    linux = parse_family_list(args.linux_amdgpu_families)
    windows = parse_family_list(args.windows_amdgpu_families)
    shard = parse_family_list(args.targets)
    for target in shard:
        if not is_isa_target(target) or ":" in target:
            raise UsageError(f"--targets: {target!r} is not a base gfx target (e.g. gfx942)")
    return BuildOptions(
        artifact_dir=args.artifact_dir,
        dest_dir=args.dest_dir,
        version=_version(args),
        nonce=_nonce(args.nonce),
        build_packages=args.build_packages,
        devel_tarball_compression=args.devel_tarball_compression,
        wheel_compression=args.wheel_compression,
        linux_families=linux,
        windows_families=windows,
        linux_targets=table.expand_all(linux),  # UsageError for an unknown family
        windows_targets=table.expand_all(windows),
        platform_tag=default_platform_tag(),
        epoch=source_date_epoch(),
        jobs=max(1, args.jobs),
        targets=shard,
        families=frozenset(table.families),
    )


def run(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    level = logging.DEBUG if args.verbose > 1 else logging.INFO if args.verbose else logging.WARNING
    logging.basicConfig(
        level=logging.ERROR if args.quiet else level, format="%(levelname)s: %(message)s"
    )
    from build_tools.progress import make_progress

    progress = make_progress(quiet=args.quiet)
    try:
        return _run(args, progress)
    finally:
        progress.close()


def _run(args: argparse.Namespace, progress: Progress) -> int:
    from build_tools.build import apply_plan
    from build_tools.payload import Edited
    from build_tools.pipeline import plan_packages

    def notice(line: str) -> None:
        if not args.quiet:
            print(f"notice: {line}", file=sys.stderr)

    options = _options(args)
    planned = plan_packages(options, say=progress.phase, notice=notice)
    plan, split = planned.plan, planned.split
    edits = sum(isinstance(f.what, Edited) for p in plan.packages for f in p.payload)
    progress.phase(
        f"planned {len(plan.packages)} packages, {edits} binary edits, "
        f"{_size(sum(p.input_bytes for p in plan.packages))} of input"
    )
    for line in plan.notices:
        notice(line)
    if args.dry_run:
        if split is not None and split.splits:
            print("\n".join(split.describe()))
            print()
        rows = [("package", "family", "files", "input size")] + [
            (p.dist_name, p.family or "-", str(p.file_count), _size(p.input_bytes))
            for p in plan.packages
        ]
        print(_table(rows))
        return 0
    built = apply_plan(plan, progress=progress)
    progress.phase("done")
    if args.quiet:
        return 0
    rows = [("package", "file", "files", "size")] + [
        (b.plan.dist_name, str(b.path), str(b.plan.file_count), _size(b.size)) for b in built
    ]
    print(_table(rows))
    report = options.dest_dir / "report.md"
    if report.is_file():
        print()
        print(report.read_text(encoding="utf-8"))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from build_tools._cli import guarded_main

    return guarded_main(run, argv)


if __name__ == "__main__":
    sys.exit(main())
