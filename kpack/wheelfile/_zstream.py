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
import ctypes.util
import functools
import zlib
from collections.abc import Iterable, Iterator

from kpack.errors import PackagingError

__all__ = ["BlockInflater", "ZlibLibrary", "zlib_library"]

_Z_OK, _Z_STREAM_END, _Z_BLOCK = 0, 1, 5
_BEFORE_HEADER, _AFTER_LAST = 128, 64  # data_type flags at a stop


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
        lib.inflateInit2_.argtypes = [ctypes.POINTER(_ZStream), ctypes.c_int, ctypes.c_char_p,
                                      ctypes.c_int]  # fmt: skip
        lib.inflate.argtypes = [ctypes.POINTER(_ZStream), ctypes.c_int]
        lib.inflateEnd.argtypes = [ctypes.POINTER(_ZStream)]
        self.lib = lib
        self.version: bytes = lib.zlibVersion()

    def inflater(self) -> BlockInflater:
        return BlockInflater(self)


class BlockInflater:
    """One raw deflate stream inflated in ``Z_BLOCK`` steps.

    :meth:`run` yields the output and records, for every block, the output offset and the
    bit offset in the input where it starts (:attr:`blocks`, the first one included), and
    where the final block starts (:attr:`last`) and the stream ends (:attr:`end`), in bits;
    with ``block_crcs``, also the CRC-32 of every block's output (:attr:`crcs`).
    """

    def __init__(self, zlib: ZlibLibrary) -> None:
        self._zlib = zlib
        self.blocks: list[tuple[int, int]] = [(0, 0)]  # raw inflate never stops before the first
        self.crcs: list[int] = []
        self.last = 0
        self.end = -1
        self.consumed = 0  # input bytes used, once the stream has ended

    def run(
        self,
        raw: Iterable[bytes],
        out_size: int,
        buffer: ctypes.Array[ctypes.c_char] | None = None,
        *,
        block_crcs: bool = False,
    ) -> Iterator[bytes]:
        """Inflate the pieces of ``raw`` in order; yield output pieces of at most
        ``out_size`` bytes (made in ``buffer`` if given, which must hold as many). Input
        after the stream's end is left unread (see :attr:`consumed`); a stream that does not
        decode or ends early is an error."""
        lib = self._zlib.lib
        stream = _ZStream()
        if lib.inflateInit2_(ctypes.byref(stream), -15, self._zlib.version,
                             ctypes.sizeof(_ZStream)) != _Z_OK:  # fmt: skip
            raise PackagingError("zlib: inflateInit2 failed")
        out = buffer if buffer is not None else ctypes.create_string_buffer(out_size)
        if len(out) < out_size:
            raise ValueError("the output buffer is smaller than out_size")
        out_addr = ctypes.addressof(out)
        view = memoryview(out).cast("B")
        pieces = iter(raw)
        held = b""  # keeps the input piece zlib reads from alive
        filled = 0
        block_crc = 0
        try:
            while True:
                if stream.avail_in == 0 and self.end < 0:  # past the last block: no input needed
                    held = next(pieces, b"")
                    if not held:
                        raise PackagingError("the deflate stream ends before its end block")
                    stream.next_in = ctypes.cast(ctypes.c_char_p(held), ctypes.c_void_p).value
                    stream.avail_in = len(held)
                stream.next_out = out_addr + filled
                stream.avail_out = out_size - filled
                ret = lib.inflate(ctypes.byref(stream), _Z_BLOCK)
                if ret not in (_Z_OK, _Z_STREAM_END):
                    raise PackagingError(f"the deflate stream does not decode (zlib {ret})")
                before, filled = filled, out_size - stream.avail_out
                if block_crcs:  # one call never crosses a block boundary (Z_BLOCK)
                    block_crc = zlib.crc32(view[before:filled], block_crc)
                if ret == _Z_STREAM_END:
                    if self.end < 0:  # pragma: no cover - zlib stops after the last block first
                        raise PackagingError("zlib ended the stream without stopping at its end")
                    self.consumed = stream.total_in
                    if filled:
                        yield ctypes.string_at(out_addr, filled)
                    return
                if stream.data_type & _BEFORE_HEADER:
                    position = stream.total_in * 8 - (stream.data_type & 7)
                    if stream.data_type & _AFTER_LAST:  # the final block is done: the end
                        self.end = position
                        self.last = self.blocks[-1][1]
                        self.crcs.append(block_crc)
                    elif position != self.blocks[-1][1]:
                        self.blocks.append((stream.total_out, position))
                        self.crcs.append(block_crc)
                        block_crc = 0
                if filled == out_size:
                    yield ctypes.string_at(out_addr, filled)
                    filled = 0
        finally:
            lib.inflateEnd(ctypes.byref(stream))


@functools.cache
def zlib_library() -> ZlibLibrary | None:
    """The shared zlib, if one with ``Z_BLOCK`` can be loaded; else ``None``."""
    name = ctypes.util.find_library("z")
    if name is None:
        return None
    try:
        return ZlibLibrary(ctypes.CDLL(name))
    except (OSError, AttributeError):
        return None
