"""Reuse an input member's deflate stream when its copy is written: copy, never recompress.

A split wheel's host members are the input's members, most of them unchanged and the fat
binaries edited in a few places (headers patched, the device code cut out, a note
appended). Deflating them again is most of a split's host-side work (jax-rocm10-pjrt: a
430 MB library, 2.6 s of CPU at level 6 on libdeflate), yet the input already holds them
deflated. So:

- an unchanged member's compressed bytes are copied as they are;
- an edited member is *spliced*: deflate blocks of the input that lie wholly inside a run of
  bytes the edit kept, at least 32 KiB (deflate's window) past the run's start, decode to
  the same bytes wherever they are put, because everything they refer back to is the same.
  Those blocks are copied bit for bit; the rest (the seams around each edit and the new
  bytes) is compressed anew by libdeflate in open, byte-aligned pieces
  (:mod:`kpack.wheelfile._join`).

Copied blocks start anywhere in a byte. Instead of shifting hundreds of megabytes by some
bits, the stream before them is padded with empty fixed-Huffman blocks (10 bits each) until
it reaches the same bit offset in its byte: k/2 blocks for an offset of k bits, so a run
starts at a block whose offset is even (the next one, if not). After a run, an empty stored
block (3 bits, padding, ``00 00 ff ff``) returns the stream to a byte boundary; the stream
ends with an empty final fixed block (``03 00``). Every decoder reads these: they are what
zlib's own flushes write.

A member is spliced only when its input was deflated, its blocks were indexed while it was
inflated (:func:`kpack.wheelfile._inflate.member_chunks`), and at most an eighth of it must
be compressed anew; else it is deflated as any other member. The output depends only on the
input's bytes and libdeflate's version, as before. Nothing is taken on trust:

- every copied block's bytes, as the member holds them, must have the CRC-32 the block's
  output had when it was indexed, so runs that do not say where the member's bytes come from
  (a transform's bug) are an error, not an entry that decodes to other bytes;
- the input's compressed bytes are read again when copied, and their sha256 must be the one
  taken when the wheel was verified, so an input changed in between is an error too.
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import zlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import BinaryIO

from kpack.common import cancel
from kpack.common.frozen import frozen
from kpack.errors import PackagingError
from kpack.wheelfile._join import SYNC_MARKER, joiner
from kpack.wheelfile._zip import DEFLATED, ZipWriter, needs_zip64_header

__all__ = ["DeflateStream", "Reuse", "SpliceResult", "plan_reuse", "write_reused"]

log = logging.getLogger(__name__)

_HISTORY = 32 << 10  # deflate's window: how far back a block may refer
_MIN_COPY = 256 << 10  # a run of blocks shorter than this is not worth its seam
_MAX_FRESH_SHARE = 8  # splice only if at most 1/8 of the member is compressed anew
_RAW_PIECE = 1 << 20
_FRESH_PIECE = 4 << 20
_FINAL_EMPTY = b"\x03\x00"  # BFINAL 1, fixed Huffman, end-of-block


@frozen(kw_only=True)
class DeflateStream:
    """A deflated member of an input archive: where its raw stream lies, the CRC-32 of its
    bytes (``crc``), the sha256 of the compressed bytes (``raw_digest``), and, when indexed,
    the output offset (``starts``), bit offset (``bits``) and output CRC-32 (``crcs``) of
    every entry, the last one through the stream's end. An entry is a block, or a run of
    consecutive blocks where the stream has more than its bytes justify (the index is
    bounded by the member's size, :class:`~kpack.wheelfile._zstream.BlockInflater`)."""

    archive: Path
    offset: int
    size: int
    length: int
    crc: int
    raw_digest: bytes
    starts: tuple[int, ...] = ()
    bits: tuple[int, ...] = ()
    crcs: tuple[int, ...] = ()

    def with_blocks(
        self, starts: tuple[int, ...], bits: tuple[int, ...], crcs: tuple[int, ...]
    ) -> DeflateStream:
        return replace(self, starts=starts, bits=bits, crcs=crcs)


@frozen
class Reuse:
    """A member whose bytes are, in ``runs``, those of ``stream``: each run is
    ``(member offset, stream offset, length)``; runs go forward in both, never overlap and
    lie within the stream (the stream is read forward once)."""

    stream: DeflateStream
    runs: tuple[tuple[int, int, int], ...]

    def __post_init__(self) -> None:
        at_end = origin_end = 0
        for at, origin, length in self.runs:
            if length <= 0 or at < at_end or origin < origin_end:
                raise PackagingError(
                    f"internal error: reuse runs must go forward and not overlap: {self.runs[:8]}"
                )
            at_end, origin_end = at + length, origin + length
        if origin_end > self.stream.length:
            raise PackagingError(
                f"internal error: a reuse run ends at {origin_end}, past the input member's "
                f"{self.stream.length} bytes",
                path=self.stream.archive,
            )

    @classmethod
    def unchanged(cls, stream: DeflateStream) -> Reuse:
        return cls(stream, ((0, 0, stream.length),) if stream.length else ())


@frozen
class _Copy:
    """Member bytes ``[start, end)`` are blocks ``[first, last)`` of the stream."""

    start: int
    end: int
    first: int
    last: int


@frozen
class SpliceResult:
    crc: int
    sha256: bytes
    size: int
    compressed_size: int


_Plan = tuple[_Copy, ...]
#: The member is the stream: copy it whole. (A splice plan is never empty: with nothing to
#: copy, :func:`plan_reuse` says ``None``.)
WHOLE: _Plan = ()


def plan_reuse(reuse: Reuse, size: int) -> _Plan | None:
    """The blocks to copy for a member of ``size`` bytes (:data:`WHOLE` for an unchanged
    member), or ``None`` when splicing would not pay (too much to compress anew)."""
    stream = reuse.stream
    if size < _MIN_COPY:  # compressed anew in no time, and libdeflate's bytes are smaller
        return None
    if size == stream.length and reuse.runs == ((0, 0, stream.length),):
        return WHOLE
    if len(stream.starts) < 2:
        return None
    copies: list[_Copy] = []
    for at, origin, length in reuse.runs:
        lo = origin if at == origin == 0 else origin + _HISTORY
        first = bisect.bisect_left(stream.starts, lo)
        last = bisect.bisect_right(stream.starts, origin + length) - 1  # never the final block
        while first < last and stream.bits[first] % 2:  # odd offsets cannot be padded to
            first += 1
        if last <= first or stream.starts[last] - stream.starts[first] < _MIN_COPY:
            continue
        shift = at - origin
        copies.append(_Copy(stream.starts[first] + shift, stream.starts[last] + shift, first, last))
    copied = sum(c.end - c.start for c in copies)
    if not copies or (size - copied) * _MAX_FRESH_SHARE > size:
        return None
    return tuple(copies)


def write_reused(
    writer: ZipWriter,
    arcname: str,
    *,
    executable: bool,
    reuse: Reuse,
    plan: _Plan,
    content: Iterator[bytes | memoryview],
    size: int,
    level: int,
    advance: Callable[[int], None] | None = None,
) -> SpliceResult:
    """Write the member ``arcname`` whose bytes ``content`` yields (``size`` of them) as one
    deflated entry of ``writer``, copying what ``plan`` says from ``reuse.stream``."""
    # the entry holds at most the input's compressed bytes plus an eighth of the member anew
    bound = max(size, reuse.stream.size + size // 7)
    entry = writer.begin(
        arcname, method=DEFLATED, executable=executable, zip64_header=needs_zip64_header(bound)
    )
    cursor = _Cursor(content, advance)
    out = _Counted(writer.write)
    with _RawReader(reuse.stream) as raw:
        if plan is WHOLE:
            cursor.consume(size, None)
            for piece in raw.copy(0, reuse.stream.size):
                out(piece)
        else:
            join = joiner()
            if join is None:  # pragma: no cover - plans are made only where blocks were indexed
                raise PackagingError("internal error: a splice needs zlib's Z_BLOCK")

            def fresh(data: bytes) -> None:
                out(join.compress(data, level, final=False))

            for copy in plan:
                cursor.consume(copy.start - cursor.pos, fresh)
                _check_blocks(cursor, reuse.stream, copy, arcname)
                _copy_blocks(raw, reuse.stream, copy, out)
            cursor.consume(size - cursor.pos, fresh)
            out(_FINAL_EMPTY)
        raw.finish()
    cursor.finish(size)
    if plan is WHOLE and cursor.crc != reuse.stream.crc:
        raise PackagingError(f"{reuse.stream.archive}: a member changed since it was verified")
    writer.end(entry, crc=cursor.crc, compressed_size=out.count, file_size=size)
    how = "copied" if plan is WHOLE else f"{len(plan)} runs of blocks copied"
    log.debug("wrote %s (%d -> %d bytes, %s)", arcname, size, out.count, how)
    return SpliceResult(cursor.crc, cursor.sha.digest(), size, out.count)


def _check_blocks(cursor: _Cursor, stream: DeflateStream, copy: _Copy, arcname: str) -> None:
    """Consume the member's bytes that ``copy`` covers, checking them block by block
    against the CRC-32 each block's output had when the input was indexed."""
    for block in range(copy.first, copy.last):
        at = cursor.pos
        crc = cursor.consume(stream.starts[block + 1] - stream.starts[block], None)
        if crc != stream.crcs[block]:
            raise PackagingError(
                f"internal error: {arcname}: bytes {at}.. differ from the input's block they "
                "would be copied from (the transform's kept runs are wrong)",
                path=stream.archive,
            )


def _copy_blocks(raw: _RawReader, stream: DeflateStream, copy: _Copy, out: _Counted) -> None:
    """Blocks ``[copy.first, copy.last)`` of the stream, from a byte boundary: padded to
    their bit offset, copied, and closed with an empty stored block."""
    begin, end = stream.bits[copy.first], stream.bits[copy.last]
    k = begin % 8
    count = k // 2  # empty fixed blocks: 10 bits each, 10 * count = k (mod 8)
    pad = sum(1 << (10 * t + 1) for t in range(count))  # BFINAL 0, BTYPE 01, end-of-block
    whole = 10 * count // 8
    if whole:
        out(pad.to_bytes(whole, "little"))
    # k bits of padding share the first byte (zeros: an end-of-block code is all zero bits)
    low = (pad >> (8 * whole)) & ((1 << k) - 1)
    tail = end % 8
    lo, hi = begin // 8, (end + 7) // 8
    first, left = True, hi - lo
    for piece in raw.copy(lo, hi):
        left -= len(piece)
        last = left == 0
        if not (first or last):
            out(piece)
            continue
        buf = bytearray(piece)
        if first:
            buf[0] = low | (buf[0] & ~((1 << k) - 1) & 0xFF)
            first = False
        if last and tail:
            buf[-1] &= (1 << tail) - 1  # the next block's bits are not ours
        out(buf)
    if tail == 0 or tail > 5:  # the stored block's 3 header bits need a byte of their own
        out(b"\x00")
    out(SYNC_MARKER)


class _Counted:
    def __init__(self, emit: Callable[[bytes | bytearray | memoryview], None]) -> None:
        self._emit = emit
        self.count = 0

    def __call__(self, data: bytes | bytearray | memoryview) -> None:
        if data:
            self.count += len(data)
            self._emit(data)


class _Cursor:
    """The member's bytes, read once in order: hashed, and handed on where asked."""

    def __init__(
        self, content: Iterator[bytes | memoryview], advance: Callable[[int], None] | None
    ) -> None:
        self._content = content
        self._advance = advance
        self._held = memoryview(b"")
        self.pos = 0
        self.crc = 0
        self.sha = hashlib.sha256()

    def consume(self, n: int, sink: Callable[[bytes], None] | None) -> int:
        """Pass the next ``n`` bytes to ``sink`` in pieces of at most 4 MiB (or drop them);
        return their CRC-32."""
        if n < 0:
            raise PackagingError("internal error: member content asked for out of order")
        pending: list[memoryview] = []
        pending_size = 0
        crc = 0
        while n > 0:
            if not self._held:
                cancel.check()
                self._held = memoryview(next(self._content, b"")).cast("B")
                if not self._held:
                    raise PackagingError("internal error: member content ended early")
            take = min(n, len(self._held), _FRESH_PIECE - pending_size)
            piece, self._held = self._held[:take], self._held[take:]
            self.sha.update(piece)
            self.crc = zlib.crc32(piece, self.crc)
            crc = zlib.crc32(piece, crc)
            if self._advance is not None:
                self._advance(take)
            self.pos += take
            n -= take
            if sink is not None:
                pending.append(piece)
                pending_size += take
                if pending_size == _FRESH_PIECE or n == 0:
                    sink(b"".join(pending))
                    pending, pending_size = [], 0
        return crc

    def finish(self, size: int) -> None:
        if self.pos != size or self._held or next(self._content, b""):
            raise PackagingError(f"internal error: member content is not {size} bytes")


class _RawReader:
    """The stream's compressed bytes, read forward once from the archive; every byte is
    checked against the sha256 taken when the wheel was verified (:meth:`finish`)."""

    def __init__(self, stream: DeflateStream) -> None:
        self._stream = stream
        self._file: BinaryIO | None = None
        self._pos = 0
        self._hash = hashlib.sha256()

    def __enter__(self) -> _RawReader:
        try:
            self._file = open(self._stream.archive, "rb")
        except OSError as exc:
            raise PackagingError(
                f"cannot read: {exc.strerror}", path=self._stream.archive
            ) from None
        self._file.seek(self._stream.offset)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._file is not None:
            self._file.close()

    def copy(self, lo: int, hi: int) -> Iterator[bytes]:
        """Bytes ``[lo, hi)`` of the stream, in pieces (the bytes before ``lo`` are read and
        checked, not returned)."""
        for _ in self._read(lo - self._pos):
            pass
        yield from self._read(hi - lo)

    def finish(self) -> None:
        for _ in self._read(self._stream.size - self._pos):
            pass
        if self._hash.digest() != self._stream.raw_digest:
            raise PackagingError(
                "changed since it was verified: a member's compressed bytes differ",
                path=self._stream.archive,
            )

    def _read(self, n: int) -> Iterator[bytes]:
        if self._file is None or n < 0:
            raise PackagingError("internal error: compressed bytes asked for out of order")
        while n > 0:
            cancel.check()
            piece = self._file.read(min(n, _RAW_PIECE))
            if not piece:
                raise PackagingError(
                    "changed since it was verified: shorter", path=self._stream.archive
                )
            self._hash.update(piece)
            self._pos += len(piece)
            n -= len(piece)
            yield piece
