"""The format-neutral kernel model of a host-binary transform, for ELF and PE alike.

What a fat binary's headers say (:class:`FatBinaryInfo`), the code objects its wrappers reach
(:class:`ExtractedKernel`, streamed by :func:`stream_kernels`), the checks made before any
transform (:func:`check_transformable`), the indexing of a device-code section
(:func:`index_section` into an :class:`IndexedSection`, :func:`kernels_of_wrappers`), and
:class:`PlannedBinary`: what every verified plan offers, whichever format it rewrites.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import field
from pathlib import Path
from typing import BinaryIO, Protocol

from kpack import hipfmt
from kpack.bundle import (
    BundleSink,
    CodeObjectRef,
    IndexedBundle,
    index_bundles,
    stream_code_objects,
)
from kpack.common.frozen import frozen
from kpack.errors import BundleError, TransformError
from kpack.hipfmt import FATBIN, HIPK, MARKER, SEGMENT
from kpack.transform._scan import RelocationKind

__all__ = [
    "AlreadyTransformed",
    "ExtractedKernel",
    "FatBinaryInfo",
    "IndexedSection",
    "KernelSink",
    "PlannedBinary",
    "check_transformable",
    "encode_marker",
    "index_section",
    "kernels_of_wrappers",
    "stream_kernels",
]

log = logging.getLogger(__name__)


class AlreadyTransformed(TransformError):
    """The file already has HIPK wrappers or a ``.rocm_kpack_ref`` marker; pass it through."""


@frozen(kw_only=True)
class FatBinaryInfo:
    """What a host file's headers and wrapper array say about its device code."""

    path: Path
    hip_fatbin_addr: int
    hip_fatbin_offset: int
    hip_fatbin_size: int
    wrapper_count: int  # 0 also when .hipFatBinSegment is missing (not transformable)
    already_transformed: bool  # HIPK wrappers or an existing .rocm_kpack_ref
    relocation_kind: RelocationKind  # how wrapper pointers are relocated ('none': ET_EXEC)


@frozen(kw_only=True)
class ExtractedKernel:
    """One device code object, found through wrapper ``index`` (the ``co_index``).

    ``data`` is a zero-copy view of the mapped input for a plain bundle and ``None`` for a
    code object inside a compressed bundle: nothing decoded is held. Read the bytes with
    :func:`stream_kernels` (each compressed bundle decoded once, as a stream) or, for one
    kernel, :meth:`read`.
    """

    index: int
    target: str  # e.g. 'gfx90a:xnack+'
    triple: str  # e.g. 'hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+'
    size: int
    data: memoryview | None
    bundle: IndexedBundle = field(compare=False, repr=False)
    offset: int  # within the decoded bundle
    section: memoryview = field(compare=False, repr=False)
    name: str = field(compare=False, repr=False)

    @property
    def location(self) -> tuple[int, int, str]:
        """Equal for two wrappers that point at the same bundle."""
        return (self.bundle.offset, self.offset, self.target)

    def read(self) -> bytes:
        """This kernel's bytes (a compressed bundle is decoded for it)."""
        if self.data is not None:
            return bytes(self.data)
        out = bytearray()
        stream_kernels([self], lambda k: out.extend)
        return bytes(out)


KernelSink = Callable[[ExtractedKernel], Callable[[bytes | memoryview], object] | None]


def stream_kernels(kernels: Sequence[ExtractedKernel], sink: KernelSink) -> None:
    """Pass each kernel's bytes to ``sink(kernel)`` in chunks of at most 1 MiB.

    Kernels at the same :attr:`~ExtractedKernel.location` are passed once (the first).
    Each compressed bundle is decoded once, as a stream: memory stays at a chunk, never a
    decoded bundle.
    """
    by_bundle: dict[int, dict[tuple[int, str], ExtractedKernel]] = {}
    for kernel in kernels:
        group = by_bundle.setdefault(kernel.bundle.offset, {})
        group.setdefault((kernel.offset, kernel.target), kernel)
    for group in by_bundle.values():
        first = next(iter(group.values()))

        def pick(
            ref: CodeObjectRef, group: dict[tuple[int, str], ExtractedKernel] = group
        ) -> Callable[[bytes | memoryview], object] | None:
            kernel = group.get((ref.offset, ref.target))
            return sink(kernel) if kernel is not None else None

        stream_code_objects(first.section, first.bundle, name=first.name, sink=pick)


def encode_marker(kernel_name: str, search_paths: Sequence[str]) -> bytes:
    """The ``.rocm_kpack_ref`` content: ``{"kpack_search_paths": [...], "kernel_name": ...}``."""
    return hipfmt.encode_marker(kernel_name, search_paths, error=TransformError)


class _HasMagic(Protocol):
    @property
    def magic(self) -> int: ...


def check_transformable(
    path: Path,
    wrappers: Sequence[_HasMagic],
    *,
    has_marker: bool,
    has_segment: bool,
    names: tuple[str, str, str] = (FATBIN, SEGMENT, MARKER),
) -> None:
    """The checks before a transform, for ELF and PE alike (``names``: the device-code,
    wrapper and marker section names): already transformed (a marker, or every wrapper
    HIPK) is :class:`AlreadyTransformed`; some HIPK wrappers, no wrapper section or an
    empty one are :class:`TransformError`."""
    fatbin, segment, marker = names
    hipk = sum(w.magic == HIPK for w in wrappers)
    if has_marker or (hipk and hipk == len(wrappers)):
        raise AlreadyTransformed(f"already transformed ({marker} or HIPK wrappers)", path=path)
    if hipk:
        raise TransformError(f"{hipk} of {len(wrappers)} wrappers are HIPK", path=path)
    if not has_segment:
        raise TransformError(
            f"{fatbin} without {segment} cannot be transformed; keep the file unchanged",
            path=path,
        )
    if not wrappers:
        raise TransformError(f"{segment} is empty; nothing points at {fatbin}", path=path)


@frozen
class IndexedSection:
    """The device-code section ``section_name`` of ``path``, mapped (``view``), and its
    bundles by section offset; ``name`` names the section in the bundles' messages."""

    path: Path
    section_name: str
    view: memoryview = field(repr=False)
    name: str
    bundles: dict[int, IndexedBundle]


def kernels_of_wrappers(
    indexed: IndexedSection, targets: Sequence[tuple[int, int, str]]
) -> list[ExtractedKernel]:
    """The code objects each wrapper reaches: ``targets`` are (wrapper index, section
    offset its pointer lands on, how to name it); every pointer must land on a bundle
    start, and no bundle may hold two code objects for one target."""
    path, bundles = indexed.path, indexed.bundles
    kernels: list[ExtractedKernel] = []
    for index, offset, where in targets:
        bundle = bundles.get(offset)
        if bundle is None:
            raise TransformError(
                f"{where} (section offset {offset:#x}), which is not the start of a bundle",
                path=path,
            )
        seen: set[str] = set()
        for co in bundle.code_objects:
            if co.target in seen:
                raise TransformError(
                    f"{where}: its bundle holds two code objects for {co.target}", path=path
                )
            seen.add(co.target)
            kernels.append(
                ExtractedKernel(
                    index=index,
                    target=co.target,
                    triple=co.triple,
                    size=co.size,
                    data=co.data,
                    bundle=bundle,
                    offset=co.offset,
                    section=indexed.view,
                    name=indexed.name,
                )
            )
    unreferenced = sorted(set(bundles) - {offset for _, offset, _ in targets})
    if unreferenced:
        log.warning(
            "%s: %d bundle(s) in %s that no wrapper references, at section offsets %s",
            path,
            len(unreferenced),
            indexed.section_name,
            ", ".join(f"{o:#x}" for o in unreferenced),
        )
    return kernels


def index_section(
    path: Path, offset: int, size: int, section_name: str, decoded: BundleSink | None = None
) -> IndexedSection:
    """Every bundle of the device-code section at ``offset``/``size`` of ``path`` by
    section offset, read through an ``mmap`` and checked in full; compressed bundles are
    decoded as a stream and not kept (their code objects go to ``decoded`` on the way,
    see :func:`~kpack.bundle.index_bundles`)."""
    if not size:
        return IndexedSection(path, section_name, memoryview(b""), "", {})
    try:
        with open(path, "rb") as f:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:
        raise TransformError(f"cannot map the file: {exc}", path=path) from exc
    if len(mapped) < offset + size:
        raise TransformError(f"{section_name} extends past the end of the file", path=path)
    if hasattr(mmap, "MADV_SEQUENTIAL"):
        mapped.madvise(mmap.MADV_SEQUENTIAL)
    view = memoryview(mapped)[offset : offset + size]
    name = f"{os.fspath(path)}:{section_name}"
    try:
        bundles = {b.offset: b for b in index_bundles(view, name=name, decoded=decoded)}
    except BundleError as exc:
        raise TransformError(
            f"{section_name} is malformed: {exc.message}", path=path, problems=exc.problems
        ) from exc
    if hasattr(mmap, "MADV_DONTNEED"):  # the walk touched every page; let them go from RSS
        with contextlib.suppress(OSError):
            mapped.madvise(mmap.MADV_DONTNEED)
    return IndexedSection(path, section_name, view, name, bundles)


class PlannedBinary(Protocol):
    """A verified, not yet written transform of one host binary (ELF or PE): what it moves
    out and how to stream the result."""

    @property
    def source(self) -> Path: ...
    @property
    def kernel_name(self) -> str: ...
    @property
    def search_paths(self) -> tuple[str, ...]: ...
    @property
    def removed_bytes(self) -> int: ...
    @property
    def kernels(self) -> tuple[ExtractedKernel, ...]: ...
    @property
    def notes(self) -> tuple[str, ...]: ...
    @property
    def size(self) -> int: ...
    def iter_chunks(self) -> Iterator[bytes]: ...
    def open(self) -> BinaryIO: ...
