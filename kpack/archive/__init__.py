"""``.kpack`` archives, format version 1 (kpack.md §1): a deterministic writer and a reader.

Layout: ``KPAK``, u32 version 1, u64 ``toc_offset``, zero padding to 64, the blob area, then
one MessagePack map (the TOC) running to the end of the file. The blob area holds the kernels
back to back (scheme ``none``) or ``u32 num_kernels`` followed by ``(u32 size, zstd frame)``
per ordinal (``zstd-per-kernel``).

:func:`write_kpack` sorts kernels by ``(binary_key, target)`` before assigning ordinals, so
the bytes depend only on the set of kernels; it refuses archives the C runtime cannot load.
When every kernel is stored already (a frame made at the archive's level, or a code object
for ``none``), :func:`lay_out_kpack` computes the whole archive but its blobs up front, so
it can be streamed (into a wheel) with the same bytes :func:`write_kpack` writes.
:class:`KpackArchive` maps the file and decompresses one kernel at a time. Every problem is
an :class:`~kpack.errors.ArchiveError` naming the file and the field.
"""

from __future__ import annotations

import logging
import mmap
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Literal

import msgpack
import zstandard

from kpack.archive import _write as _archive_write
from kpack.archive._read import Limits, load
from kpack.archive._toc import SCHEMES, ArchiveEntry, Toc
from kpack.archive._write import (
    FrameWriter,
    ZstdFrame,
    compressed,
    compressor,
    payload_size,
    write_chunks,
)
from kpack.errors import ArchiveError
from kpack.targets import is_target_id

__all__ = [
    "BLOB_ALIGNMENT",
    "MAGIC",
    "MAX_KERNELS",
    "MAX_ZSTD_BLOB",
    "SCHEMES",
    "ArchiveEntry",
    "FrameWriter",
    "KernelInput",
    "KpackArchive",
    "KpackLayout",
    "KpackSummary",
    "Scheme",
    "StoredKernel",
    "ZstdFrame",
    "compressed",
    "compressor",
    "lay_out_kpack",
    "write_chunks",
    "write_kpack",
]

log = logging.getLogger(__name__)

MAGIC = _archive_write.MAGIC
VERSION = _archive_write.VERSION
BLOB_ALIGNMENT = _archive_write.BLOB_ALIGNMENT
MAX_KERNELS = 1_000_000  # the C reader's cap on num_kernels
MAX_ZSTD_BLOB = 4 << 30  # the C reader's cap on the zstd blob
_MAX_RATIO = 1 << 16  # no zstd frame expands more than this per compressed byte
_KEY = re.compile(r"[^#\\\x00]+#(?:0|[1-9][0-9]*)")

Scheme = Literal["none", "zstd-per-kernel"]


@dataclass(frozen=True)
class KernelInput:
    """One code object to store: ``binary_key`` is ``<path>#<N>``, ``target`` a target id;
    ``data`` is the code object, or its frame compressed already (stored as it is when the
    archive is written at its level)."""

    binary_key: str
    target: str
    data: bytes | memoryview | ZstdFrame
    metadata: Mapping[str, str] | None = None


@dataclass(frozen=True)
class KpackSummary:
    path: Path
    size: int
    kernel_count: int
    original_bytes: int
    gfx_arches: tuple[str, ...]


def _identity_problems(
    binary_key: object, target: object, metadata: Mapping[str, str] | None
) -> list[str]:
    where = f"kernel ({binary_key!r}, {target!r})"
    problems = []
    if not isinstance(binary_key, str) or not _KEY.fullmatch(binary_key):
        problems.append(f"{where}: binary_key must be '<forward-slash path>#<N>'")
    if not isinstance(target, str) or not is_target_id(target):
        problems.append(f"{where}: target is not a target id such as 'gfx942:xnack+'")
    if metadata is not None and not all(isinstance(x, str) for kv in metadata.items() for x in kv):
        problems.append(f"{where}: metadata must map str to str")
    return problems


def _kernel_problems(kernel: KernelInput) -> list[str]:
    where = f"kernel ({kernel.binary_key!r}, {kernel.target!r})"
    problems = _identity_problems(kernel.binary_key, kernel.target, kernel.metadata)
    if isinstance(kernel.data, ZstdFrame):
        declared = _frame_size(kernel.data.frame)
        if declared != kernel.data.size:
            problems.append(
                f"{where}: its zstd frame declares {declared} bytes, not {kernel.data.size}"
            )
    elif not isinstance(kernel.data, bytes | memoryview):
        problems.append(f"{where}: data must be bytes, memoryview or ZstdFrame")
    return problems


def _frame_size(frame: bytes | memoryview) -> int | None:
    try:
        size: int = zstandard.frame_content_size(frame)
    except zstandard.ZstdError:
        return None
    return size


def _refuse(problems: list[str], count: int, path: Path) -> None:
    if count > MAX_KERNELS:
        problems.append(f"{count} kernels exceed the C runtime's limit of {MAX_KERNELS}")
    if problems:
        more = [f"... and {len(problems) - 20} more"] if len(problems) > 20 else []
        raise ArchiveError(
            "refusing to write the archive", path=path, problems=problems[:20] + more
        )


def _duplicates(pairs: Sequence[tuple[str, str]]) -> list[str]:
    seen: set[tuple[str, str]] = set()
    problems = []
    for pair in pairs:
        if pair in seen:
            problems.append(f"duplicate kernel {pair}")
        seen.add(pair)
    return problems


def _check_kernels(kernels: Sequence[KernelInput], path: Path) -> None:
    problems = [p for k in kernels for p in _kernel_problems(k)]
    problems += _duplicates([(k.binary_key, k.target) for k in kernels])
    _refuse(problems, len(kernels), path)


_TocRow = tuple[str, str, int, "Mapping[str, str] | None"]  # key, target, original size, meta


def _toc(ordered: Sequence[_TocRow], group: str, family: str, scheme: str) -> dict[str, object]:
    toc: dict[str, dict[str, object]] = {}
    for ordinal, (binary_key, target, size, metadata) in enumerate(ordered):
        entry: dict[str, object] = {"type": "hsaco", "ordinal": ordinal, "original_size": size}
        if metadata is not None:
            entry["metadata"] = dict(metadata)
        toc.setdefault(binary_key, {})[target] = entry
    return {
        "format_version": VERSION,
        "group_name": group,
        "gfx_arch_family": family,
        "gfx_arches": sorted({row[1] for row in ordered}),
        "toc": toc,
        "compression_scheme": scheme,
    }


def _check_options(
    path: Path, scheme: str, level: int, group_name: str, gfx_arch_family: str
) -> None:
    if scheme not in SCHEMES:
        raise ArchiveError(f"unknown compression scheme {scheme!r}", path=path)
    if scheme == "zstd-per-kernel" and not 1 <= level <= 22:
        raise ArchiveError(f"zstd level must be 1..22, got {level}", path=path)
    for label, value in (("group_name", group_name), ("gfx_arch_family", gfx_arch_family)):
        if not isinstance(value, str) or not value:
            raise ArchiveError(f"{label} must be a non-empty string", path=path)


def write_kpack(
    path: Path,
    kernels: Sequence[KernelInput],
    *,
    group_name: str,
    gfx_arch_family: str,
    scheme: Scheme = "zstd-per-kernel",
    level: int = 3,
    jobs: int = 2,
) -> KpackSummary:
    """Write ``kernels`` to ``path`` (atomically: a temporary file next to it, then rename)."""
    path = Path(path)
    _check_options(path, scheme, level, group_name, gfx_arch_family)
    if jobs < 1:
        raise ArchiveError(f"jobs must be >= 1, got {jobs}", path=path)
    _check_kernels(kernels, path)
    ordered = sorted(kernels, key=lambda k: (k.binary_key, k.target))
    rows = [(k.binary_key, k.target, payload_size(k.data), k.metadata) for k in ordered]
    toc = _toc(rows, group_name, gfx_arch_family, scheme)
    payloads = [k.data for k in ordered]
    size = _archive_write.write_file(
        path, payloads, toc, scheme=scheme, level=level, jobs=jobs, max_blob=MAX_ZSTD_BLOB
    )
    arches = tuple(sorted({k.target for k in ordered}))
    original = sum(payload_size(d) for d in payloads)
    log.info(
        "wrote %s: %d kernels, %d -> %d bytes (%s)", path, len(ordered), original, size, scheme
    )
    return KpackSummary(path, size, len(ordered), original, arches)


@dataclass(frozen=True)
class StoredKernel:
    """A kernel as an archive will store it, known before the archive is written: its
    ``stored_size`` bytes in the blob area (its zstd frame at the archive's level, or, in
    scheme ``none``, the code object) stand for ``original_size`` bytes of code object."""

    binary_key: str
    target: str
    stored_size: int
    original_size: int
    metadata: Mapping[str, str] | None = None


@dataclass(frozen=True)
class KpackLayout:
    """An archive laid out before any of it is written (:func:`lay_out_kpack`): its size,
    which input kernel each ordinal holds, and the bytes around the blobs. :meth:`chunks`
    streams it, so it can go straight into a wheel or a file, as often as needed."""

    path: Path  # what it is called, for messages
    scheme: Scheme
    order: tuple[int, ...]  # the input index of each ordinal
    stored_sizes: tuple[int, ...]  # per ordinal
    original_bytes: int
    gfx_arches: tuple[str, ...]
    head: bytes = field(repr=False)
    toc: bytes = field(repr=False)
    size: int = 0

    def chunks(self, blobs: Iterable[bytes | memoryview]) -> Iterator[bytes | memoryview]:
        """The archive's bytes, given each ordinal's stored blob, in ordinal order."""
        yield self.head
        count = 0
        for blob in blobs:
            size = memoryview(blob).nbytes
            if count >= len(self.stored_sizes) or size != self.stored_sizes[count]:
                raise ArchiveError(
                    f"blob {count} holds {size} bytes, not the {self.stored_sizes[count:][:1]} "
                    "laid out",
                    path=self.path,
                )
            if self.scheme != "none":
                yield _archive_write.U32.pack(size)
            yield blob
            count += 1
        if count != len(self.stored_sizes):
            raise ArchiveError(
                f"{count} blobs given for {len(self.stored_sizes)} kernels", path=self.path
            )
        yield self.toc

    def summary(self, path: Path) -> KpackSummary:
        return KpackSummary(path, self.size, len(self.order), self.original_bytes, self.gfx_arches)


def lay_out_kpack(
    kernels: Sequence[StoredKernel],
    *,
    path: Path,
    group_name: str,
    gfx_arch_family: str,
    scheme: Scheme = "zstd-per-kernel",
) -> KpackLayout:
    """Lay out an archive of ``kernels`` whose stored bytes exist already (frames made by
    :class:`~kpack.archive._write.FrameWriter` at the archive's level). The bytes are those
    :func:`write_kpack` writes for the same kernels: ordinals by ``(binary_key, target)``."""
    path = Path(path)
    _check_options(path, scheme, 1, group_name, gfx_arch_family)
    problems = [p for k in kernels for p in _identity_problems(k.binary_key, k.target, k.metadata)]
    problems += _duplicates([(k.binary_key, k.target) for k in kernels])
    _refuse(problems, len(kernels), path)
    order = tuple(
        sorted(range(len(kernels)), key=lambda i: (kernels[i].binary_key, kernels[i].target))
    )
    ordered = [kernels[i] for i in order]
    rows = [(k.binary_key, k.target, k.original_size, k.metadata) for k in ordered]
    toc = _toc(rows, group_name, gfx_arch_family, scheme)
    sizes = tuple(k.stored_size for k in ordered)
    location: dict[str, object]
    if scheme == "none":
        offsets, offset = [], BLOB_ALIGNMENT
        for size in sizes:
            offsets.append({"offset": offset, "size": size})
            offset += size
        location = {"blobs": offsets}
        area = offset - BLOB_ALIGNMENT
        tail = b""
    else:
        area = _archive_write.U32.size + sum(_archive_write.U32.size + s for s in sizes)
        if area > MAX_ZSTD_BLOB:
            raise ArchiveError(
                f"the zstd blob would exceed {MAX_ZSTD_BLOB} bytes, the C runtime's limit",
                path=path,
            )
        location = {"zstd_offset": BLOB_ALIGNMENT, "zstd_size": area}
        tail = _archive_write.U32.pack(len(sizes))
    toc_bytes = msgpack.packb({**toc, **location}, use_bin_type=True)
    head = _archive_write.header(BLOB_ALIGNMENT + area) + tail
    return KpackLayout(
        path, scheme, order, sizes, sum(k.original_size for k in ordered),
        tuple(sorted({k.target for k in ordered})), head, toc_bytes,
        BLOB_ALIGNMENT + area + len(toc_bytes),
    )  # fmt: skip


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
        mm, toc, entries = load(path, Limits(MAX_KERNELS, MAX_ZSTD_BLOB))
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
