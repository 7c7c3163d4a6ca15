"""Read back a tool's list of distributions from its stdout (kpack.common.dist_table), as a
reader of an 80-column terminal would: the title's ``version V, tag T``, then one line per
file whose first cell, with them, gives the file's name back.

An oracle apart from the code under test: it rebuilds each file name by the wheel and sdist
naming rules (``<name>-V-T.whl``, ``<name>-V.tar.gz``, ``-`` as ``_``) and the caller
compares the names with the files on disk.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Listing", "read_listing"]

_COMMON = re.compile(r": version (?P<version>\S+)(?:, tag (?P<tag>\S+))?$")
_CELLS = re.compile(r"\s{2,}")


@dataclass(frozen=True)
class Listing:
    """The list as read: its title (its lines joined), and per file its path under the
    dist directory and the row's other cells."""

    title: str
    header: tuple[str, ...]
    rows: dict[str, tuple[str, ...]]


def read_listing(text: str, *, width: int = 80) -> Listing:
    """The one table in ``text`` (a tool's stdout without its last line, the output path);
    every line within ``width`` and without trailing blanks, one line per row."""
    lines = text.splitlines()
    assert all(len(line) <= width and line == line.rstrip() for line in lines), lines
    blank = lines.index("")
    title = " ".join(lines[:blank])
    header = tuple(_CELLS.split(lines[blank + 1].strip()))
    assert set(lines[blank + 2].strip()) == {"─"}, lines[blank + 2]
    body = lines[blank + 3 :]
    body = body[: body.index("")] if "" in body else body
    found = _COMMON.search(title)
    rows: dict[str, tuple[str, ...]] = {}
    for line in body:
        first, *cells = _CELLS.split(line.strip())
        assert len(cells) == len(header) - 1, (line, header)  # a row never folds
        path = _file_name(first, found) if found else first
        assert path not in rows, path
        rows[path] = tuple(cells)
    return Listing(title=title, header=header, rows=rows)


def _file_name(label: str, common: re.Match[str]) -> str:
    """``gfx110X-all/rocm-sdk-devel`` -> ``gfx110X-all/rocm_sdk_devel-V-T.whl``; ``rocm
    (sdist)`` -> ``rocm-V.tar.gz``."""
    sdist = label.endswith(" (sdist)")
    parent, _, project = label.removesuffix(" (sdist)").rpartition("/")
    name = re.sub(r"[-_.]+", "_", project)
    version, tag = common["version"], common["tag"]
    file = f"{name}-{version}.tar.gz" if sdist else f"{name}-{version}-{tag}.whl"
    return f"{parent}/{file}" if parent else file
