"""Forward-only reads over a stream of byte chunks, such as a compressed bundle being decoded.

Private to :mod:`kpack.bundle`. :class:`ChunkReader` peeks, reads, copies and skips across
chunk boundaries while keeping the absolute position, and holds no more than the current
chunk (plus a header being peeked at), whatever the size of the stream.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

#: How many bytes :meth:`ChunkReader.skip_zeros` looks at a time: a small copy, never the
#: rest of a 1 MiB chunk (a bundle's first byte is almost always where the skip ends).
_SCAN = 1 << 14


class ChunkReader:
    """Forward-only reads over a stream of chunks, with the absolute position."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = iter(chunks)
        self._buf = b""
        self._off = 0
        self.pos = 0

    def _more(self) -> bool:
        while self._off >= len(self._buf):
            nxt = next(self._chunks, None)
            if nxt is None:
                return False
            self._buf, self._off = nxt, 0
        return True

    def peek(self, n: int) -> bytes:
        while len(self._buf) - self._off < n:
            nxt = next(self._chunks, None)
            if nxt is None:
                break
            self._buf, self._off = self._buf[self._off :] + nxt, 0
        return self._buf[self._off : self._off + n]

    def copy(self, n: int, write: Callable[[bytes | memoryview], object] | None) -> int:
        """Pass the next ``n`` bytes to ``write`` (or drop them); return how many there were."""
        done = 0
        while done < n and self._more():
            take = min(n - done, len(self._buf) - self._off)
            if write is not None:
                write(memoryview(self._buf)[self._off : self._off + take])
            self._off += take
            done += take
        self.pos += done
        return done

    def read(self, n: int) -> bytes:
        parts: list[bytes] = []
        self.copy(n, lambda b: parts.append(bytes(b)))
        return b"".join(parts)

    def skip_zeros(self) -> bool:
        """Step over zero bytes; ``True`` if a non-zero byte follows, ``False`` at the end."""
        while self._more():
            end = min(len(self._buf), self._off + _SCAN)
            rest = self._buf[self._off : end].lstrip(b"\0")
            self.pos += end - len(rest) - self._off
            self._off = end - len(rest)
            if rest:
                return True
        return False
