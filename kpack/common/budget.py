"""The size budget of a release's wheels (``--max-wheel-size``; vLLM's CI, for one, fails over
500 MB per wheel).

Every tool that writes wheels (the builder, the wheel splitter, ``kpack finalize-wheel``)
checks the wheels it staged before it publishes any: a wheel over the budget is one error
naming it, its size and its largest members (by the bytes they take in the wheel), and
nothing is published. Its report shows every wheel against the budget.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from kpack.common.cli import format_size
from kpack.common.frozen import frozen
from kpack.errors import PackagingError

__all__ = [
    "BUDGET_FLAG",
    "WheelSize",
    "budget_column",
    "budget_table",
    "check_budget",
    "largest_members",
    "percent_of",
]

BUDGET_FLAG = "--max-wheel-size"
#: Members an over-budget error names.
LARGEST = 3


@frozen(kw_only=True)
class WheelSize:
    """One wheel against the budget (``budget`` None: no budget given)."""

    name: str
    size: int
    budget: int | None

    @property
    def over(self) -> bool:
        return self.budget is not None and self.size > self.budget

    @property
    def verdict(self) -> str:
        if self.budget is None:
            return ""
        share = f"{100 * self.size / self.budget:.0f} % of {format_size(self.budget)}"
        return f"over the budget: {share}" if self.over else share


def largest_members(wheel: Path, count: int = LARGEST) -> list[tuple[str, int]]:
    """The ``count`` members taking the most bytes in ``wheel`` (compressed size)."""
    with zipfile.ZipFile(wheel) as archive:
        infos = sorted(archive.infolist(), key=lambda i: (-i.compress_size, i.filename))
    return [(i.filename, i.compress_size) for i in infos[:count]]


def check_budget(wheels: Iterable[Path], budget: int | None) -> tuple[WheelSize, ...]:
    """Every wheel's size against ``budget``; one :class:`PackagingError` naming each wheel
    over it, with its size and largest members."""
    rows = tuple(
        WheelSize(name=Path(w).name, size=Path(w).stat().st_size, budget=budget)
        for w in sorted(wheels)
    )
    paths = {Path(w).name: Path(w) for w in wheels}
    over = [r for r in rows if r.over]
    if not over or budget is None:
        return rows
    lines = [
        f"{r.name}: {format_size(r.size)}; largest members: "
        + ", ".join(f"{n} ({format_size(s)})" for n, s in largest_members(paths[r.name]))
        for r in over
    ]
    if len(over) == 1:
        head, _, members = lines[0].partition("; ")
        raise PackagingError(
            f"{head}, over {BUDGET_FLAG} {format_size(budget)}; {members}; nothing published"
        )
    raise PackagingError(
        f"{len(over)} wheels over {BUDGET_FLAG} {format_size(budget)}; nothing published",
        problems=lines,
    )


def budget_table(rows: Sequence[WheelSize]) -> list[str]:
    """A Markdown table of the wheels against the budget (empty without a budget)."""
    if not rows or rows[0].budget is None:
        return []
    out = [f"| wheel | size | {BUDGET_FLAG} {format_size(rows[0].budget)} |", "|---|---:|---|"]
    out += [f"| {r.name} | {format_size(r.size)} | {r.verdict} |" for r in rows]
    return out


def budget_column(budget: int) -> str:
    """The heading of a list's column of :func:`percent_of` values: ``% of 500.0 MB``."""
    return f"% of {format_size(budget)}"


def percent_of(name: str, size: int, budget: int) -> str:
    """A file's size as a share of the budget, in whole percent (``<1`` for a small one;
    ``-`` for a file that is no wheel, which the budget does not cover)."""
    if not name.endswith(".whl"):
        return "-"
    percent = 100 * size / budget
    return "<1" if 0 < percent < 0.5 else f"{percent:.0f}"
