"""A table as ``rich.table`` draws it for :func:`kpack.common.tables.print_tables`, drawn
without rich where the drawing is plain text.

rich costs a command about 20 ms to import, as much as the work of a small wheel's split.
On a stream that is not a terminal rich writes no styles, and a table whose cells all fit
their columns needs none of its folding: its lines follow from the column widths alone.
:func:`plain_lines` draws them as ``print_tables`` has rich draw them (box ``SIMPLE_HEAD``:
an edge space left and right, one space between columns plus one of padding on each inner
side; the title left-justified above; blank lines where the top and bottom rules would be;
a table narrower than its title widened to it, all in its first column; a right-justified
cell without its trailing spaces; a line without its trailing spaces). Anything else gives
``None`` and the caller draws with rich: a terminal, an environment that makes rich treat a
stream as one (``FORCE_COLOR``, ``TTY_COMPATIBLE``), a cell or a title that would fold,
text rich would read as markup or measure otherwise (anything but printable ASCII, ``[``),
Windows.
``tests/kpack/common/test_plain_tables.py`` holds both drawings to each other.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import IO, Protocol

__all__ = ["Drawn", "plain_lines", "plain_width"]

#: Narrower than this, leave the drawing to rich.
_MIN_WIDTH = 20
_RULE = "─"


class Drawn(Protocol):
    """What is drawn of a table (:class:`kpack.common.tables.Table`)."""

    @property
    def title(self) -> str: ...
    @property
    def header(self) -> tuple[str, ...]: ...
    @property
    def rows(self) -> tuple[tuple[str, ...], ...]: ...
    @property
    def numeric(self) -> frozenset[int]: ...


def plain_width(stream: IO[str]) -> int | None:
    """The width rich draws at on ``stream`` when it would draw plain text there (as it
    finds it: ``COLUMNS``, else the terminal of stdin, stdout or stderr, else 80); ``None``
    where rich would write styles or finds the width otherwise."""
    if sys.platform == "win32" or "FORCE_COLOR" in os.environ or "TTY_COMPATIBLE" in os.environ:
        return None
    isatty = getattr(stream, "isatty", None)
    try:
        if isatty is not None and isatty():
            return None
    except ValueError:  # a closed stream is no terminal, to rich either
        pass
    columns = os.environ.get("COLUMNS")
    width = int(columns) if columns is not None and columns.isdigit() else _terminal_width()
    return width if width >= _MIN_WIDTH else None


def plain_lines(table: Drawn, width: int) -> list[str] | None:
    """The lines of ``table`` drawn ``width`` columns wide, or ``None`` if rich is needed."""
    texts = [table.title, *table.header, *(cell for row in table.rows for cell in row)]
    if not all(_plain(text) for text in texts):
        return None
    count = len(table.header)
    edges = count + 1  # the two edges and the spaces between columns
    pads = [(i > 0) + (i < count - 1) for i in range(count)]
    lines = [table.header, *table.rows]
    widths = [max(max(len(row[i]) for row in lines) + pads[i], 1) for i in range(count)]
    if sum(widths) > width - edges:
        return None  # a cell folds
    short = len(table.title) - (sum(widths) + edges)
    if short > 0:  # as wide as its title, the first column taking the width added
        if len(table.title) > width:
            return None  # the title folds
        widths[0] += short
    rule = " " + _RULE * (sum(widths) + count - 1)
    rows = [_row(row, widths, table.numeric) for row in lines]
    title = [table.title.rstrip()] if table.title else []
    return [*title, "", rows[0], rule, *rows[1:], ""]


def _row(cells: Sequence[str], widths: list[int], numeric: frozenset[int]) -> str:
    count = len(cells)
    parts = []
    for i, (cell, width) in enumerate(zip(cells, widths, strict=True)):
        left, right = int(i > 0), int(i < count - 1)
        room = width - left - right
        text = cell.rstrip().rjust(room) if i in numeric else cell.ljust(room)
        parts.append(" " * left + text + " " * right)
    return (" " + " ".join(parts)).rstrip()


def _plain(text: str) -> bool:
    """Printable ASCII that rich neither reads as markup nor measures otherwise."""
    return text.isascii() and text.isprintable() and "[" not in text


def _terminal_width() -> int:
    for fd in (0, 1, 2):
        try:
            return os.get_terminal_size(fd).columns or 80
        except (AttributeError, ValueError, OSError):
            continue
    return 80
