"""``.kpack`` archives, format version 1 (kpack.md §1): a deterministic writer and a reader.

Layout: ``KPAK``, u32 version 1, u64 ``toc_offset``, zero padding to 64, the blob area, then
one MessagePack map (the TOC) running to the end of the file. The blob area holds the kernels
back to back (scheme ``none``) or ``u32 num_kernels`` followed by ``(u32 size, zstd frame)``
per ordinal (``zstd-per-kernel``).

:func:`write_kpack` sorts kernels by ``(binary_key, target)`` before assigning ordinals, so
the bytes depend only on the set of kernels; it refuses archives the C runtime cannot load.
:class:`KpackArchive` maps the file and decompresses one kernel at a time. Every problem is
an :class:`~kpack.errors.ArchiveError` naming the file and the field.
"""

from __future__ import annotations

import logging
import mmap
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Literal

import zstandard

from kpack import _archive_write
from kpack._archive_read import Limits, load
from kpack._archive_toc import SCHEMES, ArchiveEntry, Toc
from kpack._archive_write import ZstdFrame, payload_size
from kpack.errors import ArchiveError

__all__ = [
    "BLOB_ALIGNMENT",
    "MAGIC",
    "MAX_KERNELS",
    "MAX_ZSTD_BLOB",
    "SCHEMES",
    "ArchiveEntry",
    "KernelInput",
    "KpackArchive",
    "KpackSummary",
    "Scheme",
    "ZstdFrame",
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
_TARGET = re.compile(r"gfx[0-9a-z]+(?:-[0-9a-z]+)*(?::[a-z]+[+-])*")

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


def _kernel_problems(kernel: KernelInput) -> list[str]:
    where = f"kernel ({kernel.binary_key!r}, {kernel.target!r})"
    problems = []
    if not isinstance(kernel.binary_key, str) or not _KEY.fullmatch(kernel.binary_key):
        problems.append(f"{where}: binary_key must be '<forward-slash path>#<N>'")
    if not isinstance(kernel.target, str) or not _TARGET.fullmatch(kernel.target):
        problems.append(f"{where}: target is not a target id such as 'gfx942:xnack+'")
    if isinstance(kernel.data, ZstdFrame):
        declared = _frame_size(kernel.data.frame)
        if declared != kernel.data.size:
            problems.append(
                f"{where}: its zstd frame declares {declared} bytes, not {kernel.data.size}"
            )
    elif not isinstance(kernel.data, bytes | memoryview):
        problems.append(f"{where}: data must be bytes, memoryview or ZstdFrame")
    meta = kernel.metadata
    if meta is not None and not all(isinstance(x, str) for kv in meta.items() for x in kv):
        problems.append(f"{where}: metadata must map str to str")
    return problems


def _frame_size(frame: bytes | memoryview) -> int | None:
    try:
        size: int = zstandard.frame_content_size(frame)
    except zstandard.ZstdError:
        return None
    return size


def _check_kernels(kernels: Sequence[KernelInput], path: Path) -> None:
    problems: list[str] = []
    seen: set[tuple[str, str]] = set()
    for kernel in kernels:
        problems += _kernel_problems(kernel)
        pair = (kernel.binary_key, kernel.target)
        if pair in seen:
            problems.append(f"duplicate kernel {pair}")
        seen.add(pair)
    if len(kernels) > MAX_KERNELS:
        problems.append(f"{len(kernels)} kernels exceed the C runtime's limit of {MAX_KERNELS}")
    if problems:
        more = [f"... and {len(problems) - 20} more"] if len(problems) > 20 else []
        raise ArchiveError(
            "refusing to write the archive", path=path, problems=problems[:20] + more
        )


def _toc(ordered: Sequence[KernelInput], group: str, family: str, scheme: str) -> dict[str, object]:
    toc: dict[str, dict[str, object]] = {}
    for ordinal, kernel in enumerate(ordered):
        entry: dict[str, object] = {
            "type": "hsaco",
            "ordinal": ordinal,
            "original_size": payload_size(kernel.data),
        }
        if kernel.metadata is not None:
            entry["metadata"] = dict(kernel.metadata)
        toc.setdefault(kernel.binary_key, {})[kernel.target] = entry
    return {
        "format_version": VERSION,
        "group_name": group,
        "gfx_arch_family": family,
        "gfx_arches": sorted({k.target for k in ordered}),
        "toc": toc,
        "compression_scheme": scheme,
    }


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
    if scheme not in SCHEMES:
        raise ArchiveError(f"unknown compression scheme {scheme!r}", path=path)
    if scheme == "zstd-per-kernel" and not 1 <= level <= 22:
        raise ArchiveError(f"zstd level must be 1..22, got {level}", path=path)
    if jobs < 1:
        raise ArchiveError(f"jobs must be >= 1, got {jobs}", path=path)
    for label, value in (("group_name", group_name), ("gfx_arch_family", gfx_arch_family)):
        if not isinstance(value, str) or not value:
            raise ArchiveError(f"{label} must be a non-empty string", path=path)
    _check_kernels(kernels, path)
    ordered = sorted(kernels, key=lambda k: (k.binary_key, k.target))
    toc = _toc(ordered, group_name, gfx_arch_family, scheme)
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
