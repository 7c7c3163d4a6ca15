"""The shards' reports merged into the one report an unsharded build would write.

Device rows are united (the same wheel's rows must agree), the generic rows must be the
same in every shard, and every row must name a file the shards hold, of its kind and
size; a device row's kernels and database files must be those counted in its wheel. The
per-target download rows are computed again over all device wheels, since a shard's own
rows count only its share (a legacy set's per-family rows, which no sharding splits, must
be the same in every shard and are kept). The size budget rows (``--max-wheel-size``) are
united: every shard must have been built with the same budget (or none), each row names a
wheel of the output and its size, every wheel has one and none is over the budget. Without a
report in some shard the merge is skipped with a notice.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from build_tools.report import DeviceRow, GenericRow, Report, TargetRow, target_rows
from kpack.common.budget import WheelSize
from kpack.common.cli import format_over, format_size
from kpack.targets import target_order

from .report import REPORT_JSON, shown
from .scan import REQUIRED_WHEELS, DistFile, Kind, Shard, device_target

__all__ = ["merge_reports"]


def merge_reports(
    shards: Sequence[Shard],
    files: Sequence[DistFile],
    version: str,
    problems: list[str],
    notices: list[str],
    *,
    mode: str = "kpack",
) -> Report | None:
    """The shards' reports as one over ``files``, the planned output; None (with a notice)
    when some shard has no report. Problems are added to ``problems``."""
    absent = [str(s.directory) for s in shards if s.report is None]
    if absent:
        notices.append(f"no {REPORT_JSON} in {', '.join(absent)}: report merge skipped")
        return None
    reports = [s.report for s in shards if s.report is not None]
    device = _unite((r for rep in reports for r in rep.device_wheels), "wheel", "device", problems)
    generic = _unite((r for rep in reports for r in rep.generic), "wheel", "generic", problems)
    holding = [s for s in shards if s.report is not None and s.report.generic]  # not device-only
    generic_rows = holding[0].report.generic if holding and holding[0].report else ()
    problems += [
        f"{s.directory}'s {REPORT_JSON}: generic rows differ from {holding[0].directory}'s"
        for s in holding[1:]
        if s.report is not None and generic_rows != s.report.generic
    ]
    _check_rows(files, device, generic, problems)
    _check_counts(shards, files, problems)
    problems += [
        f"report.json has no device_wheels row for {f.name}"
        for f in files
        if f.kind is Kind.DEVICE and f.name not in {r.wheel for r in device}
    ]
    device.sort(key=lambda r: (target_order(r.target), r.wheel))  # as build_tools.report
    if mode == "legacy":
        problems += [
            f"{s.directory}'s {REPORT_JSON}: family rows differ from {shards[0].directory}'s"
            for s in shards[1:]
            if s.report is not None and reports[0].targets != s.report.targets
        ]
        targets = reports[0].targets
    else:
        targets = _target_rows(files)
    budget = _merge_budget(shards, files, problems)
    return Report(version, mode, tuple(device), targets, generic_rows, budget)


def _merge_budget(
    shards: Sequence[Shard], files: Sequence[DistFile], problems: list[str]
) -> tuple[WheelSize, ...]:
    """Every wheel against the size budget the shards were built with: one budget for all
    (a disagreement is one problem), a row for each wheel of the output, of its size, and
    none over the budget."""
    budget = _one_budget(shards, problems)
    if budget is None:
        return ()
    reports = [s.report for s in shards if s.report is not None]
    rows = _unite((r for rep in reports for r in rep.budget), "name", "budget", problems)
    wheels = {f.name: f for f in files if f.name.endswith(".whl")}
    for row in rows:
        f = wheels.get(row.name)
        if f is None:
            problems.append(f"{REPORT_JSON}: budget row for {shown(row.name)}, no wheel's")
        elif f.size != row.size:
            problems.append(f"{REPORT_JSON}: {f.name} budget size {row.size}, the file's {f.size}")
    listed = {r.name for r in rows}
    problems += [f"{REPORT_JSON} has no budget row for {n}" for n in wheels if n not in listed]
    problems += [
        f"{f.name}: {format_over(f.size, budget)} (--max-wheel-size)"
        for f in wheels.values()
        if f.size > budget
    ]
    return tuple(rows)


def _one_budget(shards: Sequence[Shard], problems: list[str]) -> int | None:
    """The budget every shard's report gives (None: none gives one); when they disagree,
    one problem naming each budget and its shards, and None."""
    said: dict[int | None, list[str]] = {}
    for shard in shards:
        rows = shard.report.budget if shard.report is not None else ()
        for budget in {r.budget for r in rows} or {None}:
            said.setdefault(budget, []).append(str(shard.directory))
    if len(said) == 1:
        return next(iter(said))
    problems.append(
        f"the shards' {REPORT_JSON} files disagree on the size budget (--max-wheel-size): "
        + "; ".join(
            f"{'none' if b is None else format_size(b)} in {', '.join(dirs)}"
            for b, dirs in sorted(said.items(), key=lambda item: item[0] or 0)
        )
    )
    return None


def _unite(rows: Iterable[Any], key: str, what: str, problems: list[str]) -> list[Any]:
    kept: dict[str, Any] = {}
    for row in rows:
        name = getattr(row, key)
        if kept.setdefault(name, row) != row:
            problems.append(f"report.json: {what} rows for {name} disagree: {kept[name]} vs {row}")
    return [kept[k] for k in sorted(kept)]


def _target_rows(files: Sequence[DistFile]) -> tuple[TargetRow, ...]:
    """What each GPU user downloads against a fat install, as ``build_tools.report``
    computes it for one build."""
    base = sum(f.size for f in files if f.project in REQUIRED_WHEELS and f.platforms)
    devices = [(f.target or "", f.name, f.size) for f in files if f.kind is Kind.DEVICE]
    return target_rows(base, devices)


def _check_rows(
    files: Sequence[DistFile],
    device: Sequence[DeviceRow],
    generic: Sequence[GenericRow],
    problems: list[str],
) -> None:
    """Every row names a file of its kind (a device row: of its target) and its size."""
    by_name = {f.name: f for f in files}
    rows: list[DeviceRow | GenericRow] = [*device, *generic]
    for row in rows:
        f = by_name.get(row.wheel)
        if f is None:
            problems.append(f"report.json lists {shown(row.wheel)}, which no shard holds")
            continue
        if f.size != row.size:
            problems.append(f"report.json: {row.wheel} size {row.size}, but the file has {f.size}")
        if isinstance(row, GenericRow) and f.kind is Kind.DEVICE:
            problems.append(f"report.json: generic row for the device wheel {row.wheel}")
        elif isinstance(row, DeviceRow) and f.target != device_target(row.target):
            problems.append(
                f"report.json: device row for {row.wheel} names target {shown(row.target)}"
                + (f", the wheel's is {f.target}" if f.target else ", but it is no device wheel")
            )


def _check_counts(shards: Sequence[Shard], files: Sequence[DistFile], problems: list[str]) -> None:
    """A device row's kernels and database files are the wheel's, as counted in it when
    the shard was read: never taken on trust."""
    held = {f.name: f.contents for f in files if f.kind is Kind.DEVICE}
    for shard in shards:
        rows = shard.report.device_wheels if shard.report is not None else ()
        for row in rows:
            contents = held.get(row.wheel)
            if contents is None:
                continue  # no such device wheel: a problem of _check_rows
            problems += [
                f"{shard.directory}'s {REPORT_JSON}: device row for {row.wheel} says {said} "
                f"{what}, the wheel holds {has}"
                for what, said, has in (
                    ("kernels", row.kernels, contents.kernels),
                    ("database files", row.database_files, contents.database_files),
                )
                if said != has
            ]
