"""Compressed offload bundles ``CCOB`` v1/v2/v3 with zstd or zlib (kpack.md §2.3).

Private to :mod:`kpack.bundle`. The header is untrusted: its uncompressed size is checked
against :data:`MAX_UNCOMPRESSED` and against what the compressed length can really expand
to *before* anything is decoded, and nothing is allocated from it. Decompression is streamed
in chunks of :data:`_OUT_CHUNK`: memory grows only with bytes that really decode, and decoding
stops as soon as the output would pass the declared size. :func:`make_ccob`, the writer the
package exports, compresses plain bundles into a ``CCOB`` of any version.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Iterator
from typing import NamedTuple

import zstandard

from kpack.bundle._plain import Ctx

CCOB_MAGIC = b"CCOB"
METHODS = {0: "zlib", 1: "zstd"}
#: The largest single bundle we decode. Real ROCm 7 libraries hold bundles of tens to a few
#: hundred MiB (a 1.2 GB torch library: 41 bundles); 4 GiB is generous and still bounded.
MAX_UNCOMPRESSED = 4 << 30
# Densest possible encodings: a 4-byte zstd RLE block yields 128 KiB; deflate peaks near 1032:1.
# A declared size beyond what the compressed bytes can expand to is a lie, refused unread.
_MAX_RATIO = {"zstd": 1 << 16, "zlib": 1 << 11}
_ZLIB_CHUNK = 1 << 20
_OUT_CHUNK = 1 << 20
_U16X2 = struct.Struct("<HH")
_U32 = struct.Struct("<I")
# version -> (struct of the fields after method: [total_size,] uncompressed_size, hash; header size)
_SIZES = {
    1: (struct.Struct("<IQ"), 20),  # uncompressed, hash
    2: (struct.Struct("<IIQ"), 24),  # total, uncompressed, hash
    3: (struct.Struct("<QQQ"), 32),
}
_ZSTD_MAGIC = 0xFD2FB528
_SKIPPABLE = range(0x184D2A50, 0x184D2A60)
_DICT_ID_SIZE = (0, 1, 2, 4)


class CcobHeader(NamedTuple):
    version: int
    method: str
    header_size: int
    total_size: int | None
    uncompressed_size: int
    hash: int


def read_header(view: memoryview, start: int, ctx: Ctx) -> CcobHeader:
    avail = len(view) - start
    if avail < 8:
        raise ctx.error(f"truncated CCOB header: {avail} bytes")
    if bytes(view[start : start + 4]) != CCOB_MAGIC:
        raise ctx.error("magic is not CCOB")
    version, method_id = _U16X2.unpack_from(view, start + 4)
    if version not in _SIZES:
        raise ctx.error(f"CCOB version {version} is not supported (expected 1, 2 or 3)")
    if method_id not in METHODS:
        raise ctx.error(f"CCOB method {method_id} is unknown (0 = zlib, 1 = zstd)")
    fields, header_size = _SIZES[version]
    if avail < header_size:
        raise ctx.error(f"truncated CCOB v{version} header: {avail} bytes, need {header_size}")
    values = fields.unpack_from(view, start + 8)
    total = None if version == 1 else values[0]
    uncompressed, digest = values[-2], values[-1]
    if total is not None and not header_size < total <= avail:
        raise ctx.error(
            f"CCOB total_size {total} must exceed the {header_size}-byte header and fit in "
            f"the {avail} bytes left in the buffer"
        )
    if uncompressed > MAX_UNCOMPRESSED:
        raise ctx.error(f"CCOB uncompressed_size {uncompressed} exceeds {MAX_UNCOMPRESSED}")
    return CcobHeader(
        version=version,
        method=METHODS[method_id],
        header_size=header_size,
        total_size=total,
        uncompressed_size=uncompressed,
        hash=digest,
    )


def _zstd_frame_end(view: memoryview, pos: int, limit: int, ctx: Ctx) -> tuple[int, bool]:
    """End of the zstd frame at ``pos`` (RFC 8878 §3.1) and whether it was skippable."""
    if pos + 8 > limit:
        raise ctx.error(f"truncated zstd frame at {pos:#x}")
    (magic,) = _U32.unpack_from(view, pos)
    if magic in _SKIPPABLE:
        end = pos + 8 + _U32.unpack_from(view, pos + 4)[0]
        if end > limit:
            raise ctx.error(f"skippable zstd frame at {pos:#x} runs past the compressed data")
        return end, True
    if magic != _ZSTD_MAGIC:
        raise ctx.error(f"no zstd frame magic at {pos:#x} (found {magic:#010x})")
    fhd = view[pos + 4]
    single = (fhd >> 5) & 1
    if fhd & 0x08:
        raise ctx.error(f"zstd frame at {pos:#x}: reserved header bit set")
    fcs_size = (single, 2, 4, 8)[fhd >> 6]
    p = pos + 5 + (1 - single) + _DICT_ID_SIZE[fhd & 3] + fcs_size
    while True:
        if p + 3 > limit:
            raise ctx.error(f"zstd frame at {pos:#x} is truncated (block header at {p:#x})")
        block = view[p] | view[p + 1] << 8 | view[p + 2] << 16
        kind = (block >> 1) & 3
        if kind == 3:
            raise ctx.error(f"zstd frame at {pos:#x}: reserved block type at {p:#x}")
        p += 3 + (1 if kind == 1 else block >> 3)
        if block & 1:
            break
    p += 4 if fhd & 0x04 else 0
    if p > limit:
        raise ctx.error(f"zstd frame at {pos:#x} runs past the compressed data")
    return p, False


def _zstd_extent(view: memoryview, start: int, limit: int, *, one: bool, ctx: Ctx) -> int:
    """End of the zstd stream from ``start``: one data frame (v1) or frames tiling ``limit``."""
    pos = start
    while pos < limit:
        pos, skippable = _zstd_frame_end(view, pos, limit, ctx)
        if one and not skippable:
            return pos
    if one or pos == start:
        raise ctx.error("CCOB holds no zstd data frame")
    return pos


def _zstd_chunks(
    region: memoryview, size: int, ctx: Ctx, dctx: zstandard.ZstdDecompressor | None
) -> Iterator[bytes]:
    """Decode the zstd frames in ``region`` in chunks; exactly ``size`` bytes or an error.
    ``dctx``, if given, is reused (see :class:`Decoding`)."""
    done = 0
    if dctx is None:
        dctx = zstandard.ZstdDecompressor()
    try:
        with dctx.stream_reader(region, read_across_frames=True) as reader:
            while done < size:
                piece = reader.read(min(_OUT_CHUNK, size - done))
                if not piece:
                    break
                done += len(piece)
                yield piece
            extra = reader.read(1)
    except zstandard.ZstdError as exc:
        raise ctx.error(f"zstd payload does not decode: {exc}") from None
    if done < size or extra:
        more = "more than" if extra else f"only {done} bytes, not"
        raise ctx.error(f"zstd payload decodes to {more} uncompressed_size {size}")


def _zlib_chunks(region: memoryview, size: int, ctx: Ctx, used: list[int]) -> Iterator[bytes]:
    """Decode one zlib stream from ``region`` in chunks; exactly ``size`` bytes. The bytes of
    ``region`` it consumed are appended to ``used`` once the stream ends.

    Input is fed and output taken in chunks of at most ``_ZLIB_CHUNK``; decoding stops as
    soon as the output would pass ``size``.
    """
    done = 0
    dobj = zlib.decompressobj()
    taken = 0
    try:
        while not dobj.eof:
            data: bytes | memoryview = dobj.unconsumed_tail
            if not data:
                data = region[taken : taken + _ZLIB_CHUNK]
                taken += len(data)
            piece = dobj.decompress(data, min(size - done + 1, _ZLIB_CHUNK))
            if not piece and not data:
                raise ctx.error("zlib payload is truncated")
            if done + len(piece) > size:
                raise ctx.error(f"zlib payload decodes to more than uncompressed_size {size}")
            done += len(piece)
            if piece:
                yield piece
    except zlib.error as exc:
        raise ctx.error(f"zlib payload does not decode: {exc}") from None
    if done != size:
        raise ctx.error(f"zlib payload decodes to {done} bytes, not uncompressed_size {size}")
    used.append(taken - len(dobj.unused_data))  # at eof, unconsumed_tail repeats unused_data


class Decoding:
    """The decoded bytes of one CCOB, as a stream of chunks of at most 1 MiB.

    :attr:`end` (the CCOB's exclusive end in the buffer) is known at once for zstd and for
    v2/v3; for a zlib v1 bundle it is known once :meth:`chunks` has been exhausted.

    ``dctx`` is a zstd decompressor to reuse, used by one decode at a time. Worth it: a
    CCOB's zstd frame is one segment, so zstd decodes it as a stream into a window as
    large as the whole decoded payload, and a decompressor keeps that window for the next
    frame, where a fresh one has every page of it faulted in anew.
    """

    def __init__(
        self,
        view: memoryview,
        start: int,
        header: CcobHeader,
        ctx: Ctx,
        dctx: zstandard.ZstdDecompressor | None = None,
    ) -> None:
        self.header = header
        self._ctx = ctx
        self._dctx = dctx
        self._data_start = start + header.header_size
        limit = len(view) if header.total_size is None else start + header.total_size
        self._one = header.total_size is None
        if header.method == "zstd":
            limit = _zstd_extent(view, self._data_start, limit, one=self._one, ctx=ctx)
        compressed = limit - self._data_start
        if header.uncompressed_size > compressed * _MAX_RATIO[header.method]:
            raise ctx.error(
                f"CCOB uncompressed_size {header.uncompressed_size} is impossible for "
                f"{compressed} bytes of {header.method} data"
            )
        self._region = view[self._data_start : limit]
        self._limit = limit
        self._used: list[int] = []
        self.end: int | None = limit if header.method == "zstd" or not self._one else None

    def chunks(self) -> Iterator[bytes]:
        size = self.header.uncompressed_size
        if self.header.method == "zstd":
            yield from _zstd_chunks(self._region, size, self._ctx, self._dctx)
            return
        yield from _zlib_chunks(self._region, size, self._ctx, self._used)
        used = self._used[-1]
        compressed = self._limit - self._data_start
        if not self._one and used != compressed:
            raise self._ctx.error(
                f"{compressed - used} bytes follow the zlib stream inside total_size"
            )
        self.end = self._data_start + used


def decode(view: memoryview, start: int, header: CcobHeader, ctx: Ctx) -> tuple[int, bytearray]:
    """Decompress the CCOB at ``start``; return its exclusive end (absolute) and the bytes."""
    decoding = Decoding(view, start, header, ctx)
    out = bytearray()
    for piece in decoding.chunks():
        out += piece
    assert decoding.end is not None
    return decoding.end, out


def write_ccob(plain: bytes, *, version: int, method: str, level: int) -> bytes:
    """Compress ``plain`` into a CCOB of ``version`` (1-3) with ``method`` zstd or zlib."""
    if version not in _SIZES:
        raise ValueError(f"CCOB version must be 1, 2 or 3, got {version}")
    if method == "zstd":
        if not 1 <= level <= 22:
            raise ValueError(f"zstd level must be 1..22, got {level}")
        cctx = zstandard.ZstdCompressor(level=level, write_content_size=True, write_checksum=False)
        payload = cctx.compress(plain)
    elif method == "zlib":
        if not 0 <= level <= 9:
            raise ValueError(f"zlib level must be 0..9, got {level}")
        payload = zlib.compress(plain, level)
    else:
        raise ValueError(f"CCOB method must be 'zstd' or 'zlib', got {method!r}")
    method_id = {v: k for k, v in METHODS.items()}[method]
    digest = int.from_bytes(hashlib.md5(plain, usedforsecurity=False).digest()[:8], "little")
    fields, header_size = _SIZES[version]
    total = header_size + len(payload)
    sizes = (len(plain), digest) if version == 1 else (total, len(plain), digest)
    if version < 3 and max(sizes[:-1]) > 0xFFFFFFFF:
        raise ValueError(f"CCOB v{version} cannot hold sizes above 4 GiB; use version 3")
    return CCOB_MAGIC + _U16X2.pack(version, method_id) + fields.pack(*sizes) + payload


def make_ccob(plain: bytes, *, version: int = 2, method: str = "zstd", level: int = 3) -> bytes:
    """Compress ``plain`` (one or more plain bundles) into a CCOB of ``version`` 1, 2 or 3.

    The hash field is the first 8 bytes of the MD5 of ``plain``; v1 has no total-size field.
    Invalid arguments raise :class:`ValueError`.
    """
    return write_ccob(plain, version=version, method=method, level=level)
