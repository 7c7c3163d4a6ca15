"""The split report: per library, per device wheel and per GPU; JSON and Markdown.

Only names and sizes go in, so the report is as deterministic as the wheels.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from kpack.common.budget import WheelSize, budget_table

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

    def to_markdown(self) -> str:
        lines = [
            f"# Split report: {self.input_wheel}",
            "",
            f"- input: {_mb(self.input_size)}",
            f"- host wheel: {self.host_wheel}, {_mb(self.host_size)}"
            + (" (unchanged: no device code)" if self.unchanged else ""),
            "",
        ]
        lines += _table(
            "Libraries",
            ["library", "original", "stripped", "saved", "kernels"],
            [[r.arcname, _mb(r.original), _mb(r.stripped), _mb(r.saved), str(r.kernels)]
             for r in self.libraries],
        )  # fmt: skip
        lines += _table(
            "Device wheels",
            ["wheel", "level", "kernels", "archives", "database files", "size"],
            [[w.filename, w.level, str(w.kernels), str(w.archives), str(w.database_files),
              _mb(w.size)] for w in self.device_wheels],
        )  # fmt: skip
        lines += _table(
            "Per GPU",
            ["GPU", "downloads", "size", "saving"],
            [[g.target, " + ".join(g.wheels), _mb(g.download), _saving(g, self.input_size)]
             for g in self.gpus],
        )  # fmt: skip
        if self.variant_wheels:
            lines += ["## Variant wheels", "", *[f"- {n}" for n in self.variant_wheels], ""]
        if self.notes:
            lines += ["## Notes", "", *[f"- {n}" for n in self.notes], ""]
        if self.budget:
            lines += ["## Size budget", "", *budget_table(self.budget), ""]
        return "\n".join(lines)


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB"


def _saving(gpu: GpuRow, input_size: int) -> str:
    saving = gpu.saving(input_size)
    share = 100.0 * saving / input_size if input_size else 0.0
    return f"{_mb(saving)} ({share:.1f}%)"


def _table(title: str, header: list[str], rows: list[list[str]]) -> list[str]:
    if not rows:
        return []
    out = [f"## {title}", "", "| " + " | ".join(header) + " |"]
    out.append("|" + "|".join(" --- " for _ in header) + "|")
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return [*out, ""]
