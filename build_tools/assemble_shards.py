#!/usr/bin/env python3
"""Merge the dist directories of target-sharded kpack-split builds into one (or check and
index a legacy set).

    python build_tools/assemble_shards.py --input S1/dist --input S2/dist --output DIST \\
        [--linux-amdgpu-families LIST] [--windows-amdgpu-families LIST] [--version V] \\
        [--targets-cmake FILE] [--index DIR]

Each shard ran the builder with its own ``--targets``: the generic files (``rocm`` sdist,
core, libraries, devel, profiler) must be byte-identical in every shard that holds them
and are taken once (a ``--print-shards`` plan builds them in one shard, ``--only common``;
its ``--only device`` shards hold none); device wheels (``rocm_sdk_device_<gfx>``) are
united, and every wheel the ``rocm`` sdist requires must be among them (every device
wheel required, when it requires any). Errors, all collected and
reported together: a generic file that differs between shards (both files named) or is
missing from one; a device wheel present twice with different bytes; two files of one
project (another build tag or python tag); more than one version or platform; ``--version``
not matching; a missing ``rocm`` sdist, core or libraries wheel; with family flags (like the
builder, Linux and Windows targets together), an expected target without its device wheel;
a device wheel named for no gfx target (``gfx942`` or a listed generic target); a file name
that is not printable; an archive that does not read and check in full (a wheel: zip,
.dist-info, RECORD hashes and sizes, METADATA Name/Version as its file name, member names;
the sdist: gzip'd tar under ``<name>-<version>/`` with a matching PKG-INFO; see
:mod:`build_tools.shards.archives`). The shards' ``report.json`` files are merged into one
``report.json`` + ``report.md`` equal to an unsharded build's (read next to each shard's
dist dir, where the builder writes them, or inside it; written next to ``--output``, so the
output holds distributions only): device rows are united,
per-target download rows recomputed over every device wheel (a shard's own rows count only
its share). Without ``report.json`` in some shard the merge is skipped with a notice. A
report must be a regular file (not a symlink), one per shard, and each row must name a file
of its kind (a device row: the wheel of its target) and size.
``--index`` also writes a PEP 503 simple repository of the result. A legacy set (libraries
per family, no device wheels) is not sharded: its inputs must hold the same files, and the
family flags name the families that need a libraries wheel
(:mod:`build_tools.shards.assembly`). The last line printed is
the absolute path of ``--output``. Outputs follow the project's one output-directory rule
(:mod:`kpack.common.outputs`): written into temporary siblings, then published in one step;
a re-run replaces what an earlier run wrote there (recorded beside each directory in
``.assemble-shards.<name>.json``) and leaves every other file alone, and a file in the way
that assemble-shards did not write, or that changed since, is an error (a few names and a
count) unless ``--force`` is given. No symlink in the way is followed. The outputs must not
lie inside a shard, and ``--output`` must not sit beside one (its report would be written
over). A failure or a signal leaves everything as it was found.

This module is the command line; the work (scan, plan, write) lives in
:mod:`build_tools.shards`.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from build_tools.shards import (
    AssemblyPlan,
    DistFile,
    Kind,
    Shard,
    parse_report,
    plan_assembly,
    scan_shards,
    write_assembly,
)
from build_tools.shards.report import REPORT_JSON, parse_version, shown
from kpack.common.cli import (
    Parser,
    add_list_argument,
    add_verbosity,
    add_version,
    configure_logging,
    format_size,
    output_line,
)
from kpack.errors import UsageError

__all__ = [
    "AssemblyPlan",
    "DistFile",
    "Kind",
    "Shard",
    "main",
    "parse_report",
    "plan_assembly",
    "scan_shards",
    "write_assembly",
]

log = logging.getLogger("assemble_shards")


def _parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line; a usage error (an unknown flag, a missing argument) is one
    ``error:`` line and exit status 2 (:class:`kpack.common.cli.Parser`)."""
    p = Parser(
        prog="assemble-shards",
        description="Merge the dist directories of target-sharded kpack-split builds into one.",
    )
    p.add_argument(
        "--input",
        type=Path,
        nargs="+",
        action="extend",
        required=True,
        metavar="DIR",
        help="a shard's dist directory (several, space-separated, or the flag repeated)",
    )
    p.add_argument(
        "--output",
        type=Path,
        required=True,
        metavar="DIR",
        help="the merged dist directory (a re-run replaces what assemble-shards wrote there "
        "and leaves other files alone); the report goes beside it",
    )
    add_list_argument(
        p,
        "--linux-amdgpu-families",
        metavar="FAMILY",
        help="GPU families whose targets must all have a device wheel",
    )
    add_list_argument(
        p, "--windows-amdgpu-families", metavar="FAMILY", help="the same for the Windows families"
    )
    p.add_argument(
        "--targets-cmake",
        type=Path,
        metavar="FILE",
        help="read the family table from TheRock's therock_amdgpu_targets.cmake",
    )
    add_version(
        p, value_help="the version every file must have", argv=argv, default=None, metavar="V"
    )
    p.add_argument(
        "--index", type=Path, metavar="DIR", help="also write a PEP 503 simple repository here"
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace files in the way in --output, beside it or in --index that "
        "assemble-shards did not write (or that changed since)",
    )
    add_verbosity(p)
    return p


def _expected(args: argparse.Namespace) -> tuple[str, ...] | None:
    """Targets of both family flags together (as the builder expects); None without flags."""
    from build_tools.targets import load_family_table, parse_family_list, parse_targets_cmake

    table = parse_targets_cmake(args.targets_cmake) if args.targets_cmake else load_family_table()
    linux = parse_family_list(args.linux_amdgpu_families)
    windows = parse_family_list(args.windows_amdgpu_families)
    if not linux and not windows:
        return None
    return tuple(  # a UsageError listing the valid families for an unknown one
        sorted(
            {
                *table.expand_all(linux, flag="--linux-amdgpu-families"),
                *table.expand_all(windows, flag="--windows-amdgpu-families"),
            }
        )
    )


def _families(args: argparse.Namespace) -> tuple[str, ...]:
    """The family flags' families (a legacy set has a libraries wheel for each)."""
    from build_tools.targets import parse_family_list

    linux = parse_family_list(args.linux_amdgpu_families)
    return tuple(sorted({*linux, *parse_family_list(args.windows_amdgpu_families)}))


def _check_apart(dirs: Sequence[Path], output: Path, index: Path | None) -> None:
    """The outputs stay out of the shards: neither inside one, nor ``--output`` beside one
    (the merged report next to it would replace, or become, that shard's report)."""
    out = output.resolve()
    for directory in dirs:
        shard = directory.resolve()
        for flag, path in (("--output", output), ("--index", index)):
            if path is not None and shard in (path.resolve(), *path.resolve().parents):
                raise UsageError(f"{flag} {path} is inside the shard {directory}")
        if out.parent == shard.parent:
            raise UsageError(
                f"--output {output} is beside the shard {directory}: the merged "
                f"{REPORT_JSON} would be written over that shard's report"
            )


def run(argv: Sequence[str] | None = None) -> int:
    args = _parser(argv).parse_args(argv)
    configure_logging(args)
    version = None
    if args.version is not None and args.version.strip():
        parsed = parse_version(args.version.strip())
        if parsed is None:
            raise UsageError(f"--version {shown(args.version)} is not a PEP 440 version")
        version = str(parsed)
    dirs = [Path(d) for d in args.input]
    problems = [f"{d}: not a directory" for d in dirs if not d.is_dir()]
    resolved = [d.resolve() for d in dirs]
    problems += [f"{d}: given twice" for i, d in enumerate(dirs) if resolved[i] in resolved[:i]]
    if problems:
        raise UsageError("bad --input", problems=problems)
    _check_apart(dirs, args.output, args.index)
    expected = _expected(args)
    families = None if expected is None else _families(args)
    plan = plan_assembly(
        scan_shards(dirs), expected_targets=expected, expected_families=families, version=version
    )
    for notice in () if args.quiet else plan.notices:
        print(f"notice: {notice}", file=sys.stderr)
    write_assembly(plan, args.output, index=args.index, force=args.force)
    if not args.quiet:
        _print_plan(plan, len(dirs), args.index)
    print(output_line(args.output))
    return 0


def _print_plan(plan: AssemblyPlan, shards: int, index: Path | None) -> None:
    """The files assembled: one list on stdout (a table fitted to the width); where the
    index went, on stderr."""
    from kpack.common.tables import Table, print_tables

    devices = sum(f.kind is Kind.DEVICE for f in plan.files)
    title = (
        f"assembled {len(plan.files)} files ({devices} device wheels) of {plan.version} "
        f"from {shards} shards"
    )
    rows = tuple((f.name, format_size(f.size)) for f in plan.files)
    print_tables([Table(title=title, header=("file", "size"), rows=rows, numeric=frozenset({1}))])
    if index is not None:
        print(f"index: {output_line(index)}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    from kpack.common.boundary import guarded

    return guarded(run, argv)


if __name__ == "__main__":
    sys.exit(main())
