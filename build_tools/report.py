"""The build report, next to ``dist/`` (never inside it, so ``twine upload dist/*`` takes
distributions only): ``report.json`` and ``report.md``.

Kpack-split mode: what each device wheel holds and what each GPU user downloads, against a fat
install (every architecture's device code). Legacy mode: every package with its size, and what
each GPU family's user downloads (core + that family's libraries wheel). Either mode, given
``--max-wheel-size``: every wheel against that budget (its size and share, as
``kpack split-wheel``'s report shows it). Sizes are decimal (kB, MB, GB), as everywhere the
tools print one.
"""

from __future__ import annotations

import json
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from packaging.utils import parse_wheel_filename

from kpack.archive import KpackArchive
from kpack.common.budget import WheelSize, budget_table
from kpack.common.cli import format_size
from kpack.generic_targets import generic_table
from kpack.targets import target_order

__all__ = [
    "REPORT_JSON",
    "REPORT_MD",
    "DeviceRow",
    "Report",
    "TargetRow",
    "count_contents",
    "make_legacy_report",
    "make_report",
    "render_markdown",
    "target_rows",
]


REPORT_JSON = "report.json"
REPORT_MD = "report.md"


@dataclass(frozen=True)
class DeviceRow:
    target: str
    wheel: str
    size: int
    kernels: int
    database_files: int


@dataclass(frozen=True)
class TargetRow:
    target: str
    download_bytes: int  # core + libraries + the device wheels this target's user installs
    fat_download_bytes: int  # core + libraries + every device wheel
    saving: float  # 1 - download / fat
    device_wheels: tuple[str, ...] = ()  # its own, then its generic target's


@dataclass(frozen=True)
class GenericRow:
    wheel: str
    size: int


@dataclass(frozen=True)
class Report:
    version: str
    mode: str
    device_wheels: tuple[DeviceRow, ...]
    targets: tuple[TargetRow, ...]
    generic: tuple[GenericRow, ...]
    #: Every wheel against ``--max-wheel-size`` (name: its path in ``dist/``), when given;
    #: as ``kpack split-wheel``'s report has them.
    budget: tuple[WheelSize, ...] = ()

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"


def count_contents(names: Iterable[str], kernels_in: Callable[[str], int]) -> tuple[int, int]:
    """(kernels, database files) of a device wheel whose members are ``names``, as its
    report row counts them: each ``.kpack`` archive's kernels (``kernels_in(name)``), and one
    database file per other member outside ``.dist-info/`` and ``.devel_links/``."""
    kernels = databases = 0
    for name in names:
        if ".dist-info/" in name or "/.devel_links/" in name or name.endswith("/"):
            continue
        if name.endswith(".kpack"):
            kernels += kernels_in(name)
        else:
            databases += 1
    return kernels, databases


def _count_kernels(wheel: Path) -> tuple[int, int]:
    """(kernels in its .kpack archives, database files) of one device wheel."""
    with zipfile.ZipFile(wheel) as zf, tempfile.TemporaryDirectory() as tmp:

        def kernels_in(name: str) -> int:
            path = Path(zf.extract(name, tmp))
            with KpackArchive.open(path) as archive:
                count = len(archive.keys())
            path.unlink()
            return count

        return count_contents(zf.namelist(), kernels_in)


def make_report(
    version: str, generic: Sequence[tuple[str, Path]], devices: Sequence[tuple[str, Path]]
) -> Report:
    """``generic``: (kind, wheel) of core/libraries/...; ``devices``: (target, wheel)."""
    rows = []
    for target, wheel in sorted(devices, key=lambda d: (target_order(d[0]), d[1])):
        kernels, databases = _count_kernels(wheel)
        rows.append(DeviceRow(target, wheel.name, wheel.stat().st_size, kernels, databases))
    base = sum(p.stat().st_size for kind, p in generic if kind in ("core", "libraries"))
    targets = target_rows(base, [(r.target, r.wheel, r.size) for r in rows])
    generic_rows = tuple(GenericRow(p.name, p.stat().st_size) for _, p in sorted(generic))
    return Report(version, "kpack", tuple(rows), targets, generic_rows)


def target_rows(base: int, devices: Sequence[tuple[str, str, int]]) -> tuple[TargetRow, ...]:
    """What each GPU user downloads: ``base`` (core + libraries) plus the device wheels
    that user installs (its processor's, then its generic target's), against a fat install
    (every device wheel), for every processor with device code. ``devices``: (target,
    wheel file name, size)."""
    by_target = {target: (wheel, size) for target, wheel, size in devices}
    fat = base + sum(size for _, size in by_target.values())
    table = generic_table()
    rows = []
    for target in table.served_processors(by_target):
        wheels = [by_target[k] for k in table.device_keys(target, by_target)]
        size = base + sum(s for _, s in wheels)
        saving = round(1 - size / fat, 4) if fat else 0.0
        rows.append(TargetRow(target, size, fat, saving, tuple(w for w, _ in wheels)))
    return tuple(rows)


def make_legacy_report(version: str, built: Sequence[tuple[str, str, Path]]) -> Report:
    """``built``: (kind, family, path) of every package written."""
    generic = tuple(GenericRow(p.name, p.stat().st_size) for _, _, p in sorted(built))
    core = sum(p.stat().st_size for kind, _, p in built if kind == "core")
    targets = []
    for _, family, path in sorted(b for b in built if b[0] == "libraries"):
        size = core + path.stat().st_size
        targets.append(TargetRow(family, size, size, 0.0))
    return Report(version, "legacy", (), tuple(targets), generic)


def render_markdown(report: Report) -> str:
    """``report.md``: the tables of its mode, then every wheel against the size budget."""
    body = _render_legacy(report) if report.mode == "legacy" else _render_kpack(report)
    if not report.budget:
        return body
    return body + "\n".join(["", "## Size budget", "", *budget_table(report.budget), ""])


def _render_kpack(report: Report) -> str:
    lines = [
        f"# ROCm {report.version}: device wheels",
        "",
        "| target | wheel | kernels | database files | size |",
        "| --- | --- | ---: | ---: | ---: |",
        *(
            f"| {r.target} | {r.wheel} | {r.kernels} | {r.database_files} | {format_size(r.size)} |"
            for r in report.device_wheels
        ),
        "",
        "## What each GPU user downloads",
        "",
        "| target | device wheels | download (core + libraries + device) | fat install | saving |",
        "| --- | --- | ---: | ---: | ---: |",
        *(
            f"| {t.target} | {', '.join(_device_label(w) for w in t.device_wheels)} "
            f"| {format_size(t.download_bytes)} | {format_size(t.fat_download_bytes)} "
            f"| {t.saving * 100:.1f} % |"
            for t in report.targets
        ),
        "",
    ]
    return "\n".join(lines)


def _device_label(wheel: str) -> str:
    """``rocm_sdk_device_gfx9_4_generic-7.1-py3-none-linux_x86_64.whl`` -> its project name,
    as pip installs it (``rocm-sdk-device-gfx9-4-generic``)."""
    return str(parse_wheel_filename(wheel)[0])


def _render_legacy(report: Report) -> str:
    lines = [
        f"# ROCm {report.version}: packages",
        "",
        "| package | size |",
        "| --- | ---: |",
        *(f"| {g.wheel} | {format_size(g.size)} |" for g in report.generic),
        "",
        "## What each GPU family's user downloads (`rocm[libraries]`)",
        "",
        "| family | download (core + libraries) |",
        "| --- | ---: |",
        *(f"| {t.target} | {format_size(t.download_bytes)} |" for t in report.targets),
        "",
    ]
    return "\n".join(lines)
