"""The split report: per library, per device wheel and per GPU; JSON and Markdown, and
the list of the wheels written that the command line shows (:meth:`SplitReport.wheels`).

Only names and sizes go in, so the report is as deterministic as the wheels. Sizes are
decimal (``format_size``), targets in their natural order (``target_order``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict

from kpack.common.budget import WheelSize, budget_table
from kpack.common.cli import format_size
from kpack.common.dist_table import Listed, dist_table
from kpack.common.frozen import frozen
from kpack.common.tables import Table, markdown
from kpack.wheelsplit._bundles import device_keys, served_targets

__all__ = ["DeviceWheelRow", "GpuRow", "LibraryRow", "SplitReport", "gpu_rows"]


@frozen
class LibraryRow:
    arcname: str
    original: int
    stripped: int
    kernels: int

    @property
    def saved(self) -> int:
        return self.original - self.stripped


@frozen
class DeviceWheelRow:
    key: str
    dist_name: str
    filename: str
    level: str
    kernels: int
    archives: int
    database_files: int
    size: int


@frozen
class GpuRow:
    target: str
    wheels: tuple[str, ...]  # host first, then its device wheels
    download: int

    def saving(self, input_size: int) -> int:
        return input_size - self.download


@frozen
class SplitReport:
    input_wheel: str
    input_size: int
    host_wheel: str
    host_size: int
    unchanged: bool
    libraries: tuple[LibraryRow, ...]
    device_wheels: tuple[DeviceWheelRow, ...]
    gpus: tuple[GpuRow, ...]
    variant_wheels: tuple[str, ...]
    notes: tuple[str, ...]
    budget: tuple[WheelSize, ...] = ()  # every wheel against --max-wheel-size, if given
    targets: tuple[str, ...] = ()  # the device-wheel keys of the input, natural order
    shard_targets: tuple[str, ...] = ()  # those whose wheels this split wrote (--targets)

    @property
    def is_shard(self) -> bool:
        """Whether this split wrote only some of the input's device wheels."""
        return self.shard_targets != self.targets

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["libraries"] = [{**asdict(r), "saved": r.saved} for r in self.libraries]
        data["gpus"] = [
            {**asdict(g), "wheels": list(g.wheels), "saving": g.saving(self.input_size)}
            for g in self.gpus
        ]
        return data

    def to_json(self) -> bytes:
        return (json.dumps(self.to_dict(), indent=2) + "\n").encode("utf-8")

    def tables(self) -> tuple[Table, ...]:
        """The report's tables: libraries, device wheels, per GPU."""
        libraries = Table(
            title="Libraries",
            header=("library", "original", "stripped", "saved", "kernels"),
            rows=tuple(
                (
                    r.arcname,
                    format_size(r.original),
                    format_size(r.stripped),
                    format_size(r.saved),
                    str(r.kernels),
                )
                for r in self.libraries
            ),
            numeric=frozenset({1, 2, 3, 4}),
        )
        devices = Table(
            title="Device wheels",
            header=("wheel", "level", "kernels", "archives", "database files", "size"),
            rows=tuple(
                (
                    w.filename,
                    w.level,
                    str(w.kernels),
                    str(w.archives),
                    str(w.database_files),
                    format_size(w.size),
                )
                for w in self.device_wheels
            ),
            numeric=frozenset({2, 3, 4, 5}),
        )
        gpus = Table(
            title="Per GPU",
            header=("GPU", "downloads", "size", "saving"),
            rows=tuple(
                (
                    g.target,
                    " + ".join(g.wheels),
                    format_size(g.download),
                    _saving(g, self.input_size),
                )
                for g in self.gpus
            ),
            numeric=frozenset({2, 3}),
        )
        return libraries, devices, gpus

    def wheels(self) -> Table:
        """The wheels written, host first: what the command line lists on stdout."""
        holds = "host" + (" (unchanged)" if self.unchanged else "")
        files = [Listed(path=self.host_wheel, cells=(holds, "-", format_size(self.host_size)))]
        files += [
            Listed(path=w.filename, cells=(w.level, str(w.kernels), format_size(w.size)))
            for w in self.device_wheels
        ]
        return dist_table(  # 80 columns: the version and tag the wheels share in the title
            title=f"Split {{subject}} ({format_size(self.input_size)})",
            subject=self.input_wheel,
            files=files,
            header=("holds", "kernels", "size"),
            numeric=frozenset({1, 2}),
        )

    def to_markdown(self) -> str:
        lines = [
            f"# Split report: {self.input_wheel}",
            "",
            f"- input: {format_size(self.input_size)}",
            f"- host wheel: {self.host_wheel}, {format_size(self.host_size)}"
            + (" (unchanged: no device code)" if self.unchanged else ""),
            f"- targets: {', '.join(self.targets) or 'none'}",
            *([f"- this shard's device wheels: {', '.join(self.shard_targets)}"]
              if self.is_shard else []),
            "",
        ]  # fmt: skip
        for table in self.tables():
            lines += markdown(table)
        if self.variant_wheels:
            lines += ["## Variant wheels", "", *[f"- {n}" for n in self.variant_wheels], ""]
        if self.notes:
            lines += ["## Notes", "", *[f"- {n}" for n in self.notes], ""]
        if self.budget:
            lines += ["## Size budget", "", *budget_table(self.budget), ""]
        return "\n".join(lines)


def gpu_rows(host: str, host_size: int, rows: Sequence[DeviceWheelRow]) -> tuple[GpuRow, ...]:
    """Per GPU (each target a device wheel serves, its own or its generic target's): the
    host wheel plus the device wheels its user installs (chain and generic target)."""
    by_key = {r.key: r for r in rows}
    gpus = []
    for target in served_targets(by_key):
        wheels = [by_key[k] for k in device_keys(target, by_key)]
        gpus.append(
            GpuRow(target, (host, *(r.filename for r in wheels)),
                   host_size + sum(r.size for r in wheels))
        )  # fmt: skip
    return tuple(gpus)


def _saving(gpu: GpuRow, input_size: int) -> str:
    saving = gpu.saving(input_size)
    share = 100.0 * saving / input_size if input_size else 0.0
    return f"{format_size(saving)} ({share:.1f}%)"
