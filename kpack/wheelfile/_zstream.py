"""zlib's raw inflate, reached through ``ctypes``, stopping at every deflate block boundary.

Python's ``zlib`` module does not expose ``Z_BLOCK``: run with it, ``inflate`` returns at
each block boundary and reports the bit position there (as zlib's ``gzjoin`` uses it). Two
parts of the wheel writer need those positions: joining libdeflate chunks
(:mod:`kpack.wheelfile._join`) and indexing an input member's blocks so that an edited copy
can reuse them (:mod:`kpack.wheelfile._reuse`). Where no shared zlib can be loaded (CPython
on Windows links it statically) :func:`zlib_library` returns ``None`` and callers do without.
"""

from __future__ import annotations

import ctypes
import functools
import zlib
from collections.abc import Iterable, Iterator

from kpack.errors import PackagingError

__all__ = [
    "INDEX_BASE",
    "INDEX_SPACING",
    "STOP_BASE",
    "STOP_SPACING",
    "BlockInflater",
    "ZlibLibrary",
    "zlib_library",
]

_Z_OK, _Z_STREAM_END, _Z_BUF_ERROR = 0, 1, -5
_Z_NO_FLUSH, _Z_BLOCK = 0, 5
_BEFORE_HEADER, _AFTER_LAST = 128, 64  # data_type flags at a stop

#: A bounded index (:class:`BlockInflater`) is exact up to ``INDEX_BASE`` entries more than
#: one per ``INDEX_SPACING`` bytes of output; then its entries are at least that far apart.
INDEX_BASE, INDEX_SPACING = 4096, 4 << 10
#: A bounded index stops at up to ``STOP_BASE`` blocks more than one per ``STOP_SPACING``
#: bytes of output (zlib at memLevel 1 writes one per 200-300 bytes); then it is given up.
STOP_BASE, STOP_SPACING = 1 << 16, 128


class _ZStream(ctypes.Structure):
    _fields_ = [
        ("next_in", ctypes.c_void_p),
        ("avail_in", ctypes.c_uint),
        ("total_in", ctypes.c_ulong),
        ("next_out", ctypes.c_void_p),
        ("avail_out", ctypes.c_uint),
        ("total_out", ctypes.c_ulong),
        ("msg", ctypes.c_char_p),
        ("state", ctypes.c_void_p),
        ("zalloc", ctypes.c_void_p),
        ("zfree", ctypes.c_void_p),
        ("opaque", ctypes.c_void_p),
        ("data_type", ctypes.c_int),
        ("adler", ctypes.c_ulong),
        ("reserved", ctypes.c_ulong),
    ]


class ZlibLibrary:
    """The loaded shared zlib, with the inflate entry points typed."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        lib.zlibVersion.restype = ctypes.c_char_p
        z_stream = ctypes.POINTER(_ZStream)
        lib.inflateInit2_.argtypes = [z_stream, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.inflate.argtypes = [z_stream, ctypes.c_int]
        lib.inflateEnd.argtypes = [z_stream]
        self.lib = lib
        self.version: bytes = lib.zlibVersion()

    def inflater(self) -> BlockInflater:
        return BlockInflater(self)


class BlockInflater:
    """One raw deflate stream inflated in ``Z_BLOCK`` steps.

    :meth:`run` yields the output and records, for every block, the output offset and the
    bit offset in the input where it starts (:attr:`blocks`, the first one included), and
    where the final block starts (:attr:`last`) and the stream ends (:attr:`end`), in bits;
    with ``block_crcs``, also the CRC-32 of every entry's output (:attr:`crcs`).

    With ``bounded`` the index grows with the output, not with the block count (a valid
    stream may hold millions of empty blocks, 10 bits each): it is exact up to
    :data:`INDEX_BASE` entries more than one per :data:`INDEX_SPACING` bytes of output, and
    past that an entry is a run of blocks at least that long (any block boundary is as good
    a place to copy from). Each block still costs one stop in Python, so past
    :data:`STOP_BASE` stops more than one per :data:`STOP_SPACING` bytes, the rest of the
    stream is inflated in one go and the index is given up (:attr:`indexed` is false,
    :attr:`blocks` and :attr:`crcs` empty, :attr:`last` and :attr:`end` unknown).
    """

    def __init__(self, zlib: ZlibLibrary) -> None:
        self._zlib = zlib
        self.blocks: list[tuple[int, int]] = [(0, 0)]  # raw inflate never stops before the first
        self.crcs: list[int] = []
        self.last = 0
        self.end = -1
        self.consumed = 0  # input bytes used, once the stream has ended
        self.indexed = True

    def run(
        self,
        raw: Iterable[bytes],
        out_size: int,
        buffer: ctypes.Array[ctypes.c_char] | None = None,
        *,
        block_crcs: bool = False,
        bounded: bool = False,
    ) -> Iterator[bytes]:
        """Inflate the pieces of ``raw`` in order; yield output pieces of at most
        ``out_size`` bytes (made in ``buffer`` if given, which must hold as many). Input
        after the stream's end is left unread (see :attr:`consumed`); a stream that does not
        decode or ends early is an error."""
        lib = self._zlib.lib
        stream = _ZStream()
        init = lib.inflateInit2_(
            ctypes.byref(stream), -15, self._zlib.version, ctypes.sizeof(_ZStream)
        )
        if init != _Z_OK:
            raise PackagingError("zlib: inflateInit2 failed")
        out = buffer if buffer is not None else ctypes.create_string_buffer(out_size)
        if len(out) < out_size:
            raise ValueError("the output buffer is smaller than out_size")
        out_addr = ctypes.addressof(out)
        view = memoryview(out).cast("B")
        inflate, ref = lib.inflate, ctypes.byref(stream)
        pieces = (piece for piece in raw if piece)
        held = b""  # keeps the input piece zlib reads from alive
        exhausted = False  # no input left: zlib may still hold output for what it has read
        flush = _Z_BLOCK
        index = _Index(self, bounded)
        filled = 0
        try:
            while True:
                if stream.avail_in == 0 and not exhausted and self.end < 0:
                    held = next(pieces, b"")  # none is needed past the last block
                    exhausted = not held
                    stream.next_in = ctypes.cast(ctypes.c_char_p(held), ctypes.c_void_p).value
                    stream.avail_in = len(held)
                stream.next_out = out_addr + filled
                stream.avail_out = out_size - filled
                ret = inflate(ref, flush)
                before, filled = filled, out_size - stream.avail_out
                if ret == _Z_BUF_ERROR and exhausted:  # no progress, and no input to make it
                    raise PackagingError("the deflate stream ends before its end block")
                if ret not in (_Z_OK, _Z_STREAM_END):
                    raise PackagingError(f"the deflate stream does not decode (zlib {ret})")
                if block_crcs and filled > before and flush == _Z_BLOCK:
                    index.crc = zlib.crc32(view[before:filled], index.crc)  # within one block
                if ret == _Z_STREAM_END:
                    if self.end < 0 and flush == _Z_BLOCK:  # pragma: no cover - zlib stops first
                        raise PackagingError("zlib ended the stream without stopping at its end")
                    self.consumed = stream.total_in
                    if filled:
                        yield ctypes.string_at(out_addr, filled)
                    return
                data_type = stream.data_type
                if data_type & _BEFORE_HEADER and flush == _Z_BLOCK:
                    position = stream.total_in * 8 - (data_type & 7)
                    if not index.stop(position, stream.total_out, data_type & _AFTER_LAST):
                        flush = _Z_NO_FLUSH  # the rest in one go, unindexed
                if filled == out_size:
                    yield ctypes.string_at(out_addr, filled)
                    filled = 0
        finally:
            lib.inflateEnd(ctypes.byref(stream))


class _Index:
    """What :meth:`BlockInflater.run` records at each stop, within its bounds."""

    def __init__(self, owner: BlockInflater, bounded: bool) -> None:
        self._owner = owner
        self._bounded = bounded
        self._spacing = 0  # exact, until the index has more entries than its bound
        self._stops = 0
        self._start = 0  # bit offset of the block being inflated
        self.crc = 0  # of the output since the last entry

    def stop(self, position: int, total_out: int, after_last: int) -> bool:
        """Record a stop at bit ``position`` with ``total_out`` bytes out; whether to go on
        stopping at blocks (``False``: the index is given up)."""
        owner = self._owner
        if after_last:  # the final block is done: the end
            owner.end, owner.last = position, self._start
            owner.crcs.append(self.crc)
            return True
        self._start = position
        blocks = owner.blocks
        last_out, last_bit = blocks[-1]
        if position != last_bit and total_out - last_out >= self._spacing:
            blocks.append((total_out, position))
            owner.crcs.append(self.crc)
            self.crc = 0
            if self._bounded and len(blocks) > INDEX_BASE + total_out // INDEX_SPACING:
                self._spacing = INDEX_SPACING
        elif total_out == last_out and last_bit % 2 and not position % 2:
            blocks[-1] = (last_out, position)  # empty blocks between: an even offset is better
        self._stops += 1
        if self._bounded and self._stops > STOP_BASE + total_out // STOP_SPACING:
            owner.indexed = False
            owner.blocks, owner.crcs = [], []
            return False
        return True


@functools.cache
def zlib_library() -> ZlibLibrary | None:
    """The shared zlib, if one with ``Z_BLOCK`` can be loaded; else ``None``."""
    import ctypes.util  # its search may run ldconfig: only where a shared zlib is wanted

    name = ctypes.util.find_library("z")
    if name is None:
        return None
    try:
        return ZlibLibrary(ctypes.CDLL(name))
    except (OSError, AttributeError):
        return None
