"""The tables the tools show: one value, two renderings.

- :func:`markdown`: a report file's table (``report.md``, a split report), Markdown with
  numbers right-aligned.
- :func:`print_tables`: on stdout, drawn by ``rich.table`` (imported only then) to the
  terminal's width, or to ``COLUMNS`` (80 when neither is known, as in a CI log): a long
  cell folds inside its column, so a line never runs past the width and the table never
  wraps. Cells are plain text (no markup, no highlighting).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO

__all__ = ["Table", "markdown", "print_tables"]


@dataclass(frozen=True, kw_only=True)
class Table:
    """A titled table of text cells; ``numeric`` columns (by index) are right-aligned."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    numeric: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        bad = [row for row in self.rows if len(row) != len(self.header)]
        if bad:
            raise ValueError(f"{self.title}: a row of {len(bad[0])} cells for {self.header}")


def markdown(table: Table, *, level: int = 2) -> list[str]:
    """``table`` as Markdown lines (a heading, the table, a blank line); nothing for a
    table without rows."""
    if not table.rows:
        return []
    align = ["---:" if i in table.numeric else "---" for i in range(len(table.header))]
    lines = [f"{'#' * level} {table.title}", "", _row(table.header), _row(align)]
    lines += [_row(row) for row in table.rows]
    return [*lines, ""]


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def print_tables(tables: Sequence[Table], *, stream: IO[str] | None = None) -> None:
    """Draw every table with rows on ``stream`` (stdout), fitted to its width."""
    from rich import box
    from rich.console import Console
    from rich.table import Table as RichTable
    from rich.text import Text

    out = stream or sys.stdout
    console = Console(file=out, highlight=False, emoji=False)
    for table in tables:
        if not table.rows:
            continue
        drawn = RichTable(
            title=table.title,
            title_justify="left",
            box=box.SIMPLE_HEAD,
            pad_edge=False,
            expand=False,
        )
        for i, name in enumerate(table.header):
            numeric = i in table.numeric
            drawn.add_column(
                name,
                justify="right" if numeric else "left",
                no_wrap=numeric,
                overflow="fold",
            )
        for row in table.rows:
            drawn.add_row(*(Text(cell) for cell in row))
        with console.capture() as captured:
            console.print(drawn)
        # rich pads every line to the table's width: no trailing blanks in a log
        out.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
    out.flush()
