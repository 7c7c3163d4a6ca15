"""``kpack assemble-wheel-shards SHARD_DIR… --output-dir DIR``: the shards of a wheel split
merged into what the one-machine split writes (:mod:`kpack.wheelsplit._assemble` checks
and plans).

``DIR`` gets every wheel (hard links where the file system allows, else copies) and
``DIR-split-reports/`` (or ``--report-dir``) the merged report, JSON and Markdown, under
the same names as the split's, all or nothing under the output-directory rule
(:mod:`kpack.common.outputs`): a re-run replaces what the last assembly of the same input
wrote there (recorded in ``.kpack-assemble-wheel-shards/``), every other file stays, and a
file in the way that it did not write is an error without ``--force``. The outputs must
not lie in a shard, nor a shard in them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

from kpack.common.cli import add_verbosity, add_version, output_line
from kpack.common.outputs import Publication, publish_all, staging
from kpack.common.safepath import output_dir_problem
from kpack.errors import PackagingError, RocmPackagingError, UsageError, shown_list
from kpack.wheelsplit._assemble import Assembly, Shard, plan_assembly, scan_shard
from kpack.wheelsplit._options import report_dir_for

__all__ = ["add_assemble_arguments", "run_assemble", "write_assembly"]

TOOL = "kpack assemble-wheel-shards"
RECORD_DIR = ".kpack-assemble-wheel-shards"


def add_assemble_arguments(parser: argparse.ArgumentParser) -> None:
    add_version(parser)
    parser.add_argument(
        "shards",
        nargs="+",
        type=Path,
        metavar="SHARD_DIR",
        help="the --output-dir of each shard (kpack split-wheel --targets), its report beside "
        "it in SHARD_DIR-split-reports/",
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        required=True,
        metavar="DIR",
        help="where every wheel of the split goes; a re-run replaces what an earlier assembly "
        "of the same input wrote there and leaves every other file alone",
    )
    parser.add_argument(
        "--report-dir",
        type=Path,
        metavar="DIR",
        help="where the merged report goes (default: <output-dir>-split-reports beside it)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace files in the output dirs that an earlier assembly did not write",
    )
    add_verbosity(parser, subcommand=True)


def run_assemble(args: argparse.Namespace) -> int:
    """Check and merge the shards; list the wheels on stdout, where the report went on
    stderr (``-q``: neither); the last line is the absolute output dir."""
    output_dir = Path(os.path.abspath(args.output_dir))
    report_dir = report_dir_for(output_dir, args.report_dir)
    for flag, path in (("--output-dir", output_dir), ("--report-dir", report_dir)):
        problem = output_dir_problem(path)
        if problem is not None:
            raise UsageError(f"{flag} {problem}", path=path)
    dirs = [Path(d) for d in args.shards]
    _check_apart(dirs, (output_dir, report_dir))
    assembly = plan_assembly(_scan(dirs))
    write_assembly(assembly, output_dir, report_dir, force=args.force)
    if not getattr(args, "quiet", False):
        from kpack.common.tables import print_tables

        print_tables([assembly.report.wheels()])
        print(f"split report: {report_dir}", file=sys.stderr)
    print(output_line(output_dir))
    return 0


def _check_apart(dirs: Sequence[Path], outputs: Sequence[Path]) -> None:
    """No shard given twice; the outputs neither in a shard (or its reports) nor around one."""
    seen: dict[Path, Path] = {}
    for directory in dirs:
        real = directory.resolve()
        if real in seen:
            raise UsageError(f"the shard {directory} is given twice")
        seen[real] = directory
        for place in (real, report_dir_for(real, None)):
            for output in outputs:
                out = output.resolve()
                if out == place or place in out.parents or out in place.parents:
                    raise UsageError(f"{output} and the shard {directory} overlap")


def _scan(dirs: Sequence[Path]) -> list[Shard]:
    """Every shard read; the problems of all of them in one error."""
    shards: list[Shard] = []
    problems: list[str] = []
    for directory in dirs:
        try:
            shards.append(scan_shard(directory))
        except RocmPackagingError as exc:
            problems.append(_one_line(exc))
    if problems:
        raise PackagingError("cannot read the shards", problems=shown_list(problems))
    return shards


def _one_line(exc: RocmPackagingError) -> str:
    line = f"{exc.path}: {exc.message}" if exc.path else exc.message
    if not exc.problems:
        return line
    more = f"; and {len(exc.problems) - 3} more" if len(exc.problems) > 3 else ""
    return f"{line}: {'; '.join(exc.problems[:3])}{more}"


def write_assembly(
    assembly: Assembly, output_dir: Path, report_dir: Path, *, force: bool = False
) -> None:
    """Publish the wheels into ``output_dir`` and the merged report into ``report_dir``."""
    record = f"{RECORD_DIR}/{assembly.report.input_wheel}.json"
    stem = assembly.report_name.removesuffix(".json")
    with ExitStack() as stack:
        dist = stack.enter_context(staging(output_dir, TOOL))
        reports = stack.enter_context(staging(report_dir, TOOL))
        for name, source in assembly.files:
            _link_or_copy(source, dist / name)
        (reports / f"{stem}.json").write_bytes(assembly.report.to_json())
        (reports / f"{stem}.md").write_text(assembly.report.to_markdown(), encoding="utf-8")
        names = tuple(name for name, _ in assembly.files)
        publish_all(
            [
                Publication(dest=output_dir, staged=dist, outputs=names, record=record),
                Publication(
                    dest=report_dir,
                    staged=reports,
                    outputs=(f"{stem}.json", f"{stem}.md"),
                    record=record,
                ),
            ],
            tool=TOOL,
            force=force,
        )


def _link_or_copy(source: Path, dest: Path) -> None:
    try:
        os.link(source, dest)
    except OSError:
        shutil.copyfile(source, dest)
