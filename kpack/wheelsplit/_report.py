"""The split report: per library, per device wheel and per GPU; JSON and Markdown, and
the list of the wheels written that the command line shows (:meth:`SplitReport.wheels`).

Only names and sizes go in, so the report is as deterministic as the wheels. Sizes are
decimal (``format_size``), targets in their natural order (``target_order``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from kpack.common.budget import WheelSize, budget_table
from kpack.common.cli import format_size
from kpack.common.tables import Table, markdown

__all__ = ["DeviceWheelRow", "GpuRow", "LibraryRow", "SplitReport"]


@dataclass(frozen=True)
class LibraryRow:
    arcname: str
    original: int
    stripped: int
    kernels: int

    @property
    def saved(self) -> int:
        return self.original - self.stripped


@dataclass(frozen=True)
class DeviceWheelRow:
    key: str
    dist_name: str
    filename: str
    level: str
    kernels: int
    archives: int
    database_files: int
    size: int


@dataclass(frozen=True)
class GpuRow:
    target: str
    wheels: tuple[str, ...]  # host first, then its device wheels
    download: int

    def saving(self, input_size: int) -> int:
        return input_size - self.download


@dataclass(frozen=True)
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
        host = (self.host_wheel, "host" + (" (unchanged)" if self.unchanged else ""), "-")
        rows = [(*host, format_size(self.host_size))]
        rows += [
            (w.filename, w.level, str(w.kernels), format_size(w.size)) for w in self.device_wheels
        ]
        return Table(
            title=f"Split {self.input_wheel} ({format_size(self.input_size)})",
            header=("wheel", "holds", "kernels", "size"),
            rows=tuple(rows),
            numeric=frozenset({2, 3}),
        )

    def to_markdown(self) -> str:
        lines = [
            f"# Split report: {self.input_wheel}",
            "",
            f"- input: {format_size(self.input_size)}",
            f"- host wheel: {self.host_wheel}, {format_size(self.host_size)}"
            + (" (unchanged: no device code)" if self.unchanged else ""),
            "",
        ]
        for table in self.tables():
            lines += markdown(table)
        if self.variant_wheels:
            lines += ["## Variant wheels", "", *[f"- {n}" for n in self.variant_wheels], ""]
        if self.notes:
            lines += ["## Notes", "", *[f"- {n}" for n in self.notes], ""]
        if self.budget:
            lines += ["## Size budget", "", *budget_table(self.budget), ""]
        return "\n".join(lines)


def _saving(gpu: GpuRow, input_size: int) -> str:
    saving = gpu.saving(input_size)
    share = 100.0 * saving / input_size if input_size else 0.0
    return f"{format_size(saving)} ({share:.1f}%)"
