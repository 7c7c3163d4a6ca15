"""The shards of a wheel split, checked against each other and merged (planned; nothing
written here: :mod:`kpack.wheelsplit._assemble_write` publishes).

A shard is the output dir of one ``kpack split-wheel --targets …`` run, with its report
where that run puts it (``<dir>-split-reports/``). :func:`scan_shard` reads one;
:func:`plan_assembly` checks them all and returns the merged split, or one
:class:`PackagingError` listing every problem, each naming the shard and the file:

- every report is of the same input (file name and size) and lists the same targets of
  it; the fields every shard computes alike (host wheel, libraries, variant wheels, notes)
  agree;
- the shards' targets are disjoint and together every target of the input, each once (a
  missing shard leaves its targets uncovered);
- each shard holds exactly the files its report lists (a file it does not list is
  foreign), regular files, device wheels of the sizes its report gives;
- the host wheel, the variant wheels and the variants index are byte-identical in every
  shard; a device wheel's file name is in one shard only.

The merged report is the one-machine split's: device rows united in natural order, per-GPU
rows recomputed over every device wheel, the size budget's rows united.
"""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from kpack.common.budget import WheelSize
from kpack.common.frozen import frozen
from kpack.common.output_record import file_sha256
from kpack.errors import PackagingError, UsageError
from kpack.targets import target_order
from kpack.wheelsplit._options import report_dir_for
from kpack.wheelsplit._report import SplitReport, gpu_rows
from kpack.wheelsplit._report_read import read_report

__all__ = ["Assembly", "Shard", "plan_assembly", "scan_shard"]

#: The split's records in a shard's output dir (not an output: never assembled).
SPLIT_RECORDS = ".kpack-split-wheel"
REPORT_SUFFIX = "-split-report.json"
#: Fields of a report every shard computes alike, whatever its targets.
_SHARED = ("unchanged", "libraries", "variant_wheels", "notes")


@frozen(kw_only=True)
class Shard:
    """One shard's output dir: its report and the files in it (by name)."""

    path: Path
    report_path: Path
    report: SplitReport
    files: dict[str, Path]
    bad: tuple[str, ...]  # entries that are not regular files

    def name(self, file: str) -> str:
        """How a problem names one of its files: ``<shard dir>/<file>``."""
        return f"{self.path}/{file}"


@frozen(kw_only=True)
class Assembly:
    """The merged split: its report, the file name of its report, and every output file
    (from the first shard that holds it)."""

    report: SplitReport
    report_name: str
    files: tuple[tuple[str, Path], ...]


def scan_shard(path: Path) -> Shard:
    """Read one shard: its report (beside it, ``<dir>-split-reports/``) and its files."""
    if not path.is_dir():
        raise UsageError("not a directory (a shard is the --output-dir of a split)", path=path)
    reports_dir = report_dir_for(path, None)
    found = sorted(reports_dir.glob(f"*{REPORT_SUFFIX}")) if reports_dir.is_dir() else []
    if len(found) != 1:
        what = "no split report" if not found else f"{len(found)} split reports (one input each)"
        raise PackagingError(
            f"{what} in {reports_dir.name}/ beside it (shards keep split-wheel's default "
            "--report-dir)",
            path=path,
        )
    files: dict[str, Path] = {}
    bad: list[str] = []
    with os.scandir(path) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            mode = entry.stat(follow_symlinks=False).st_mode
            if entry.name == SPLIT_RECORDS and stat.S_ISDIR(mode):
                continue
            if stat.S_ISREG(mode):
                files[entry.name] = Path(entry.path)
            else:
                bad.append(entry.name)
    report = read_report(found[0])
    return Shard(path=path, report_path=found[0], report=report, files=files, bad=tuple(bad))


def plan_assembly(shards: Sequence[Shard]) -> Assembly:
    """Check ``shards`` (see the module docstring) and merge them."""
    if not shards:
        raise UsageError("no shard given")
    first = shards[0]
    problems: list[str] = []
    for shard in shards[1:]:
        _same_input(shard, first, problems)
    if problems:  # shards of other inputs: nothing else is comparable
        raise PackagingError("the shards are not of one split", problems=problems)
    _coverage(shards, problems)
    digests: dict[str, tuple[str, Shard]] = {}  # file -> (sha256, or a device wheel's key)
    for shard in shards:
        _shard_files(shard, digests, problems)
    if problems:
        raise PackagingError("cannot assemble the shards", problems=problems)
    return _merged(shards, digests)


def _same_input(shard: Shard, first: Shard, problems: list[str]) -> None:
    mine, theirs = shard.report, first.report
    where = str(shard.report_path)
    if shard.report_path.name != first.report_path.name:
        problems.append(f"{where}: not the report of {first.report_path.name}'s input")
    if (mine.input_wheel, mine.input_size) != (theirs.input_wheel, theirs.input_size):
        problems.append(
            f"{where}: a split of {mine.input_wheel} ({mine.input_size} bytes), not of "
            f"{theirs.input_wheel} ({theirs.input_size} bytes) as {first.report_path}"
        )
        return
    if mine.targets != theirs.targets:
        problems.append(
            f"{where}: the input's targets are {', '.join(mine.targets)}, not "
            f"{', '.join(theirs.targets)} as in {first.report_path}"
        )
    if (mine.host_wheel, mine.host_size) != (theirs.host_wheel, theirs.host_size):
        problems.append(
            f"{where}: host wheel {mine.host_wheel} of {mine.host_size} bytes, not "
            f"{theirs.host_wheel} of {theirs.host_size} bytes as in {first.report_path} "
            "(split with other options?)"
        )
    for field in _SHARED:
        if getattr(mine, field) != getattr(theirs, field):
            problems.append(f"{where}: {field} differs from {first.report_path}'s")
    if {w.budget for w in mine.budget} != {w.budget for w in theirs.budget}:
        problems.append(f"{where}: --max-wheel-size differs from {first.report_path}'s")


def _coverage(shards: Sequence[Shard], problems: list[str]) -> None:
    """Every target of the input in exactly one shard, and no other target."""
    targets = shards[0].report.targets
    owner: dict[str, Shard] = {}
    for shard in shards:
        rows = tuple(r.key for r in shard.report.device_wheels)
        if rows != shard.report.shard_targets:
            problems.append(
                f"{shard.report_path}: device wheels of {', '.join(rows) or 'none'}, but its "
                f"targets are {', '.join(shard.report.shard_targets) or 'none'}"
            )
        for key in shard.report.shard_targets:
            if key not in targets:
                problems.append(f"{shard.report_path}: {key} is not a target of the input")
            elif key in owner:
                problems.append(f"{key}: in two shards, {owner[key].path} and {shard.path}")
            else:
                owner[key] = shard
    missing = [k for k in targets if k not in owner]
    if missing:
        problems.append(
            f"{', '.join(missing)}: in no shard (a shard missing?); the input's targets are "
            f"{', '.join(targets)}"
        )


def _shard_files(shard: Shard, digests: dict[str, tuple[str, Shard]], problems: list[str]) -> None:
    """The shard's files against its report; shared files against the other shards'."""
    report = shard.report
    keys = {r.filename: r.key for r in report.device_wheels}
    sizes = {
        report.host_wheel: report.host_size,
        **{r.filename: r.size for r in report.device_wheels},
    }
    listed = {report.host_wheel, *report.variant_wheels, *keys}
    unpacked = {f"{n}.whl" for n in shard.bad if f"{n}.whl" in listed}
    problems += [
        f"{shard.name(n)}: an unpacked wheel (--output-format directory): assemble shards "
        "that wrote wheels"
        if f"{n}.whl" in unpacked
        else f"{shard.name(n)}: not a regular file"
        for n in shard.bad
    ]
    problems += [
        f"{shard.name(n)}: foreign file (not among the outputs {shard.report_path.name} lists)"
        for n in shard.files
        if n not in listed
    ]
    for name in sorted(listed):
        path = shard.files.get(name)
        if path is None:
            if name not in shard.bad and name not in unpacked:
                problems.append(f"{shard.name(name)}: missing (its report lists it)")
            continue
        size = path.stat().st_size
        if name in sizes and size != sizes[name]:
            problems.append(f"{shard.name(name)}: {size} bytes; its report says {sizes[name]}")
        if name in keys:  # a device wheel: in this shard only
            earlier = digests.setdefault(name, (keys[name], shard))
            if earlier[1] is not shard and earlier[0] != keys[name]:  # same key: told above
                problems.append(f"{shard.name(name)}: also in {earlier[1].path}")
            continue
        digest = file_sha256(path)
        earlier = digests.setdefault(name, (digest, shard))
        if earlier[0] != digest:
            problems.append(f"{shard.name(name)}: differs from {earlier[1].name(name)}")


def _merged(shards: Sequence[Shard], digests: dict[str, tuple[str, Shard]]) -> Assembly:
    first = shards[0].report
    rows = sorted(
        (r for s in shards for r in s.report.device_wheels), key=lambda r: target_order(r.key)
    )
    budget: dict[str, WheelSize] = {}
    for shard in shards:
        budget.update((row.name, row) for row in shard.report.budget)
    report = dataclasses.replace(
        first,
        device_wheels=tuple(rows),
        gpus=gpu_rows(first.host_wheel, first.host_size, rows),
        budget=tuple(budget[n] for n in sorted(budget)),
        shard_targets=first.targets,
    )
    files = tuple((name, shard.files[name]) for name, (_, shard) in sorted(digests.items()))
    return Assembly(report=report, report_name=shards[0].report_path.name, files=files)
