"""Read a ``.kpack`` archive (format version 1) as the ROCm runtime does (standard library
only): header, TOC, the location of every kernel, and a check that a kernel decodes to
exactly ``original_size`` bytes, with the ``zstandard`` module if it is importable
(:func:`zstandard_decompress`), otherwise by walking the zstd frame.

Every problem with an archive is a :class:`~rocm_sdk._kpack.KpackError` naming the file.
"""

from __future__ import annotations

import importlib
import mmap
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from ._kpack import KpackError
from ._msgpack import MsgpackError, unpackb
from ._zstd_frame import ZstdFrameError, parse_frame_header, walk_frame

__all__ = [
    "ArchiveEntry",
    "Decompress",
    "KpackArchive",
    "zstandard_decompress",
]

KPACK_MAGIC = b"KPAK"
KPACK_VERSION = 1
BLOB_ALIGNMENT = 64
MAX_KERNELS = 1_000_000  # the C reader's cap on num_kernels
MAX_ZSTD_BLOB = 4 << 30  # the C reader's cap on the zstd blob
MAX_RATIO = 1 << 16  # a zstd frame regenerates less than this per stored byte
TOC_MAX_DEPTH = 8
SCHEMES = ("none", "zstd-per-kernel")
_HEADER = struct.Struct("<4sIQ")
_U32 = struct.Struct("<I")

#: ``decompress(frame, original_size)`` returns the decompressed length or raises.
Decompress = Callable[[bytes, int], int]


@dataclass(frozen=True, kw_only=True)
class ArchiveEntry:
    """A TOC entry and where its stored bytes are (the blob, or the zstd frame)."""

    binary_key: str
    target: str
    ordinal: int
    original_size: int | None
    offset: int
    size: int


def _field(table: dict[object, object], key: str, kind: type, where: str, path: Path) -> object:
    if key not in table:
        raise KpackError(f"TOC: missing {where}{key!r}", path)
    value = table[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise KpackError(f"TOC: {where}{key!r} must be {kind.__name__}, not {value!r}", path)
    return value


def _count(table: dict[object, object], key: str, where: str, path: Path) -> int:
    value = _field(table, key, int, where, path)
    assert isinstance(value, int)
    if not 0 <= value < 1 << 64:
        raise KpackError(f"TOC: {where}{key!r} = {value} is out of range", path)
    return value


class KpackArchive:
    """An opened ``.kpack`` archive; use :meth:`open` (also a context manager)."""

    def __init__(
        self,
        path: Path,
        mm: mmap.mmap,
        gfx_arches: tuple[str, ...],
        scheme: str,
        entries: dict[tuple[str, str], ArchiveEntry],
    ) -> None:
        self.path = path
        self.gfx_arches = gfx_arches
        self.scheme = scheme
        self.entries = entries
        self._mm = mm

    @classmethod
    def open(cls, path: Path) -> KpackArchive:
        """Map ``path`` and check its header, TOC and kernel locations."""
        path = Path(path)
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < BLOB_ALIGNMENT:
                    raise KpackError(f"{size} bytes is too small for a .kpack header", path)
                mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as exc:
            raise KpackError(f"cannot open: {exc}", path) from None
        try:
            arches, scheme, entries = _load(mm, path)
        except BaseException:
            mm.close()
            raise
        return cls(path, mm, arches, scheme, entries)

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

    def get(self, binary_key: str, target: str) -> ArchiveEntry | None:
        return self.entries.get((binary_key, target))

    def entry_problem(self, entry: ArchiveEntry, decompress: Decompress | None) -> str | None:
        """Why ``entry`` does not decode to exactly ``original_size`` bytes; None if it does.

        ``decompress`` (see :func:`zstandard_decompress`) decodes zstd frames; without it
        the frame is walked structurally (:func:`~rocm_sdk._zstd_frame.walk_frame`).
        """
        where = f"toc[{entry.binary_key!r}][{entry.target!r}] (ordinal {entry.ordinal})"
        original = entry.original_size
        if original is None:
            return f"{where} has no original_size"
        if self.scheme == "none":
            if entry.size != original:
                return f"{where}: blob is {entry.size} bytes, original_size is {original}"
            return None
        frame = self._mm[entry.offset : entry.offset + entry.size]
        try:
            declared = parse_frame_header(frame).content_size
            if declared != original:
                return f"{where}: zstd frame declares {declared} bytes, original_size is {original}"
            if original > entry.size * MAX_RATIO:
                return f"{where}: original_size {original} is impossible for {entry.size} bytes"
            if decompress is None:
                walk_frame(frame)
                return None
            produced = decompress(frame, original)
        except (ZstdFrameError, KpackError) as exc:
            return f"{where}: zstd frame of {entry.size} bytes is broken: {exc}"
        if produced != original:
            return f"{where}: zstd frame decodes to {produced} bytes, original_size is {original}"
        return None


def _decode_toc(raw: bytes, path: Path) -> dict[object, object]:
    try:
        toc = unpackb(raw, max_depth=TOC_MAX_DEPTH)
    except MsgpackError as exc:
        raise KpackError(f"TOC: not one MessagePack map running to EOF ({exc})", path) from None
    if not isinstance(toc, dict):
        raise KpackError(f"TOC: expected a map, got {type(toc).__name__}", path)
    version = toc.get("format_version", KPACK_VERSION)
    if version != KPACK_VERSION or isinstance(version, bool):
        raise KpackError(f"TOC: format_version {version!r} is not {KPACK_VERSION}", path)
    return toc


def _frames(mm: mmap.mmap, start: int, size: int, path: Path) -> list[tuple[int, int]]:
    """Walk the zstd blob's size prefixes once: (offset, size) of each ordinal's frame."""
    if size < _U32.size:
        raise KpackError(f"zstd_size {size} cannot hold num_kernels", path)
    (count,) = _U32.unpack_from(mm, start)
    if count > MAX_KERNELS or _U32.size * (count + 1) > size:
        raise KpackError(f"num_kernels {count} is absurd for a {size}-byte zstd blob", path)
    frames = []
    pos, end = start + _U32.size, start + size
    for ordinal in range(count):
        if pos + _U32.size > end:
            raise KpackError(f"the zstd blob ends before frame {ordinal} of {count}", path)
        (length,) = _U32.unpack_from(mm, pos)
        pos += _U32.size
        if length > end - pos:
            raise KpackError(
                f"frame {ordinal}: size {length} at {pos:#x} runs past the zstd blob", path
            )
        frames.append((pos, length))
        pos += length
    if pos != end:
        raise KpackError(f"{end - pos} byte(s) follow the last frame inside zstd_size", path)
    return frames


def _blobs(toc: dict[object, object], toc_offset: int, path: Path) -> list[tuple[int, int]]:
    blobs = _field(toc, "blobs", list, "", path)
    assert isinstance(blobs, list)
    out = []
    for index, raw in enumerate(blobs):
        if not isinstance(raw, dict):
            raise KpackError(f"TOC: blobs[{index}] must be a map", path)
        where = f"blobs[{index}] "
        offset, size = _count(raw, "offset", where, path), _count(raw, "size", where, path)
        if offset < BLOB_ALIGNMENT or offset + size > toc_offset:
            raise KpackError(f"TOC: {where}lies outside the blob area", path)
        out.append((offset, size))
    return out


def _locations(
    mm: mmap.mmap, toc: dict[object, object], scheme: str, toc_offset: int, path: Path
) -> list[tuple[int, int]]:
    if scheme == "none":
        return _blobs(toc, toc_offset, path)
    start, size = _count(toc, "zstd_offset", "", path), _count(toc, "zstd_size", "", path)
    if size > MAX_ZSTD_BLOB:
        raise KpackError(f"zstd_size {size} exceeds {MAX_ZSTD_BLOB}", path)
    if start < BLOB_ALIGNMENT or start + size > toc_offset:
        raise KpackError(
            f"zstd blob [{start:#x}, {start + size:#x}) lies outside the blob area "
            f"[{BLOB_ALIGNMENT:#x}, {toc_offset:#x})",
            path,
        )
    return _frames(mm, start, size, path)


def _entries(
    toc: dict[object, object], scheme: str, locations: list[tuple[int, int]], path: Path
) -> dict[tuple[str, str], ArchiveEntry]:
    table = _field(toc, "toc", dict, "", path)
    assert isinstance(table, dict)
    out: dict[tuple[str, str], ArchiveEntry] = {}
    for key, targets in table.items():
        if not isinstance(key, str) or not isinstance(targets, dict):
            raise KpackError(f"TOC: toc[{key!r}] must map a str key to a map", path)
        for target, raw in targets.items():
            where = f"toc[{key!r}][{target!r}] "
            if not isinstance(target, str) or not isinstance(raw, dict):
                raise KpackError(f"TOC: {where}must map a str target to a map", path)
            if raw.get("type", "hsaco") != "hsaco":
                raise KpackError(f"TOC: {where}type {raw['type']!r} is not 'hsaco'", path)
            ordinal = _count(raw, "ordinal", where, path)
            if ordinal >= len(locations):
                raise KpackError(
                    f"TOC: {where}ordinal {ordinal} has no stored kernel "
                    f"(there are {len(locations)})",
                    path,
                )
            original = None
            if "original_size" in raw or scheme != "none":
                original = _count(raw, "original_size", where, path)
            offset, size = locations[ordinal]
            out[(key, target)] = ArchiveEntry(
                binary_key=key, target=target, ordinal=ordinal, original_size=original,
                offset=offset, size=size,
            )
    return out


def _load(
    mm: mmap.mmap, path: Path
) -> tuple[tuple[str, ...], str, dict[tuple[str, str], ArchiveEntry]]:
    magic, version, toc_offset = _HEADER.unpack_from(mm, 0)
    if magic != KPACK_MAGIC:
        raise KpackError(f"bad magic {bytes(magic)!r}, expected {KPACK_MAGIC!r}", path)
    if version != KPACK_VERSION:
        raise KpackError(f"unsupported format version {version}", path)
    if not BLOB_ALIGNMENT <= toc_offset < len(mm):
        raise KpackError(
            f"toc_offset {toc_offset:#x} is outside [{BLOB_ALIGNMENT:#x}, EOF {len(mm):#x})",
            path,
        )
    toc = _decode_toc(mm[toc_offset:], path)
    scheme = toc.get("compression_scheme", "none")
    if scheme not in SCHEMES:
        raise KpackError(f"TOC: unknown compression_scheme {scheme!r}", path)
    assert isinstance(scheme, str)
    arches = _field(toc, "gfx_arches", list, "", path)
    assert isinstance(arches, list)
    if not all(isinstance(a, str) for a in arches):
        raise KpackError(f"TOC: gfx_arches must be a list of strings, got {arches!r}", path)
    locations = _locations(mm, toc, scheme, toc_offset, path)
    entries = _entries(toc, scheme, locations, path)
    return tuple(str(a) for a in arches), scheme, entries



def zstandard_decompress() -> Decompress | None:
    """A decoder backed by the ``zstandard`` module, or None if it is not importable."""
    try:
        zstandard = importlib.import_module("zstandard")
    except ImportError:
        return None

    def decompress(frame: bytes, original_size: int) -> int:
        try:
            dctx = zstandard.ZstdDecompressor()
            try:
                data = dctx.decompress(
                    frame, max_output_size=max(original_size, 1), allow_extra_data=False
                )
            except TypeError:  # zstandard < 0.20 has no allow_extra_data
                data = dctx.decompress(frame, max_output_size=max(original_size, 1))
        except zstandard.ZstdError as exc:
            raise ZstdFrameError(f"zstandard: {exc}") from None
        return len(data)

    return decompress
