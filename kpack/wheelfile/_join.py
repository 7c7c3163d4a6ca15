"""Joinable libdeflate chunks: raw deflate pieces that concatenate into one stream.

libdeflate compresses a buffer into a complete raw deflate stream: its last block carries
the BFINAL bit, and it has no streaming API. To stream a large member in parallel chunks
(pigz-style) every chunk but the last must instead end *open* and byte-aligned. This
module makes it so: it locates the last block's header and the stream's end bit with
zlib's own inflate run in ``Z_BLOCK`` mode (which stops at every block boundary and
reports the bit position, as zlib's ``gzjoin`` does), clears BFINAL, and appends an empty
stored block (``Z_SYNC_FLUSH``'s marker, ``00 00 ff ff``) to reach a byte boundary.

The inflate pass doubles as a check: it must decode the chunk back to exactly its input
bytes, or the chunk is refused. zlib is reached through ``ctypes`` (Python's
``zlib`` module does not expose ``Z_BLOCK``); where no shared zlib exists (CPython on
Windows links it statically) :func:`joiner` returns ``None`` and the caller falls back to
the standard library's streaming deflate. The bytes written depend only on libdeflate;
zlib only reads them.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import threading

import deflate as libdeflate

from kpack.errors import PackagingError

__all__ = ["ChunkJoiner", "joiner"]

_Z_OK, _Z_STREAM_END, _Z_BLOCK = 0, 1, 5
_SYNC_MARKER = b"\x00\x00\xff\xff"  # LEN 0, NLEN 0xffff of an empty stored block


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


class ChunkJoiner:
    """Compress chunks with libdeflate so that they concatenate (see the module doc)."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self._lib = lib
        lib.zlibVersion.restype = ctypes.c_char_p
        self._version = lib.zlibVersion()
        lib.inflateInit2_.argtypes = [ctypes.POINTER(_ZStream), ctypes.c_int, ctypes.c_char_p,
                                      ctypes.c_int]  # fmt: skip
        lib.inflate.argtypes = [ctypes.POINTER(_ZStream), ctypes.c_int]
        lib.inflateEnd.argtypes = [ctypes.POINTER(_ZStream)]
        self._local = threading.local()

    def _scratch(self, size: int) -> ctypes.Array[ctypes.c_char]:
        buf = getattr(self._local, "buf", None)
        if buf is None or len(buf) < size:
            buf = ctypes.create_string_buffer(max(size, 1))
            self._local.buf = buf
        return buf

    def compress(self, data: bytes | bytearray, level: int, *, final: bool) -> bytes:
        """Raw deflate of ``data`` by libdeflate; unless ``final``, left open and ended on a
        byte boundary with an empty stored block."""
        raw = bytes(libdeflate.deflate_compress(data, level))
        if final:
            return raw
        last_block, end = self._locate(raw, data)
        out = bytearray(raw[: (end + 7) // 8])
        if end % 8:
            out[-1] &= (1 << (end % 8)) - 1  # the padding bits after the final block
        out[last_block // 8] &= ~(1 << (last_block % 8)) & 0xFF  # BFINAL off
        # an empty stored block: 3 header bits (0, 00) from ``end``, then byte-aligned LEN/NLEN
        if (end + 3 + 7) // 8 > len(out):
            out.append(0)
        out += _SYNC_MARKER
        return bytes(out)

    def _locate(self, raw: bytes, data: bytes | bytearray) -> tuple[int, int]:
        """(bit position of the last block's header, bit position of the stream's end),
        inflating ``raw`` with ``Z_BLOCK``; it must decode to ``data``."""
        lib = self._lib
        stream = _ZStream()
        source = ctypes.create_string_buffer(raw, len(raw))
        out = self._scratch(len(data))
        if lib.inflateInit2_(ctypes.byref(stream), -15, self._version,
                             ctypes.sizeof(_ZStream)) != _Z_OK:  # fmt: skip
            raise PackagingError("zlib: inflateInit2 failed")
        try:
            stream.next_in = ctypes.cast(source, ctypes.c_void_p).value
            stream.avail_in = len(raw)
            stream.next_out = ctypes.cast(out, ctypes.c_void_p).value
            stream.avail_out = len(out)
            boundary, end = 0, -1  # raw inflate does not stop before the first header
            while True:
                ret = lib.inflate(ctypes.byref(stream), _Z_BLOCK)
                if ret == _Z_STREAM_END:
                    break
                if ret != _Z_OK:
                    raise PackagingError(f"libdeflate chunk does not inflate (zlib {ret})")
                if stream.data_type & 128:  # stopped before a block header
                    position = stream.total_in * 8 - (stream.data_type & 7)
                    if stream.data_type & 64:  # ... after the final block: the stream's end
                        end = position
                    else:
                        boundary = position
            produced = stream.total_out
        finally:
            lib.inflateEnd(ctypes.byref(stream))
        if (
            end < 0
            or produced != len(data)
            or ctypes.string_at(out, produced) != data  # a copy and a memcmp: cheaper than CRCs
            or not raw[boundary // 8] >> (boundary % 8) & 1
        ):
            raise PackagingError("libdeflate chunk did not decode back to its input")
        return boundary, end


@functools.cache
def joiner() -> ChunkJoiner | None:
    """The joiner, if a shared zlib with ``Z_BLOCK`` can be loaded; else ``None``."""
    name = ctypes.util.find_library("z")
    if name is None:
        return None
    try:
        return ChunkJoiner(ctypes.CDLL(name))
    except (OSError, AttributeError):
        return None
