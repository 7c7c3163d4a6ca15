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

import functools
import threading
from typing import TYPE_CHECKING

from kpack.errors import PackagingError
from kpack.wheelfile._libdeflate import libdeflate

if TYPE_CHECKING:  # ctypes and the shared zlib are loaded when a chunk is first joined
    import ctypes

    from kpack.wheelfile._zstream import ZlibLibrary

__all__ = ["SYNC_MARKER", "ChunkJoiner", "joiner"]

SYNC_MARKER = b"\x00\x00\xff\xff"  # LEN 0, NLEN 0xffff of an empty stored block


class ChunkJoiner:
    """Compress chunks with libdeflate so that they concatenate (see the module doc)."""

    def __init__(self, zlib: ZlibLibrary) -> None:
        self._zlib = zlib
        self._local = threading.local()

    def _scratch(self, size: int) -> ctypes.Array[ctypes.c_char]:
        import ctypes

        buf = getattr(self._local, "buf", None)
        if buf is None or len(buf) < size:
            buf = ctypes.create_string_buffer(max(size, 1))
            self._local.buf = buf
        return buf

    def compress(self, data: bytes | bytearray, level: int, *, final: bool) -> bytes:
        """Raw deflate of ``data`` by libdeflate; unless ``final``, left open and ended on a
        byte boundary with an empty stored block."""
        raw = bytes(libdeflate().deflate_compress(data, level))
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
        out += SYNC_MARKER
        return bytes(out)

    def _locate(self, raw: bytes, data: bytes | bytearray) -> tuple[int, int]:
        """(bit position of the last block's header, bit position of the stream's end),
        inflating ``raw`` with ``Z_BLOCK``; it must decode to ``data``."""
        inflater = self._zlib.inflater()
        size = max(len(data), 1)
        try:
            decoded = b"".join(inflater.run((raw,), size, self._scratch(size)))
        except PackagingError:
            raise PackagingError("libdeflate chunk does not inflate") from None
        if (
            decoded != data  # one copy and a memcmp: cheaper than CRCs
            or inflater.consumed != len(raw)
            or not raw[inflater.last // 8] >> (inflater.last % 8) & 1
        ):
            raise PackagingError("libdeflate chunk did not decode back to its input")
        return inflater.last, inflater.end


@functools.cache
def joiner() -> ChunkJoiner | None:
    """The joiner, if a shared zlib with ``Z_BLOCK`` can be loaded; else ``None``."""
    from kpack.wheelfile._zstream import zlib_library

    zlib = zlib_library()
    return None if zlib is None else ChunkJoiner(zlib)
