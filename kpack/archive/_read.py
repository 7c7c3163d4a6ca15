"""Open and validate a ``.kpack`` archive: header, TOC and blob layout (kpack.md §1).

Private to :mod:`kpack.archive`. :func:`load` maps the file read-only, checks everything
that can be checked without decompressing, and resolves each TOC entry to the absolute
location of its stored bytes (walking the zstd size prefixes once).
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path
from typing import NamedTuple

from kpack.archive._toc import ArchiveEntry, Toc, decode_toc
from kpack.archive._write import BLOB_ALIGNMENT, MAGIC, VERSION
from kpack.errors import ArchiveError

_HEADER = struct.Struct("<4sIQ")
_U32 = struct.Struct("<I")


class Limits(NamedTuple):
    max_kernels: int
    max_blob: int


def _frame_index(
    mm: mmap.mmap, start: int, size: int, path: Path, limits: Limits
) -> list[tuple[int, int]]:
    """Walk the size prefixes of a zstd-per-kernel blob once: (offset, size) per ordinal."""
    if size < _U32.size:
        raise ArchiveError(f"zstd_size {size} cannot hold num_kernels", path=path)
    (count,) = _U32.unpack_from(mm, start)
    if count > limits.max_kernels or _U32.size * (count + 1) > size:
        raise ArchiveError(f"num_kernels {count} is absurd for a {size}-byte blob", path=path)
    frames = []
    pos, end = start + _U32.size, start + size
    for ordinal in range(count):
        if pos + _U32.size > end:
            raise ArchiveError(f"zstd blob ends before frame {ordinal} of {count}", path=path)
        (length,) = _U32.unpack_from(mm, pos)
        pos += _U32.size
        if length > end - pos:
            raise ArchiveError(
                f"frame {ordinal}: size {length} at {pos:#x} runs past the zstd blob", path=path
            )
        frames.append((pos, length))
        pos += length
    if pos != end:
        raise ArchiveError(f"{end - pos} bytes follow the last frame inside zstd_size", path=path)
    return frames


def _locations(
    mm: mmap.mmap, toc: Toc, toc_offset: int, path: Path, limits: Limits
) -> list[tuple[int, int]]:
    if toc.zstd_extent is None:
        locations = list(toc.blobs)
        what = "blobs[{}]"
    else:
        locations = [toc.zstd_extent]
        what = "zstd blob"
        if toc.zstd_extent[1] > limits.max_blob:
            raise ArchiveError(
                f"zstd_size {toc.zstd_extent[1]} exceeds {limits.max_blob}", path=path
            )
    for index, (offset, size) in enumerate(locations):
        if offset < BLOB_ALIGNMENT or offset + size > toc_offset:
            raise ArchiveError(
                f"{what.format(index)} [{offset:#x}, {offset + size:#x}) lies outside the blob "
                f"area [{BLOB_ALIGNMENT:#x}, {toc_offset:#x})",
                path=path,
            )
    if toc.zstd_extent is None:
        return locations
    return _frame_index(mm, *toc.zstd_extent, path, limits)


def _check(
    mm: mmap.mmap, path: Path, limits: Limits
) -> tuple[Toc, dict[tuple[str, str], ArchiveEntry]]:
    magic, version, toc_offset = _HEADER.unpack_from(mm, 0)
    if magic != MAGIC:
        raise ArchiveError(f"bad magic {magic!r}, expected {MAGIC!r}", path=path)
    if version != VERSION:
        raise ArchiveError(f"unsupported format version {version} (only 1 is known)", path=path)
    if not BLOB_ALIGNMENT <= toc_offset < len(mm):
        raise ArchiveError(
            f"toc_offset {toc_offset:#x} is outside [{BLOB_ALIGNMENT:#x}, EOF {len(mm):#x})",
            path=path,
        )
    toc = decode_toc(mm[toc_offset:], os.fspath(path))
    locations = _locations(mm, toc, toc_offset, path, limits)
    if len(locations) > limits.max_kernels:
        raise ArchiveError(f"{len(locations)} kernels exceed {limits.max_kernels}", path=path)
    entries: dict[tuple[str, str], ArchiveEntry] = {}
    for (key, target), raw in toc.entries.items():
        if raw.ordinal >= len(locations):
            raise ArchiveError(
                f"toc[{key!r}][{target!r}]: ordinal {raw.ordinal} has no stored kernel "
                f"(there are {len(locations)})",
                path=path,
            )
        offset, size = locations[raw.ordinal]
        original = size if raw.original_size is None else raw.original_size
        entries[(key, target)] = ArchiveEntry(
            key, target, raw.ordinal, original, offset, size, raw.metadata
        )
    return toc, entries


def _map(path: Path) -> mmap.mmap:
    try:
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            if size < BLOB_ALIGNMENT:
                raise ArchiveError(f"{size} bytes is too small for a .kpack header", path=path)
            return mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise ArchiveError(f"cannot open: {exc}", path=path) from exc


def load(path: Path, limits: Limits) -> tuple[mmap.mmap, Toc, dict[tuple[str, str], ArchiveEntry]]:
    """Map ``path``; return the map, the checked TOC and every entry's location."""
    mm = _map(path)
    try:
        toc, entries = _check(mm, path, limits)
    except BaseException:
        mm.close()
        raise
    return mm, toc, entries
