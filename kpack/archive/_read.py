"""Read a ``.kpack`` archive: open and validate it, then decode one kernel at a time (kpack.md §1).

Private to :mod:`kpack.archive`. :func:`load` maps the file read-only, checks everything
that can be checked without decompressing (header, TOC, blob layout, the C reader's caps),
and resolves each TOC entry to the absolute location of its stored bytes (walking the zstd
size prefixes once). :class:`KpackArchive` is the opened archive: it looks kernels up by
``(binary_key, target)`` and decompresses each on demand, refusing a frame whose declared or
decoded size disagrees with the TOC.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import NamedTuple

import zstandard

from kpack.archive import _write  # its limits are read at call time (tests lower them)
from kpack.archive._toc import ArchiveEntry, Toc, decode_toc
from kpack.archive._write import BLOB_ALIGNMENT, MAGIC, VERSION
from kpack.errors import ArchiveError

log = logging.getLogger("kpack.archive")  # the package's logger, as callers configure it

_HEADER = struct.Struct("<4sIQ")
_U32 = struct.Struct("<I")
_MAX_RATIO = 1 << 16  # no zstd frame expands more than this per compressed byte


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
            binary_key=key,
            target=target,
            ordinal=raw.ordinal,
            original_size=original,
            offset=offset,
            size=size,
            metadata=raw.metadata,
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


class KpackArchive:
    """A ``.kpack`` archive opened for reading; use :meth:`open` (also a context manager)."""

    def __init__(
        self,
        path: Path,
        mm: mmap.mmap,
        toc: Toc,
        entries: dict[tuple[str, str], ArchiveEntry],
    ) -> None:
        self.path = path
        self.group_name = toc.group_name
        self.gfx_arch_family = toc.gfx_arch_family
        self.gfx_arches = toc.gfx_arches
        self.scheme = toc.scheme
        self._mm = mm
        self._entries = entries

    @classmethod
    def open(cls, path: Path) -> KpackArchive:
        """Map ``path`` and validate its header, TOC and blob layout."""
        path = Path(path)
        limits = Limits(_write.MAX_KERNELS, _write.MAX_ZSTD_BLOB)
        mm, toc, entries = load(path, limits)
        log.debug("opened %s: %d kernels (%s)", path, len(entries), toc.scheme)
        return cls(path, mm, toc, entries)

    def close(self) -> None:
        self._mm.close()

    def __enter__(self) -> KpackArchive:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def keys(self) -> list[tuple[str, str]]:
        """Every ``(binary_key, target)``, sorted."""
        return sorted(self._entries)

    def entry(self, binary_key: str, target: str) -> ArchiveEntry:
        try:
            return self._entries[(binary_key, target)]
        except KeyError:
            raise ArchiveError(f"no kernel {binary_key!r} for {target!r}", path=self.path) from None

    def read(self, binary_key: str, target: str) -> bytes:
        """Decompress one kernel and check its size against ``original_size``."""
        return self._read(self.entry(binary_key, target))

    def _read(self, entry: ArchiveEntry) -> bytes:
        where = f"toc[{entry.binary_key!r}][{entry.target!r}] (ordinal {entry.ordinal})"
        raw = self._mm[entry.offset : entry.offset + entry.size]
        data = raw
        if self.scheme != "none":
            data = self._decompress(raw, entry.original_size, where)
        if len(data) != entry.original_size:
            raise ArchiveError(
                f"{where}: {len(data)} bytes stored, original_size is {entry.original_size}",
                path=self.path,
            )
        return data

    def _decompress(self, frame: bytes, size: int, where: str) -> bytes:
        if size > len(frame) * _MAX_RATIO:
            raise ArchiveError(
                f"{where}: original_size {size} is impossible for a {len(frame)}-byte frame",
                path=self.path,
            )
        try:
            declared = zstandard.frame_content_size(frame)
            if declared not in (-1, size):
                raise ArchiveError(
                    f"{where}: the zstd frame declares {declared} bytes, original_size is {size}",
                    path=self.path,
                )
            dctx = zstandard.ZstdDecompressor()
            data: bytes = dctx.decompress(
                frame, max_output_size=max(size, 1), allow_extra_data=False
            )
        except zstandard.ZstdError as exc:
            message = f"{where}: zstd frame does not decode: {exc}"
            raise ArchiveError(message, path=self.path) from None
        return data

    def verify(self) -> None:
        """Decode every kernel and check ``gfx_arches``; report all problems together."""
        problems: list[str] = []
        arches = set(self.gfx_arches)
        for key in self.keys():
            entry = self._entries[key]
            try:
                self._read(entry)
            except ArchiveError as exc:
                problems.append(exc.message)
            if entry.target not in arches:
                problems.append(
                    f"target {entry.target!r} of {entry.binary_key!r} is not in gfx_arches"
                )
        if problems:
            raise ArchiveError("archive failed verification", path=self.path, problems=problems)
