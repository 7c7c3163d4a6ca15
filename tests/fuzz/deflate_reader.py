"""The fuzz target for the block index of a large wheel member: a raw deflate stream
inflated in ``Z_BLOCK`` steps (:class:`kpack.wheelfile._zstream.BlockInflater`, bounded, as
:func:`kpack.wheelfile._inflate.member_chunks` runs it) and checked against the standard
library's inflate.

The input's first byte picks how the stream is cut into the reader's pieces and how large
the output buffer is; the rest is the stream. The inflater must give the same bytes as
``zlib`` or refuse what ``zlib`` refuses (:class:`~kpack.errors.PackagingError`), and its
index must hold: entries in order, each a CRC-32 of its output, no more than the bound.
Seeds: zlib's streams (memLevel 1's tiny blocks too), a hand-made one with every kind of
block, zeros whose last input byte holds hundreds of output bytes, and a flood of empty
blocks past the index's budget.
"""

from __future__ import annotations

import random
import zlib
from pathlib import Path

from kpack.errors import PackagingError

from .harness import Reader

__all__ = ["DEFLATE_INDEX"]

_PIECES = (1, 2, 3, 7, 64, 4096, 1 << 20)
_OUT_SIZES = (257, 4096, 1 << 16, 1 << 20)


def _deflate_seeds() -> list[bytes]:
    from tests.kpack.wheelfile.deflate_fixtures import Encoder

    rng = random.Random(29)
    words = (b"kernel ", b"gfx942 ", b"\x00" * 40, b"\x7fELF")
    text = b"".join(rng.choice(words) for _ in range(3000))
    streams = []
    for level, mem in ((6, 8), (1, 1), (9, 9)):
        c = zlib.compressobj(level, zlib.DEFLATED, -15, mem)
        streams.append(c.compress(text) + c.flush())
    handmade = Encoder().literals(b"head").empty_fixed(5).stored(rng.randbytes(300))
    handmade.empty_stored(3).repeat(5000, 7).literals(text[:500]).zlib(text[:4000])
    streams.append(handmade.repeat(258 * 302, 0, final=True).finish())  # output held at the end
    flood = Encoder().literals(text[:2000]).empty_fixed(70_000).repeat(20_000)  # past the budget
    streams.append(flood.finish())
    return [bytes([n * 37 % 256]) + raw for n, raw in enumerate(streams)]


def _run_deflate_index(data: bytes, work: Path) -> None:
    from kpack.wheelfile._zstream import INDEX_BASE, INDEX_SPACING, zlib_library

    lib = zlib_library()
    if lib is None or not data:
        return
    piece = _PIECES[data[0] % len(_PIECES)]
    out_size = _OUT_SIZES[data[0] // len(_PIECES) % len(_OUT_SIZES)]
    raw = data[1:]
    reference = zlib.decompressobj(-15)
    try:
        expected: bytes | None = reference.decompress(raw)
    except zlib.error:
        expected = None
    if not reference.eof:
        expected = None
    inflater = lib.inflater()
    pieces = [raw[i : i + piece] for i in range(0, len(raw), piece)]
    try:
        out = b"".join(inflater.run(pieces, out_size, block_crcs=True, bounded=True))
    except PackagingError:
        if expected is not None:
            raise AssertionError("refused a stream zlib inflates") from None
        raise
    if out != expected:
        raise AssertionError("inflated to other bytes than zlib's, or accepted what it refuses")
    if inflater.consumed != len(raw) - len(reference.unused_data):
        raise AssertionError(f"consumed {inflater.consumed} of {len(raw)} bytes")
    if inflater.indexed:
        _check_index(inflater.blocks, inflater.crcs, out, INDEX_BASE + len(out) // INDEX_SPACING)
    elif inflater.blocks or inflater.crcs:
        raise AssertionError("an index given up still holds entries")


def _check_index(blocks: list[tuple[int, int]], crcs: list[int], out: bytes, bound: int) -> None:
    if blocks[0] != (0, 0) or len(crcs) != len(blocks) or len(blocks) > bound + 2:
        raise AssertionError(f"{len(blocks)} entries, {len(crcs)} CRCs (at most {bound} + 2)")
    ends = [start for start, _ in blocks[1:]] + [len(out)]
    for n, ((start, bit), end, crc) in enumerate(zip(blocks, ends, crcs, strict=True)):
        if end < start or (n and bit <= blocks[n - 1][1]) or zlib.crc32(out[start:end]) != crc:
            raise AssertionError(f"entry {n} ({start}, {bit}) is out of order or its CRC is wrong")


#: the sync flush's empty stored block, a final empty fixed block, four empty fixed blocks,
#: and bytes starting a block of each type (stored, fixed, dynamic, reserved), final or not
_DEFLATE_TOKENS = (
    b"\x00\x00\xff\xff",
    b"\x03\x00",
    b"\x02\x08\x20\x80\x00",
    b"\x00",
    b"\x01",
    b"\x02",
    b"\x04",
    b"\x06",
    b"\x07",
)

DEFLATE_INDEX = Reader(
    "deflate-index", _run_deflate_index, (PackagingError,), _deflate_seeds, tokens=_DEFLATE_TOKENS
)
