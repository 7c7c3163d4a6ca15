"""Uncompressed ``__CLANG_OFFLOAD_BUNDLE__`` bundles: header reader and writer (kpack.md §2.2).

Private to :mod:`kpack.bundle`. The reader only does header arithmetic on a buffer view and
returns raw entries; it never copies code-object bytes. :func:`make_plain_bundle`, the
writer the package exports, lays a bundle out as clang-offload-bundler does.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from itertools import pairwise
from typing import NamedTuple

from kpack.common.frozen import frozen
from kpack.errors import BundleError

PLAIN_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
ENTRY_COUNT = struct.Struct("<Q")  # num_entries, after the magic
ENTRY = struct.Struct("<QQQ")  # offset, size, triple_len
HEADER_FIXED = len(PLAIN_MAGIC) + ENTRY_COUNT.size  # 32
_MAX_TRIPLE = 4096
DEFAULT_HOST_TRIPLE = "host-x86_64-unknown-linux-gnu-"


@frozen
class Ctx:
    """Where a bundle lives, for error messages: the buffer's name and a location label."""

    name: str
    label: str

    def error(self, message: str) -> BundleError:
        return BundleError(f"{self.label}: {message}", path=self.name)


class RawEntry(NamedTuple):
    number: int
    triple: str
    offset: int  # relative to the bundle start
    size: int


def read_triple(view: memoryview, pos: int, length: int, index: int, ctx: Ctx) -> str:
    raw = bytes(view[pos : pos + length])
    try:
        triple = raw.decode("ascii")
    except UnicodeDecodeError:
        raise ctx.error(f"entry[{index}].triple is not ASCII: {raw!r}") from None
    if not triple or not triple.isprintable() or " " in triple:
        raise ctx.error(f"entry[{index}].triple is empty or not printable: {raw!r}")
    return triple


def _read_entries(view: memoryview, start: int, count: int, ctx: Ctx) -> tuple[int, list[RawEntry]]:
    """Read ``count`` entry records; return the header end (relative) and the entries."""
    avail = len(view) - start
    pos = HEADER_FIXED
    entries: list[RawEntry] = []
    for index in range(count):
        if pos + ENTRY.size > avail:
            raise ctx.error(f"entry[{index}] record at +{pos:#x} runs past the end of the buffer")
        offset, size, triple_len = ENTRY.unpack_from(view, start + pos)
        pos += ENTRY.size
        check_triple_len(index, triple_len, avail - pos, ctx)
        triple = read_triple(view, start + pos, triple_len, index, ctx)
        pos += triple_len
        entries.append(checked_entry(index, triple, offset=offset, size=size, avail=avail, ctx=ctx))
    return pos, entries


def check_triple_len(index: int, triple_len: int, left: int, ctx: Ctx) -> None:
    """An entry's triple must fit in the ``left`` bytes and in :data:`_MAX_TRIPLE`."""
    if triple_len > min(_MAX_TRIPLE, left):
        raise ctx.error(
            f"entry[{index}].triple_len {triple_len} exceeds the buffer or {_MAX_TRIPLE} bytes"
        )


def checked_entry(
    index: int, triple: str, *, offset: int, size: int, avail: int, ctx: Ctx
) -> RawEntry:
    """The entry, if its payload lies within the ``avail`` bytes from the bundle start."""
    if offset > avail or size > avail - offset:
        raise ctx.error(
            f"entry[{index}] ({triple}): offset {offset:#x} + size {size:#x} runs past the "
            f"end of the buffer ({avail:#x} bytes from the bundle start)"
        )
    return RawEntry(index, triple, offset, size)


def check_layout(entries: list[RawEntry], header_end: int, ctx: Ctx) -> None:
    """Non-empty entries must lie after the header and must not overlap each other."""
    placed = sorted((e for e in entries if e.size), key=lambda e: (e.offset, e.number))
    for entry in placed:
        if entry.offset < header_end:
            raise ctx.error(
                f"entry[{entry.number}] ({entry.triple}): offset {entry.offset:#x} lies inside "
                f"the bundle header (which ends at +{header_end:#x})"
            )
    for before, after in pairwise(placed):
        if after.offset < before.offset + before.size:
            raise ctx.error(
                f"entry[{before.number}] ({before.triple}) [{before.offset:#x}, "
                f"{before.offset + before.size:#x}) overlaps entry[{after.number}] "
                f"({after.triple}) starting at {after.offset:#x}"
            )


def read_plain(view: memoryview, start: int, ctx: Ctx) -> tuple[int, list[RawEntry]]:
    """Parse the plain bundle at ``start``; return its exclusive end (absolute) and entries."""
    avail = len(view) - start
    if avail < HEADER_FIXED:
        raise ctx.error(f"truncated header: {avail} bytes, need {HEADER_FIXED}")
    if bytes(view[start : start + len(PLAIN_MAGIC)]) != PLAIN_MAGIC:
        raise ctx.error("magic is not __CLANG_OFFLOAD_BUNDLE__")
    (count,) = ENTRY_COUNT.unpack_from(view, start + len(PLAIN_MAGIC))
    if count > (avail - HEADER_FIXED) // ENTRY.size:
        raise ctx.error(
            f"num_entries {count} cannot fit in the {avail - HEADER_FIXED} bytes after the header"
        )
    header_end, entries = _read_entries(view, start, count, ctx)
    check_layout(entries, header_end, ctx)
    end = max([header_end, *(e.offset + e.size for e in entries)])
    return start + end, entries


def _round_up(value: int, align: int) -> int:
    return -(-value // align) * align


def write_plain(
    entries: Sequence[tuple[str, bytes]], *, align: int, host_triple: str | None
) -> bytes:
    """Serialise a plain bundle: optional empty host entry first, payloads ``align``-aligned."""
    if align < 1:
        raise ValueError(f"align must be >= 1, got {align}")
    records = ([(host_triple, b"")] if host_triple is not None else []) + list(entries)
    encoded = [(t.encode("ascii"), bytes(d)) for t, d in records]
    header_len = HEADER_FIXED + sum(ENTRY.size + len(t) for t, _ in encoded)
    pos = _round_up(header_len, align)
    first = pos
    header = bytearray(PLAIN_MAGIC + ENTRY_COUNT.pack(len(encoded)))
    body = bytearray()
    for index, (triple, data) in enumerate(encoded):
        if host_triple is not None and index == 0:
            offset = first
        else:
            offset = _round_up(pos, align)
            body += bytes(offset - first - len(body)) + data
            pos = offset + len(data)
        header += ENTRY.pack(offset, len(data), len(triple)) + triple
    return bytes(header) + bytes(first - len(header)) + bytes(body)


def make_plain_bundle(
    entries: Sequence[tuple[str, bytes]],
    *,
    align: int = 4096,
    host_triple: str | None = DEFAULT_HOST_TRIPLE,
) -> bytes:
    """Write an uncompressed bundle: an empty host entry (unless None), then ``entries``.

    Each payload starts at a multiple of ``align`` from the bundle start; the bundle ends at
    the end of the last payload, as clang-offload-bundler lays them out.
    """
    return write_plain(entries, align=align, host_triple=host_triple)
