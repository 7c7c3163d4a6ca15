"""A structural walk of one Zstandard frame (RFC 8878), standard library only.

Nothing is decompressed. :func:`parse_frame_header` reads the magic number and the frame
header; :func:`walk_frame` also walks every block header up to ``Last_Block`` and the
optional checksum, and requires the frame to end exactly at the end of the given bytes.
Inside compressed blocks it reads the literals-section and sequences-section headers, which
must fit inside the block. The content size that the frame declares must lie between what
its blocks can regenerate at least and at most.

This finds truncated frames, frames cut or padded to the wrong size, corrupted headers and
most corrupted block headers. Damage inside entropy-coded data goes unnoticed: only a real
decoder finds that.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "BLOCK_SIZE_MAX",
    "MAGIC",
    "FrameHeader",
    "FrameInfo",
    "ZstdFrameError",
    "parse_frame_header",
    "walk_frame",
]

MAGIC = 0xFD2FB528
SKIPPABLE_MASK, SKIPPABLE_MAGIC = 0xFFFFFFF0, 0x184D2A50
BLOCK_SIZE_MAX = 128 << 10
WINDOW_LOG_MAX = 31  # libzstd's limit on 64-bit hosts
_MIN_MATCH = 3
_LONG_NB_SEQ = 0x7F00
_RAW, _RLE, _COMPRESSED = 0, 1, 2


class ZstdFrameError(ValueError):
    """The bytes are not one well-formed zstd frame."""


@dataclass(frozen=True, kw_only=True)
class FrameHeader:
    header_size: int  # magic number included
    content_size: int | None  # Frame_Content_Size, None when the frame omits it
    window_size: int
    dictionary_id: int
    has_checksum: bool
    single_segment: bool

    @property
    def block_size_max(self) -> int:
        return min(self.window_size, BLOCK_SIZE_MAX)


@dataclass(frozen=True)
class FrameInfo:
    header: FrameHeader
    frame_size: int
    block_count: int
    min_content: int  # bytes the blocks regenerate at least
    max_content: int  # ... and at most

    @property
    def content_size(self) -> int | None:
        return self.header.content_size


def _le(data: memoryview, pos: int, size: int) -> int:
    return int.from_bytes(data[pos : pos + size], "little")


def _need(data: memoryview, pos: int, size: int, what: str) -> None:
    if pos + size > len(data):
        raise ZstdFrameError(
            f"truncated: {what} needs {size} byte(s) at offset {pos} of {len(data)}"
        )


def parse_frame_header(data: bytes | bytearray | memoryview) -> FrameHeader:
    """The frame header at the start of ``data``."""
    view = memoryview(data).cast("B")
    _need(view, 0, 4, "magic number")
    magic = _le(view, 0, 4)
    if magic & SKIPPABLE_MASK == SKIPPABLE_MAGIC:
        raise ZstdFrameError("a skippable frame, not a zstd frame with content")
    if magic != MAGIC:
        raise ZstdFrameError(f"bad magic number {magic:#010x}, expected {MAGIC:#010x}")
    _need(view, 4, 1, "Frame_Header_Descriptor")
    descriptor = view[4]
    fcs_flag, single_segment = descriptor >> 6, bool(descriptor & 0x20)
    if descriptor & 0x08:
        raise ZstdFrameError("Frame_Header_Descriptor: the reserved bit is set")
    has_checksum, dict_flag = bool(descriptor & 0x04), descriptor & 0x03
    pos = 5
    window_size = 0
    if not single_segment:
        _need(view, pos, 1, "Window_Descriptor")
        exponent, mantissa = view[pos] >> 3, view[pos] & 0x07
        window_log = 10 + exponent
        if window_log > WINDOW_LOG_MAX:
            raise ZstdFrameError(f"window log {window_log} exceeds {WINDOW_LOG_MAX}")
        base = 1 << window_log
        window_size = base + (base >> 3) * mantissa
        pos += 1
    dict_size = (0, 1, 2, 4)[dict_flag]
    _need(view, pos, dict_size, "Dictionary_ID")
    dictionary_id = _le(view, pos, dict_size)
    pos += dict_size
    fcs_size = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    _need(view, pos, fcs_size, "Frame_Content_Size")
    content_size: int | None = None
    if fcs_size:
        content_size = _le(view, pos, fcs_size) + (256 if fcs_size == 2 else 0)
    pos += fcs_size
    if single_segment:
        assert content_size is not None
        window_size = content_size
    return FrameHeader(header_size=pos, content_size=content_size, window_size=window_size,
                       dictionary_id=dictionary_id, has_checksum=has_checksum,
                       single_segment=single_segment)


def _sequences_header(block: memoryview, pos: int, where: str) -> int:
    """Number of sequences; the header must fit and a block without any must end there."""
    _need(block, pos, 1, f"{where}: Sequences_Section_Header")
    first = block[pos]
    if first < 128:
        count, size = first, 1
    elif first < 255:
        _need(block, pos, 2, f"{where}: Number_of_Sequences")
        count, size = ((first - 128) << 8) + block[pos + 1], 2
    else:
        _need(block, pos, 3, f"{where}: Number_of_Sequences")
        count, size = _le(block, pos + 1, 2) + _LONG_NB_SEQ, 3
    end = pos + size
    if count == 0:
        if end != len(block):
            extra = len(block) - end
            raise ZstdFrameError(f"{where}: {extra} byte(s) after an empty sequences section")
        return 0
    _need(block, end, 1, f"{where}: Symbol_Compression_Modes")
    if block[end] & 0x03:
        raise ZstdFrameError(f"{where}: Symbol_Compression_Modes reserved bits are set")
    return count


def _literals(block: memoryview, where: str) -> tuple[int, int]:
    """(bytes of the literals section, literals it regenerates) at the start of ``block``."""
    _need(block, 0, 1, f"{where}: Literals_Section_Header")
    first = block[0]
    kind, size_format = first & 0x03, (first >> 2) & 0x03
    if kind in (_RAW, _RLE):
        if size_format in (0, 2):
            header, regenerated = 1, first >> 3
        elif size_format == 1:
            _need(block, 0, 2, f"{where}: Literals_Section_Header")
            header, regenerated = 2, _le(block, 0, 2) >> 4
        else:
            _need(block, 0, 3, f"{where}: Literals_Section_Header")
            header, regenerated = 3, _le(block, 0, 3) >> 4
        return header + (regenerated if kind == _RAW else 1), regenerated
    header, bits = ((3, 10), (3, 10), (4, 14), (5, 18))[size_format]
    _need(block, 0, header, f"{where}: Literals_Section_Header")
    fields = _le(block, 0, header) >> 4
    regenerated, compressed = fields & ((1 << bits) - 1), fields >> bits
    return header + compressed, regenerated


def _compressed_block(block: memoryview, limit: int, where: str) -> int:
    """Least number of bytes a compressed block regenerates (literals + 3 per sequence)."""
    size, regenerated = _literals(block, where)
    if regenerated > limit:
        raise ZstdFrameError(f"{where}: {regenerated} literals exceed the block maximum {limit}")
    if size > len(block):
        raise ZstdFrameError(
            f"{where}: literals section of {size} bytes runs past the {len(block)}-byte block"
        )
    sequences = _sequences_header(block, size, where)
    least = regenerated + _MIN_MATCH * sequences
    if least > limit:
        raise ZstdFrameError(f"{where}: {sequences} sequences cannot fit the block maximum {limit}")
    return least


def walk_frame(data: bytes | bytearray | memoryview) -> FrameInfo:
    """Walk the frame that must fill ``data`` exactly; see the module docstring."""
    view = memoryview(data).cast("B")
    header = parse_frame_header(view)
    if header.dictionary_id:
        raise ZstdFrameError(f"the frame needs dictionary {header.dictionary_id}")
    limit = header.block_size_max
    pos, blocks, least, most = header.header_size, 0, 0, 0
    while True:
        where = f"block {blocks} at offset {pos}"
        _need(view, pos, 3, f"{where}: block header")
        raw = _le(view, pos, 3)
        last, kind, size = bool(raw & 1), (raw >> 1) & 0x03, raw >> 3
        pos += 3
        if kind == 3:
            raise ZstdFrameError(f"{where}: reserved block type")
        stored = 1 if kind == _RLE else size
        if size > limit:
            raise ZstdFrameError(f"{where}: Block_Size {size} exceeds the block maximum {limit}")
        _need(view, pos, stored, f"{where}: block content")
        if kind == _COMPRESSED:
            least += _compressed_block(view[pos : pos + size], limit, where)
            most += limit
        else:
            least += size
            most += size
        pos += stored
        blocks += 1
        if last:
            break
    if header.has_checksum:
        _need(view, pos, 4, "Content_Checksum")
        pos += 4
    if pos != len(view):
        raise ZstdFrameError(f"the frame ends at offset {pos}, but {len(view)} bytes were given")
    declared = header.content_size
    if declared is not None and not least <= declared <= most:
        raise ZstdFrameError(
            f"Frame_Content_Size {declared} is impossible: the blocks regenerate "
            f"{least}..{most} bytes"
        )
    return FrameInfo(header, pos, blocks, least, most)
