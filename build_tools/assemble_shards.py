#!/usr/bin/env python3
"""Merge the dist directories of target-sharded kpack-split builds into one (or check and
index a legacy set).

    python build_tools/assemble_shards.py --input S1/dist --input S2/dist --dest-dir OUT \\
        [--linux-amdgpu-families LIST] [--windows-amdgpu-families LIST] [--version V] \\
        [--targets-cmake FILE] [--index DIR]

``OUT`` is shaped as one build's ``--dest-dir``: the merged distributions in ``OUT/dist/``
(only them, so ``twine upload OUT/dist/*`` works as is), the merged ``report.json`` and
``report.md`` beside it in ``OUT``. ``--output`` (the dist directory itself, with the report
beside it) was replaced by ``--dest-dir`` and is refused with a usage error.

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
dist dir, where the builder writes them, or inside it; written to ``OUT``, beside
``OUT/dist/``): device rows are united,
per-target download rows recomputed over every device wheel (a shard's own rows count only
its share). Without ``report.json`` in some shard the merge is skipped with a notice. A
report must be a regular file (not a symlink), one per shard, and each row must name a file
of its kind (a device row: the wheel of its target) and size.
``--index`` also writes a PEP 503 simple repository of the result. A legacy set (libraries
per family, no device wheels) is not sharded: its inputs must hold the same files, and the
family flags name the families that need a libraries wheel
(:mod:`build_tools.shards.assembly`). The last line printed is
the absolute path of ``OUT/dist``. Outputs follow the project's one output-directory rule
(:mod:`kpack.common.outputs`): staged in ``OUT`` (and beside ``--index``), then published in
one step; a re-run replaces what an earlier run wrote there (recorded in
``OUT/.assemble-shards.json``, as the builder records its own, and beside the index in
``.assemble-shards.<name>.json``) and leaves every other file alone, and a file in the way
that assemble-shards did not write, or that changed since, is an error (a few names and a
count) unless ``--force`` is given. No symlink in the way is followed. The outputs must not
lie inside a shard, and no shard may be ``OUT/dist`` (or inside it) or have its report in
``OUT`` (it would be written over). A failure or a signal leaves everything as it was found.

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
from build_tools.shards.write import DIST
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


class _Replaced(argparse.Action):
    """``--output``, replaced by ``--dest-dir``: a usage error saying so, whatever follows."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        parser.error(
            "--output was replaced by --dest-dir OUT, which writes the merged files to "
            "OUT/dist/ and report.json and report.md beside them, as the builder's --dest-dir"
        )


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
        "--dest-dir",
        type=Path,
        required=True,
        metavar="OUT",
        help="output root, as the builder's: the merged files go to OUT/dist, report.json "
        "and report.md beside it (a re-run replaces what assemble-shards wrote there and "
        "nothing else)",
    )
    p.add_argument("--output", nargs="?", action=_Replaced, help=argparse.SUPPRESS)
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
        help="replace files in the way in --dest-dir or --index (or beside it) that "
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


def _check_apart(dirs: Sequence[Path], dest_dir: Path, index: Path | None) -> None:
    """The outputs stay out of the shards, and the shards out of the outputs' way: no output
    inside a shard, no shard in ``OUT/dist`` (replaced by the merged files) nor beside it
    (its report would be replaced by, or become, the merged one)."""
    out = dest_dir.resolve()
    for directory in dirs:
        shard = directory.resolve()
        for flag, path in (("--dest-dir", dest_dir), ("--index", index)):
            if path is not None and shard in (path.resolve(), *path.resolve().parents):
                raise UsageError(f"{flag} {path} is inside the shard {directory}")
        if shard.is_relative_to(out / DIST):
            raise UsageError(
                f"the shard {directory} is in --dest-dir {dest_dir}/{DIST}, which the merged "
                "files replace"
            )
        if shard.parent == out:
            raise UsageError(
                f"the shard {directory} is in --dest-dir {dest_dir}: the merged "
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
    _check_apart(dirs, args.dest_dir, args.index)
    expected = _expected(args)
    families = None if expected is None else _families(args)
    plan = plan_assembly(
        scan_shards(dirs), expected_targets=expected, expected_families=families, version=version
    )
    for notice in () if args.quiet else plan.notices:
        print(f"notice: {notice}", file=sys.stderr)
    write_assembly(plan, args.dest_dir, index=args.index, force=args.force)
    if not args.quiet:
        _print_plan(plan, len(dirs), args.index)
    print(output_line(args.dest_dir / DIST))
    return 0


def _print_plan(plan: AssemblyPlan, shards: int, index: Path | None) -> None:
    """The files assembled: one list on stdout (a table within 80 columns, the version and
    wheel tag they share in its title, :mod:`kpack.common.dist_table`; each wheel's share
    of the size budget the shards were built with, if any); where the index went, on
    stderr."""
    from kpack.common.budget import budget_column, percent_of
    from kpack.common.dist_table import Listed, dist_table
    from kpack.common.tables import print_tables

    budget = plan.report.budget[0].budget if plan.report and plan.report.budget else None
    files = [
        Listed(
            path=f.name,
            cells=(format_size(f.size), *([percent_of(f.name, f.size, budget)] if budget else [])),
        )
        for f in plan.files
    ]
    header = ("size", *([budget_column(budget)] if budget else []))
    title = f"Assembled from {shards} shard{'s' if shards != 1 else ''}"
    table = dist_table(title=title, files=files, header=header, numeric=frozenset({0, 1}))
    print_tables([table])
    if index is not None:
        print(f"index: {output_line(index)}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    from kpack.common.boundary import guarded

    return guarded(run, argv)


if __name__ == "__main__":
    sys.exit(main())
