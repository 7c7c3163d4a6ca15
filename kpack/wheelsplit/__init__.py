"""Split a fat ROCm Python wheel into a host wheel and per-GPU device wheels.

``python -m kpack.tools.split_python_wheels --input X.whl --output-dir DIR
--device-package-prefix amd-torch-device [--overlay-root torch/]`` (or ``kpack split-wheel``):

- the host wheel keeps every file, except that each fat binary (any ELF or PE member with
  bundled device code, wherever it sits; only under the overlay root if one is given) has
  its device code cut out (kpack.md §3) and per-arch database files move out; its
  METADATA gains ``device-<key>`` and ``device-all`` extras. A fat binary left unsplit is
  an error naming it, unless ``--keep-fat GLOB`` names it;
- one device wheel per bundle key, ``<prefix>-<key>``, holding the ``.kpack`` archives
  (``<archive root>.kpack/<group>_<target>.kpack``: the overlay root, else each binary's
  top-level directory, :mod:`kpack.wheelsplit._plan`) and database files of that key and
  requiring ``<host>==<version>``;
  and, with ``--device-requires-dist``, its further requirements (``rocm-sdk-device-<key>``);
- optionally variant wheels (``-<label>`` and ``-null``) and ``<name>-<version>-variants.json``;
- a split report, as JSON and Markdown, beside the output dir (``<output-dir>-split-reports/``,
  or ``--report-dir``), never among the distributions.

``kpack split-wheel --targets …`` is a shard of the split: the host (and variant) wheels and
only those targets' device wheels (:mod:`kpack.wheelsplit._shards`); ``--print-shards N``
plans the shards (:mod:`kpack.wheelsplit._shard_plan`) and ``kpack assemble-wheel-shards``
merges them into the one-machine split (:mod:`kpack.wheelsplit._assemble`).

The input is a ``.whl`` or an unpacked wheel directory; ``--output-format directory`` writes
each wheel unpacked, as rocm-kpack does. Everything is built in staging directories and
published at the end under the output-directory rule (:mod:`kpack.common.outputs`): a
re-run replaces what the last split of the same input wrote, every other file stays, and on
any error the output directory is as it was.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Sequence
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from kpack.common import cancel
from kpack.common.boundary import guarded
from kpack.common.budget import check_budget
from kpack.common.cli import configure_logging, format_size
from kpack.common.lazy import lazy_face
from kpack.common.outputs import Publication, publish_all, staging
from kpack.common.progress import Progress, QuietProgress, make_progress
from kpack.common.safepath import output_dir_problem
from kpack.common.threadpool import ThreadPool
from kpack.common.workers import thread_min_bytes
from kpack.databases import load_handlers
from kpack.errors import PackagingError, RocmPackagingError, UsageError, shown_list
from kpack.targets import target_order
from kpack.wheelfile import InputWheel, Member, libdeflate
from kpack.wheelsplit._bundles import bundle_key, device_dist_name, level_of
from kpack.wheelsplit._cli import Parser, add_arguments
from kpack.wheelsplit._input import Source, open_source
from kpack.wheelsplit._kernels import KernelResult, host_size, split_binaries
from kpack.wheelsplit._metadata import (
    add_headers,
    device_metadata,
    extra_requirements,
    name_and_version,
    owner_requirements,
    variant_requirements,
    variant_targets,
)
from kpack.wheelsplit._once import warnings_once
from kpack.wheelsplit._options import SplitOptions, report_dir_for, resolve_options
from kpack.wheelsplit._outputs import (
    dist_info_name,
    host_layout,
    unpack_wheels,
    write_split_wheel,
)
from kpack.wheelsplit._plan import SplitPlan, plan_split
from kpack.wheelsplit._report import DeviceWheelRow, LibraryRow, SplitReport, gpu_rows
from kpack.wheelsplit._requires import check_requires, device_requires
from kpack.wheelsplit._shards import check_shard, kernel_scope
from kpack.wheelsplit._variant import (
    NULL_LABEL,
    merge_index,
    render_json,
    variant_document,
)
from kpack.wheelsplit._windows import check_windows_cases, check_windows_names

if TYPE_CHECKING:
    from kpack.wheelsplit._assemble_write import add_assemble_arguments, run_assemble
else:  # kpack assemble-wheel-shards' own: a split imports none of it (kpack.common.lazy)
    __getattr__, __dir__ = lazy_face(
        __name__,
        {"add_assemble_arguments": "_assemble_write", "run_assemble": "_assemble_write"},
    )

__all__ = [
    "Parser",
    "SplitOptions",
    "add_arguments",
    "add_assemble_arguments",
    "main",
    "name_and_version",
    "resolve_options",
    "run",
    "run_assemble",
    "split_wheel",
]

TOOL = "kpack split-wheel"
#: The split's records, one per input, in each output dir: hidden from ``twine upload dist/*``.
RECORD_DIR = ".kpack-split-wheel"

log = logging.getLogger(__name__)


def split_wheel(
    input_wheel: Path,
    output_dir: Path,
    options: SplitOptions,
    progress: Progress | None = None,
) -> SplitReport:
    """Split ``input_wheel`` (a ``.whl`` or an unpacked wheel directory) into
    ``output_dir`` and write its report beside it; publish both under the output-directory
    rule, all or nothing. ``progress`` hears of each phase and of every byte written."""
    progress = progress or QuietProgress()
    libdeflate()  # a missing wheel compressor is named before the split's work
    output_dir = Path(output_dir).absolute()
    report_dir = report_dir_for(output_dir, options.report_dir)
    handlers = load_handlers(options.databases)
    work_parent = Path(options.tmp_dir).absolute() if options.tmp_dir else output_dir
    with ExitStack() as stack:
        dist = stack.enter_context(staging(output_dir, TOOL))
        reports = stack.enter_context(staging(report_dir, TOOL))
        work = stack.enter_context(staging(work_parent, TOOL))
        if options.finalize is not None:
            input_wheel, options = _finalized(Path(input_wheel), options, work)
        progress.phase(f"reading {Path(input_wheel).name}")
        source = open_source(Path(input_wheel), work, options.limits)
        with warnings_once():
            plan = plan_split(source.wheel, options.overlay_root, handlers, options.keep_fat)
            if plan.empty:
                report = _unchanged(source, dist, plan, options, progress)
            else:
                report = _split(source, plan, work, dist, options, progress)
        if options.max_wheel_size is not None:
            budget = check_budget(sorted(dist.glob("*.whl")), options.max_wheel_size)
            report = dataclasses.replace(report, budget=budget)
        if options.output_format == "directory":
            unpack_wheels(dist)
        stem = f"{source.wheel.name}-{source.wheel.version}-split-report"
        (reports / f"{stem}.json").write_bytes(report.to_json())
        (reports / f"{stem}.md").write_text(report.to_markdown(), encoding="utf-8")
        record = f"{RECORD_DIR}/{source.filename}.json"
        publish_all(
            [
                Publication(dest=output_dir, staged=dist, outputs=_listed(dist), record=record),
                Publication(
                    dest=report_dir, staged=reports, outputs=_listed(reports), record=record
                ),
            ],
            tool=TOOL,
            force=options.force,
        )
    return report


def _finalized(input_wheel: Path, options: SplitOptions, work: Path) -> tuple[Path, SplitOptions]:
    """``--finalize``: the input made a member of the rocm-sdk set (unpacked in ``work``),
    and the options whose device wheels carry the same pins on the set."""
    from kpack.finalize import finalized_tree

    assert options.finalize is not None
    if input_wheel.is_dir():
        raise UsageError("--finalize takes a .whl, not an unpacked wheel directory")
    tree, done = finalized_tree(input_wheel, options.finalize, work)
    requires = (*options.requires, *check_requires(done.pins))
    return tree, dataclasses.replace(options, requires=requires)


def _content_bytes(*member_lists: Sequence[Member]) -> int:
    """What the wheel writer will read of these members, as far as it is known before."""
    total = 0
    for members in member_lists:
        for member in members:
            content = member.source
            if isinstance(content, Path):
                total += content.stat().st_size
            elif isinstance(content, bytes):
                total += len(content)
            else:
                total += getattr(content, "size", 0)
    return total


def _listed(directory: Path) -> tuple[str, ...]:
    return tuple(sorted(os.listdir(directory)))


def _unchanged(
    source: Source, staging: Path, plan: SplitPlan, options: SplitOptions, progress: Progress
) -> SplitReport:
    wheel = source.wheel
    if options.targets is not None:
        check_shard(options.targets, (), source.filename)
    note = f"no fat binaries or database files {plan.where}; host wheel unchanged"
    log.warning("%s: %s", source.filename, note)
    if source.is_dir:  # a directory becomes the wheel it holds, with a new RECORD
        members = host_layout(wheel, {}, frozenset()).members
        written = write_split_wheel(
            staging,
            wheel,
            dist_name=wheel.name,
            version=wheel.version,
            members=members,
            metadata=wheel.metadata,
            jobs=options.jobs,
            progress=progress,
        )
        name, size = written.path.name, written.size
    else:
        shutil.copyfile(wheel.path, staging / source.filename)
        name, size = source.filename, source.size
    return SplitReport(
        source.filename, source.size, name, size, True, (), (), (), (), (*plan.notes, note),
        targets=(), shard_targets=(),
    )  # fmt: skip


def _split(
    source: Source,
    plan: SplitPlan,
    work: Path,
    staging: Path,
    options: SplitOptions,
    progress: Progress,
) -> SplitReport:
    wheel = source.wheel
    host_name, version = name_and_version(wheel.metadata, f"{wheel.dist_info}/METADATA")
    fat_bytes = sum(f.entry.size for f in plan.fat)
    fat = f"{len(plan.fat)} fat binar{'y' if len(plan.fat) == 1 else 'ies'}"
    moving = f", {len(plan.databases)} database files to move" if plan.databases else ""
    shard = "" if options.targets is None else f"; device wheels of {', '.join(options.targets)}"
    progress.phase(
        f"splitting the device code out of {fat} ({format_size(fat_bytes)}){moving}{shard}"
    )
    scope = None if options.targets is None else kernel_scope(options.targets)
    kernels = split_binaries(
        plan, wheel.root, work, scheme=options.scheme, level=options.level, jobs=options.jobs,
        scope=scope,
    )  # fmt: skip
    present = sorted({*map(bundle_key, kernels.targets), *(d.key for d in plan.databases)},
                     key=target_order)  # fmt: skip
    if options.targets is not None:
        check_shard(options.targets, present, source.filename)
    keys = tuple(present) if options.targets is None else options.targets
    progress.phase(
        f"{sum(a.kernels for a in kernels.archives)} kernels in {len(kernels.archives)} "
        f"archives ({format_size(sum(a.archive.size for a in kernels.archives))})"
    )
    check_windows_names(source.filename, wheel, kernels.archives)
    groups = _device_groups(plan, kernels, wheel, keys)
    counts = {a.arcname: a.kernels for a in kernels.archives}
    moved = frozenset(d.entry.arcname for d in plan.databases)
    layout = host_layout(wheel, kernels.stripped, moved)
    _check_disjoint(layout.arcnames, groups)
    check_windows_cases(wheel, layout.arcnames, groups)
    extras = extra_requirements(options.device_package_prefix, version, present)
    where = f"{wheel.dist_info}/METADATA"
    write_host = partial(
        write_split_wheel, staging, wheel, dist_name=wheel.name, version=wheel.version,
        members=layout.members, metadata=add_headers(wheel.metadata, extras, where),
        jobs=options.jobs, progress=progress,
    )  # fmt: skip
    wheels = 1 + len(groups) + (2 if options.variant else 0)
    progress.set_total(
        _content_bytes(layout.members, *groups.values()) * (3 if options.variant else 1),
        f"writing {wheels} wheels",
    )
    with ThreadPool(max_workers=1, thread_name_prefix="host-wheel") as pool:
        # with workers to spare and enough to write, the host wheel (hashing and copying,
        # mostly) is written while the device wheels are
        threaded = options.jobs > 1 and _content_bytes(layout.members) >= thread_min_bytes()
        later = pool.submit(write_host) if threaded else None
        host = write_host() if later is None else None
        rows = [
            _device_wheel(
                staging, wheel, key, members, host_name, version, options, counts, present,
                progress,
            )
            for key, members in sorted(groups.items(), key=lambda kv: target_order(kv[0]))
        ]  # fmt: skip
        host = cancel.result(later) if later is not None else host
    assert host is not None
    variants = _variants(
        staging, wheel, layout.members, present, extras, version, options, progress
    ) if options.variant else ()  # fmt: skip
    libraries = tuple(
        LibraryRow(f.entry.arcname, f.entry.size, host_size(kernels.stripped[f.entry.arcname]),
                   kernels.kernels[f.entry.arcname])
        for f in plan.fat
    )  # fmt: skip
    return SplitReport(
        source.filename, source.size, host.path.name, host.size, False, libraries,
        tuple(rows), gpu_rows(host.path.name, host.size, rows), variants,
        (*plan.notes, *kernels.notes), targets=tuple(present), shard_targets=keys,
    )  # fmt: skip


def _device_groups(
    plan: SplitPlan, kernels: KernelResult, wheel: InputWheel, keys: Sequence[str]
) -> dict[str, list[Member]]:
    """Bundle key -> the device wheel's members (archives, then database files), for the
    device wheels of ``keys`` (a shard's; else every key)."""
    groups: dict[str, list[Member]] = {}
    for archive in kernels.archives:
        if (key := bundle_key(archive.target)) in keys:
            groups.setdefault(key, []).append(Member(archive.arcname, archive.archive.source()))
    for db in plan.databases:  # at its install path: the host's .data dir is not theirs
        if db.key in keys:
            groups.setdefault(db.key, []).append(
                Member(db.install_path, wheel.root / db.entry.arcname,
                       executable=db.entry.executable)
            )  # fmt: skip
    return groups


def _check_disjoint(host: frozenset[str], groups: dict[str, list[Member]]) -> None:
    """A device wheel must never own a file the host wheel (or another device wheel) owns."""
    owner: dict[str, str] = {name: "the host wheel" for name in host}
    problems = []
    for key, members in sorted(groups.items()):
        for member in members:
            if member.arcname in owner:
                problems.append(f"{member.arcname}: device wheel {key} and {owner[member.arcname]}")
            owner.setdefault(member.arcname, f"device wheel {key}")
    if problems:
        raise PackagingError("two wheels would own the same file", problems=problems)


def _device_wheel(
    staging: Path, wheel: InputWheel, key: str, members: list[Member], host: str, version: str,
    options: SplitOptions, counts: dict[str, int], present: Iterable[str], progress: Progress,
) -> DeviceWheelRow:  # fmt: skip
    dist = device_dist_name(options.device_package_prefix, key)
    members = _in_own_data_dir(members, wheel, dist, version)
    owners = owner_requirements(options.device_package_prefix, version, key, present)
    requires = [*owners, *device_requires(options.requires, key)]
    result = write_split_wheel(
        staging, wheel, dist_name=dist, version=version, members=members,
        metadata=device_metadata(dist, version, host, key, requires), jobs=options.jobs,
        progress=progress,
    )  # fmt: skip
    archives = [m for m in members if m.arcname in counts]
    kernel_count = sum(counts[m.arcname] for m in archives)
    return DeviceWheelRow(
        key, dist, result.path.name, level_of(key).value, kernel_count, len(archives),
        len(members) - len(archives), result.size,
    )  # fmt: skip


def _in_own_data_dir(
    members: list[Member], wheel: InputWheel, dist: str, version: str
) -> list[Member]:
    """Files that install beside the host's ``<name>.data/<scheme>/`` files (archives of a
    binary there, database files there) go to the device wheel's own ``.data`` dir."""
    ours = dist_info_name(dist, version).removesuffix(".dist-info") + ".data/"
    theirs = f"{wheel.data_dir}/"
    return [
        dataclasses.replace(m, arcname=ours + m.arcname[len(theirs) :])
        if m.arcname.startswith(theirs)
        else m
        for m in members
    ]


def _variants(
    staging: Path, wheel: InputWheel, host_members: Sequence[Member], keys: Sequence[str],
    extras: list[str], version: str, options: SplitOptions, progress: Progress,
) -> tuple[str, ...]:  # fmt: skip
    values, unknown = variant_targets(keys)
    if unknown:
        log.warning(
            "targets unknown to the amd :: gfx_arch provider, left out of the variant "
            "properties: %s", ", ".join(unknown),
        )  # fmt: skip
    where = f"{wheel.dist_info}/METADATA"
    info = dist_info_name(wheel.name, wheel.version)
    wanted = [(options.variant_label, values)] if values else []
    docs, names = [], []
    for label, props in [*wanted, (NULL_LABEL, [])]:
        doc = variant_document(label, props, options.variant_schema)
        lines = extras + variant_requirements(options.device_package_prefix, version, keys) \
            if props else extras  # fmt: skip
        members = [*host_members, Member(f"{info}/variant.json", render_json(doc))]
        result = write_split_wheel(
            staging, wheel, dist_name=wheel.name, version=wheel.version, members=members,
            metadata=add_headers(wheel.metadata, lines, where), jobs=options.jobs, label=label,
            progress=progress,
        )  # fmt: skip
        docs.append(doc)
        names.append(result.path.name)
    index = staging / f"{info.removesuffix('.dist-info')}-variants.json"
    index.write_bytes(render_json(merge_index(docs)))
    return (*names, index.name)


def _compat_options(args: argparse.Namespace) -> None:
    """rocm-kpack's options we take as they are: a notice for the one we have no use for;
    ``--tmp-dir`` must be a directory, and becomes the temp dir of this process and its
    workers too."""
    if getattr(args, "clang_offload_bundler", None) is not None:
        print(
            f"notice: --clang-offload-bundler {args.clang_offload_bundler} is not needed and "
            "ignored: offload bundles are read in-process",
            file=sys.stderr,
        )
    tmp_dir = getattr(args, "tmp_dir", None)
    if tmp_dir is not None:
        if not Path(tmp_dir).is_dir():
            raise UsageError("--tmp-dir is not an existing directory", path=tmp_dir)
        tempfile.tempdir = str(Path(tmp_dir).absolute())
        os.environ["TMPDIR"] = tempfile.tempdir


def run(args: argparse.Namespace) -> int:
    """Split as ``args`` say, showing progress on stderr (a live display on a terminal,
    log lines otherwise); list the wheels written on stdout and say where the report went
    on stderr (the CLI's work; ``-q``: neither); the last line is the absolute output dir.
    An error's list of problems is cut to a few entries and a count."""
    _compat_options(args)
    options = resolve_options(args)
    if getattr(args, "print_shards", None) is not None:
        return _print_shards(args, options)
    if args.output_dir is None:
        raise UsageError("--output-dir is required (unless --print-shards)")
    report_dir = report_dir_for(args.output_dir, options.report_dir)
    if not os.path.exists(args.input):  # a path on the command line that is not there
        raise UsageError("--input: no such file or directory", path=args.input)
    for flag, path in (("--output-dir", args.output_dir), ("--report-dir", report_dir)):
        problem = output_dir_problem(path)
        if problem is not None:
            raise UsageError(f"{flag} {problem}", path=path)
    quiet = bool(getattr(args, "quiet", False))
    progress = make_progress(quiet=quiet)
    try:
        report = split_wheel(args.input, args.output_dir, options, progress)
    except RocmPackagingError as exc:
        if len(exc.problems) <= len(shown_list(exc.problems)):
            raise
        raise type(exc)(exc.message, path=exc.path, problems=shown_list(exc.problems)) from None
    finally:
        progress.close()
    if not quiet:
        from kpack.common.tables import print_tables

        print_tables([report.wheels()])
        for note in report.notes if getattr(args, "verbose", 0) else ():
            print(f"note: {note}", file=sys.stderr)
        notes = f", with {len(report.notes)} notes" if report.notes else ""
        print(f"split report{notes}: {Path(report_dir).absolute()}", file=sys.stderr)
    print(Path(args.output_dir).absolute())  # the last line: where the outputs went
    return 0


def _print_shards(args: argparse.Namespace, options: SplitOptions) -> int:
    """``--print-shards N``: the plan as JSON on stdout; nothing is written."""
    import json

    from kpack.wheelsplit._shard_plan import check_plannable, plan_wheel_shards

    check_plannable(args.print_shards, options)
    if args.output_dir is not None:
        raise UsageError("--print-shards writes nothing: drop --output-dir")
    if not os.path.exists(args.input):
        raise UsageError("--input: no such file or directory", path=args.input)
    with warnings_once():
        shards = plan_wheel_shards(args.input, args.print_shards, options)
    print(json.dumps([s.to_json() for s in shards], indent=2))
    return 0


def main(
    argv: Sequence[str] | None = None, prog: str = "python -m kpack.tools.split_python_wheels"
) -> int:
    """The wheel splitter's command line (also rocm-kpack's ``split_python_wheels``): usage
    errors and bad input are one ``error:`` line, a list of problems on the lines after."""
    parser = Parser(prog=prog, description=__doc__.splitlines()[0])
    add_arguments(parser)

    def _run(argv: Sequence[str] | None) -> int:
        args = parser.parse_args(argv)
        configure_logging(args, fmt="%(levelname)s %(name)s: %(message)s")
        return run(args)

    return guarded(_run, argv)


if __name__ == "__main__":
    sys.exit(main())
