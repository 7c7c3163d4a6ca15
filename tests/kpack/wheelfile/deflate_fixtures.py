"""Raw deflate streams made by hand, block by block, for the block-index tests and the
deflate fuzz reader: stored and fixed-Huffman blocks, empty ones (what zlib's sync and
partial flushes write) by the hundred thousand, runs of one byte as distance-1 matches, and
zlib's own blocks spliced in at a sync flush. :class:`Encoder` records where each block
starts (output offset, bit offset), as an exact index of the stream must.
"""

from __future__ import annotations

import zlib

__all__ = ["EMPTY_FIXED", "Encoder"]

#: one empty fixed-Huffman block (BFINAL 0, BTYPE 01, end-of-block): 10 bits
EMPTY_FIXED = (2, 10)
_FOUR_EMPTY_FIXED = sum(2 << (10 * t) for t in range(4)).to_bytes(5, "little")
_EMPTY_STORED = b"\x00\x00\x00\xff\xff"  # from a byte boundary: header byte, LEN 0, NLEN

_LBASE = [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99,
          115, 131, 163, 195, 227, 258]  # fmt: skip
_LEXTRA = [0] * 8 + [1] * 4 + [2] * 4 + [3] * 4 + [4] * 4 + [5] * 4 + [0]


def _reversed(code: int, n: int) -> int:
    return int(f"{code:0{n}b}"[::-1], 2)


#: the fixed literal/length code of each symbol, bits reversed (deflate sends Huffman codes
#: most significant bit first), and its length
_FIXED = [
    (_reversed(0x30 + s, 8), 8) if s < 144
    else (_reversed(0x190 + s - 144, 9), 9) if s < 256
    else (_reversed(s - 256, 7), 7) if s < 280
    else (_reversed(0xC0 + s - 280, 8), 8)
    for s in range(288)
]  # fmt: skip


class Encoder:
    """A raw deflate stream written block by block; :attr:`starts` holds the (output offset,
    bit offset) of every block begun, the first included."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._acc = 0
        self._n = 0  # bits in _acc, always < 8 between calls
        self.out = bytearray()
        self.starts: list[tuple[int, int]] = []
        self.ended = False

    @property
    def bit(self) -> int:
        return 8 * len(self._buf) + self._n

    def _put(self, value: int, n: int) -> None:
        self._acc |= value << self._n
        self._n += n
        while self._n >= 8:
            self._buf.append(self._acc & 0xFF)
            self._acc >>= 8
            self._n -= 8

    def _begin(self, final: bool, btype: int) -> None:
        if self.ended:
            raise ValueError("the stream has ended")
        self.starts.append((len(self.out), self.bit))
        self._put(int(final) | btype << 1, 3)
        self.ended = final

    def _symbol(self, symbol: int) -> None:
        self._put(*_FIXED[symbol])

    def stored(self, data: bytes = b"", *, final: bool = False) -> Encoder:
        """One stored block (at most 65535 bytes)."""
        self._begin(final, 0)
        if self._n:
            self._put(0, 8 - self._n)
        self._buf += len(data).to_bytes(2, "little") + (len(data) ^ 0xFFFF).to_bytes(2, "little")
        self._buf += data
        self.out += data
        return self

    def literals(self, data: bytes, *, final: bool = False) -> Encoder:
        """One fixed-Huffman block of ``data`` as literals."""
        self._begin(final, 1)
        for byte in data:
            self._symbol(byte)
        self.out += data
        self._symbol(256)
        return self

    def repeat(
        self, count: int, byte: int = 0, *, literals: int = 1, final: bool = False
    ) -> Encoder:
        """One fixed-Huffman block: ``byte`` as ``literals`` literals (at least one), then
        ``count`` more copies of it as distance-1 matches of 258 bytes (the last ones
        shorter, at least 3 each). Highly compressible: 13 bits make 258 bytes."""
        if literals < 1 or 0 < count < 3:
            raise ValueError("a run needs a literal first, and matches of 3 bytes or more")
        self._begin(final, 1)
        for _ in range(literals):
            self._symbol(byte)
        left = count
        while left:
            length = left if left <= 258 else min(258, left - 3)
            i = 28 if length == 258 else max(k for k in range(28) if _LBASE[k] <= length)
            self._symbol(257 + i)
            self._put(length - _LBASE[i], _LEXTRA[i])
            self._put(0, 5)  # distance code 0: one byte back
            left -= length
        self._symbol(256)
        self.out += bytes([byte]) * (literals + count)
        return self

    def empty_fixed(self, count: int = 1) -> Encoder:
        """``count`` empty fixed-Huffman blocks (what a partial flush writes)."""
        if self.ended:
            raise ValueError("the stream has ended")
        while count and self._n:
            self.starts.append((len(self.out), self.bit))
            self._put(*EMPTY_FIXED)
            count -= 1
        whole, count = divmod(count, 4)
        for t in range(whole):  # byte-aligned: four blocks are five bytes
            self.starts.extend((len(self.out), self.bit + 40 * t + 10 * k) for k in range(4))
        self._buf += _FOUR_EMPTY_FIXED * whole
        for _ in range(count):
            self.starts.append((len(self.out), self.bit))
            self._put(*EMPTY_FIXED)
        return self

    def empty_stored(self, count: int = 1) -> Encoder:
        """``count`` empty stored blocks (what a sync flush writes)."""
        if count:
            self.stored()
            count -= 1
        for t in range(count):  # byte-aligned now: five bytes each
            self.starts.append((len(self.out), self.bit + 40 * t))
        self._buf += _EMPTY_STORED * count
        return self

    def zlib(self, data: bytes, level: int = 6) -> Encoder:
        """``data`` deflated by zlib and sync-flushed (of its blocks only the first is in
        :attr:`starts`)."""
        self.stored()  # byte-aligned, and a block start zlib's bytes follow
        self.starts.append((len(self.out), self.bit))
        c = zlib.compressobj(level, zlib.DEFLATED, -15)
        self._buf += c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH)
        self.out += data
        return self

    def finish(self) -> bytes:
        """The stream, ended by an empty final block if no final block was written."""
        if not self.ended:
            self._begin(True, 1)
            self._symbol(256)
        return self.getvalue()

    def getvalue(self) -> bytes:
        return bytes(self._buf) + (bytes([self._acc]) if self._n else b"")
