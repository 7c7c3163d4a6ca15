"""Pack kernels into a ``.kpack`` archive: ordinals, the TOC, and the two ways to write it.

Private to :mod:`kpack.archive`. Both ways sort the kernels by ``(binary_key, target)``
before they assign ordinals, so an archive's bytes depend only on its set of kernels.

Each code object is stored once per archive: kernels with the same bytes (several
wrappers of one binary pointing at one bundle, the same code object in two binaries)
share one ordinal, the first such kernel's in sorted order, and one frame. Every reader
loads such archives, as each maps a TOC entry to its frame by ordinal alone and assumes
nothing else of ordinals:

- rocm-kpack's C++ runtime (rocm-systems ``shared/kpack/runtime``): ``parse_toc`` keeps
  each entry's ``ordinal``; ``build_zstd_frame_index`` walks ``num_kernels`` size-prefixed
  frames into a list; ``decompress_zstd`` / ``decompress_noop`` check only
  ``ordinal < frames`` and decode into a buffer refilled on every call (nothing is cached
  by ordinal, ``num_kernels`` is never compared with the number of entries);
- its Python reader (``rocm_kpack/kpack.py`` + ``compression.py``): ``get_kernel`` looks the
  entry up and decompresses ``frame_index[ordinal]``, with only a range check;
- HRX's reader rules (tests/kpack/hrx_reader.py): frames walked by their size prefixes, each
  entry's ``0 <= ordinal < frames`` and its frame's content size equal to its
  ``original_size``;
- ours (:mod:`kpack.archive._read`): entries sharing an ordinal must agree on
  ``original_size``.

tests/kpack/archive/test_shared_ordinals.py loads a shared-ordinal archive through each but
the C++ runtime; tests/kpack/archive/test_upstream_runtime.py (opt-in: ``ROCM_KPACK_SOURCE``)
compiles that runtime (checked in ROCm/rocm-kpack's ``runtime/`` at e3483286) and loads one
through ``kpack_get_kernel`` and the loader's ``kpack_load_code_object``. The splitters say
which kernels are one blob by ``kpack.split._archives.content_keys`` (spool range, else
digest).
:func:`write_kpack` compresses and writes the archive in one go. :func:`lay_out_kpack`
takes kernels whose stored bytes exist already and computes everything but the blobs up
front, as a :class:`KpackLayout` that streams the same bytes wherever they are wanted.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import field
from pathlib import Path

import msgpack

from kpack.archive import _write  # its limits and writer are read at call time (tests patch them)
from kpack.archive._kernels import (
    KernelInput,
    KeyRule,
    StoredKernel,
    check_kernels,
    check_options,
    check_stored,
)
from kpack.archive._toc import Scheme
from kpack.archive._write import (
    BLOB_ALIGNMENT,
    DEFAULT_LEVEL,
    U32,
    VERSION,
    Payload,
    ZstdFrame,
    header,
    payload_size,
    too_large,
)
from kpack.common.frozen import frozen
from kpack.errors import ArchiveError

log = logging.getLogger("kpack.archive")  # the package's logger, as callers configure it


@frozen
class KpackSummary:
    path: Path
    size: int
    kernel_count: int
    original_bytes: int
    gfx_arches: tuple[str, ...]


_TocRow = tuple[str, str, int, "Mapping[str, str] | None"]  # key, target, original size, meta


def _share(keys: Sequence[Hashable | None]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Ordinals for rows with content ``keys`` (``None``: never shared): each row's
    ordinal, and the row each ordinal's blob comes from (its first row)."""
    ordinals: list[int] = []
    firsts: list[int] = []
    seen: dict[Hashable, int] = {}
    for row, key in enumerate(keys):
        ordinal = seen.get(key) if key is not None else None
        if ordinal is None:
            ordinal = len(firsts)
            firsts.append(row)
            if key is not None:
                seen[key] = ordinal
        ordinals.append(ordinal)
    return tuple(ordinals), tuple(firsts)


def _content_key(data: Payload) -> Hashable:
    """What identifies a payload's bytes: a frame by its level and bytes, a code object by
    its bytes (a digest, with the size, so equal keys mean equal bytes in practice)."""
    if isinstance(data, ZstdFrame):
        return ("frame", data.level, data.size, hashlib.sha256(data.frame).digest())
    return ("code", memoryview(data).nbytes, hashlib.sha256(data).digest())


def _arches(rows: Sequence[_TocRow], declared: Sequence[str] | None) -> tuple[str, ...]:
    """The archive's ``gfx_arches``: those declared, else its kernels' targets; sorted."""
    return tuple(sorted({row[1] for row in rows} if declared is None else set(declared)))


def _toc(
    ordered: Sequence[_TocRow],
    ordinals: Sequence[int],
    group: str,
    family: str,
    scheme: str,
    arches: Sequence[str] | None = None,
) -> dict[str, object]:
    toc: dict[str, dict[str, object]] = {}
    for ordinal, (binary_key, target, size, metadata) in zip(ordinals, ordered, strict=True):
        entry: dict[str, object] = {"type": "hsaco", "ordinal": ordinal, "original_size": size}
        if metadata is not None:
            entry["metadata"] = dict(metadata)
        toc.setdefault(binary_key, {})[target] = entry
    return {
        "format_version": VERSION,
        "group_name": group,
        "gfx_arch_family": family,
        "gfx_arches": list(_arches(ordered, arches)),
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
    level: int = DEFAULT_LEVEL,
    jobs: int = 2,
    key_rule: KeyRule = "kernel",
    gfx_arches: Sequence[str] | None = None,
    max_size: int | None = None,
) -> KpackSummary:
    """Write ``kernels`` to ``path`` (atomically: a temporary file next to it, then rename).

    Keys follow ``key_rule`` (``"kernel"``: ``<path>#<N>``; ``"name"``: any safe TOC key).
    ``gfx_arches`` declares the archive's targets (every kernel's must be one of them); by
    default they are the kernels' targets. An archive larger than ``max_size`` (default
    :data:`~kpack.archive.MAX_ARCHIVE_BYTES`, what every reader loads) is refused."""
    path = Path(path)
    check_options(path, scheme, level, group_name, gfx_arch_family)
    if jobs < 1:
        raise ArchiveError(f"jobs must be >= 1, got {jobs}", path=path)
    check_kernels(kernels, path, key_rule=key_rule, gfx_arches=gfx_arches)
    ordered = sorted(kernels, key=lambda k: (k.binary_key, k.target))
    rows = [(k.binary_key, k.target, payload_size(k.data), k.metadata) for k in ordered]
    ordinals, firsts = _share([_content_key(k.data) for k in ordered])
    toc = _toc(rows, ordinals, group_name, gfx_arch_family, scheme, gfx_arches)
    payloads = [ordered[i].data for i in firsts]
    size = _write.write_file(
        path,
        payloads,
        toc,
        scheme=scheme,
        level=level,
        jobs=jobs,
        max_blob=_write.MAX_ZSTD_BLOB,
        max_size=_write.MAX_ARCHIVE_BYTES if max_size is None else max_size,
    )
    arches = _arches(rows, gfx_arches)
    original = sum(payload_size(d) for d in payloads)
    log.info(
        "wrote %s: %d kernels (%d stored), %d -> %d bytes (%s)",
        path,
        len(ordered),
        len(payloads),
        original,
        size,
        scheme,
    )
    return KpackSummary(path, size, len(ordered), original, arches)


@frozen(kw_only=True)
class KpackLayout:
    """An archive laid out before any of it is written (:func:`lay_out_kpack`): its size,
    which input kernel each ordinal holds, and the bytes around the blobs. :meth:`chunks`
    streams it, so it can go straight into a wheel or a file, as often as needed."""

    path: Path  # what it is called, for messages
    scheme: Scheme
    order: tuple[int, ...]  # the input index of each ordinal (its first kernel)
    kernel_count: int  # TOC entries (kernels sharing a stored blob count each)
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
                yield U32.pack(size)
            yield blob
            count += 1
        if count != len(self.stored_sizes):
            raise ArchiveError(
                f"{count} blobs given for {len(self.stored_sizes)} kernels", path=self.path
            )
        yield self.toc

    def summary(self, path: Path) -> KpackSummary:
        return KpackSummary(
            path, self.size, self.kernel_count, self.original_bytes, self.gfx_arches
        )


def _blob_area(
    scheme: Scheme, sizes: tuple[int, ...], path: Path
) -> tuple[dict[str, object], int, bytes]:
    """Where the blobs lie (the TOC's location fields), the blob area's size, and the bytes
    that open it (``num_kernels`` in scheme ``zstd-per-kernel``)."""
    if scheme == "none":
        offsets, offset = [], BLOB_ALIGNMENT
        for size in sizes:
            offsets.append({"offset": offset, "size": size})
            offset += size
        return {"blobs": offsets}, offset - BLOB_ALIGNMENT, b""
    area = U32.size + sum(U32.size + s for s in sizes)
    limit = _write.MAX_ZSTD_BLOB
    if area > limit:
        raise ArchiveError(
            f"the zstd blob would exceed {limit} bytes, the C runtime's limit", path=path
        )
    location: dict[str, object] = {"zstd_offset": BLOB_ALIGNMENT, "zstd_size": area}
    return location, area, U32.pack(len(sizes))


def lay_out_kpack(
    kernels: Sequence[StoredKernel],
    *,
    path: Path,
    group_name: str,
    gfx_arch_family: str,
    scheme: Scheme = "zstd-per-kernel",
    max_size: int | None = None,
) -> KpackLayout:
    """Lay out an archive of ``kernels`` whose stored bytes exist already (frames made by
    :class:`~kpack.archive._write.FrameWriter` at the archive's level). The bytes are those
    :func:`write_kpack` writes for the same kernels: ordinals by ``(binary_key, target)``.
    An archive larger than ``max_size`` (default :data:`~kpack.archive.MAX_ARCHIVE_BYTES`)
    is refused."""
    path = Path(path)
    check_options(path, scheme, 1, group_name, gfx_arch_family)
    check_stored(kernels, path)
    by_key = tuple(
        sorted(range(len(kernels)), key=lambda i: (kernels[i].binary_key, kernels[i].target))
    )
    ordered = [kernels[i] for i in by_key]
    rows = [(k.binary_key, k.target, k.original_size, k.metadata) for k in ordered]
    ordinals, firsts = _share([k.content for k in ordered])
    for row, ordinal in enumerate(ordinals):
        first = ordered[firsts[ordinal]]
        k = ordered[row]
        if (k.stored_size, k.original_size) != (first.stored_size, first.original_size):
            raise ArchiveError(
                f"kernels ({first.binary_key!r}, {first.target!r}) and ({k.binary_key!r}, "
                f"{k.target!r}) have the same content but different sizes",
                path=path,
            )
    order = tuple(by_key[i] for i in firsts)
    toc = _toc(rows, ordinals, group_name, gfx_arch_family, scheme)
    sizes = tuple(ordered[i].stored_size for i in firsts)
    location, area, tail = _blob_area(scheme, sizes, path)
    toc_bytes = msgpack.packb({**toc, **location}, use_bin_type=True)
    size = BLOB_ALIGNMENT + area + len(toc_bytes)
    limit = _write.MAX_ARCHIVE_BYTES if max_size is None else max_size
    if size > limit:
        raise too_large(size, limit, path)
    return KpackLayout(
        path=path,
        scheme=scheme,
        order=order,
        kernel_count=len(ordered),
        stored_sizes=sizes,
        original_bytes=sum(k.original_size for k in ordered),
        gfx_arches=tuple(sorted({k.target for k in ordered})),
        head=header(BLOB_ALIGNMENT + area) + tail,
        toc=toc_bytes,
        size=size,
    )
