"""The tables the tools show: one value, two renderings.

- :func:`markdown`: a report file's table (``report.md``, a split report), Markdown with
  numbers right-aligned.
- :func:`print_tables`: on stdout, drawn by ``rich.table`` (imported only then) to the
  terminal's width, or to ``COLUMNS`` (80 when neither is known, as in a CI log): a long
  cell folds inside its column, so a line never runs past the width and the table never
  wraps; the table is as wide as its title (up to the width), so a title that fits is one
  line. Cells are plain text (no markup, no highlighting). A table of distributions keeps
  its file names short enough not to fold (:mod:`kpack.common.dist_table`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING

from kpack.common.frozen import frozen
from kpack.common.plain_tables import plain_lines, plain_width

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table as RichTable

__all__ = ["Table", "markdown", "print_tables"]


@frozen(kw_only=True)
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
    """Draw every table with rows on ``stream`` (stdout), fitted to its width; without
    importing rich where its drawing is plain text (:mod:`kpack.common.plain_tables`)."""
    out = stream or sys.stdout
    width = plain_width(out)
    plain = [plain_lines(t, width) if width is not None else None for t in tables if t.rows]
    if all(lines is not None for lines in plain):
        out.write("".join(f"{line}\n" for lines in plain if lines for line in lines))
        out.flush()
        return
    from rich import box
    from rich.console import Console
    from rich.table import Table as RichTable
    from rich.text import Text

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
                ratio=1 if i == 0 else None,  # the first column takes any width to spare
            )
        for row in table.rows:
            drawn.add_row(*(Text(cell) for cell in row))
        _fit_title(console, drawn, len(table.title))
        with console.capture() as captured:
            console.print(drawn)
        # rich pads every line to the table's width: no trailing blanks in a log
        out.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
    out.flush()


def _fit_title(console: Console, drawn: RichTable, title: int) -> None:
    """Widen ``drawn`` to its title's length (up to the console's width) so a title that
    fits is one line; the first column takes the width added."""
    natural = console.measure(drawn).maximum
    wanted = min(console.width, title)
    if wanted > natural:
        drawn.width, drawn.expand = wanted, True
