"""Split a HIP fat binary: extract its device code and redirect it to ``.kpack`` archives.

Implements kpack.md §3 for ELF64 x86-64 host binaries (shared libraries, PIE and non-PIE
executables; pointers relocated through RELA, RELR or not at all):

- :func:`inspect_fat_binary` reads headers and the wrapper array into a
  :class:`FatBinaryInfo` (``None`` for files without ``.hip_fatbin``);
- :func:`extract_kernels` finds each wrapper's bundle through the wrapper's original
  pointer and returns its code objects (zero-copy views of an ``mmap`` for plain bundles);
- :func:`plan_transform` plans the rewritten file as a :class:`TransformPlan` (marker
  section and PT_LOAD, wrappers redirected, device bytes removed, section headers
  reordered) and verifies the planned bytes; nothing is written;
- :func:`transform_binary` does both and writes the result as a new file.

An already transformed file raises :class:`AlreadyTransformed`; a file that cannot be
transformed safely raises :class:`TransformError` (malformed ELF: ``ElfError``). A broken
file is never written.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kpack import hipfmt
from kpack.bundle import (
    BundleSink,
    CodeObjectRef,
    IndexedBundle,
    index_bundles,
    stream_code_objects,
)
from kpack.elf._edit import ElfEdit
from kpack.elf.reader import ElfLayout, Reader, open_reader, read_ident
from kpack.elf.relocations import read_relocations, read_relr
from kpack.elf.structs import ELF_MAGIC, ET_REL
from kpack.errors import BundleError, ElfError, TransformError
from kpack.hipfmt import FATBIN, HIPK, MARKER, MAX_MARKER_SIZE, SEGMENT
from kpack.transform._layout import lay_out
from kpack.transform._scan import (
    FatLayout,
    Pointer,
    RelocationKind,
    elf_type,
    is_elf64le,
    read_fat_layout,
    relocation_kind,
    resolve_pointers,
)
from kpack.transform._verify import verify_transform

if TYPE_CHECKING:
    from kpack.pe import PeTransformPlan

__all__ = [
    "MAX_MARKER_SIZE",
    "AlreadyTransformed",
    "ExtractedKernel",
    "FatBinaryInfo",
    "TransformPlan",
    "check_transformable",
    "encode_marker",
    "extract_kernels",
    "fat_binary_info",
    "index_section",
    "inspect_fat_binary",
    "kernels_of_wrappers",
    "plan_host_transform",
    "plan_transform",
    "stream_kernels",
    "transform_binary",
]

log = logging.getLogger(__name__)


class AlreadyTransformed(TransformError):
    """The file already has HIPK wrappers or a ``.rocm_kpack_ref`` marker; pass it through."""


@dataclass(frozen=True)
class FatBinaryInfo:
    """What a host file's headers and wrapper array say about its device code."""

    path: Path
    hip_fatbin_addr: int
    hip_fatbin_offset: int
    hip_fatbin_size: int
    wrapper_count: int  # 0 also when .hipFatBinSegment is missing (not transformable)
    already_transformed: bool  # HIPK wrappers or an existing .rocm_kpack_ref
    relocation_kind: RelocationKind  # how wrapper pointers are relocated ('none': ET_EXEC)


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class TransformPlan:
    """A verified, not yet written transform of ``source``."""

    source: Path
    edit: ElfEdit
    kernel_name: str
    search_paths: tuple[str, ...]
    removed_bytes: int
    kernels: tuple[ExtractedKernel, ...]
    notes: tuple[str, ...]


def inspect_fat_binary(path: Path) -> FatBinaryInfo | None:
    """Describe ``path``'s fat binary; ``None`` if it is not an ELF64 LE file with one.

    Relocatable objects (``.o``) give ``None`` too: their device code is for the link.
    Reads the headers, the section names, the wrapper array and the RELR table (if any);
    a symlink is not followed (:class:`ElfError`). A ``.hip_fatbin`` without
    ``.hipFatBinSegment`` gives ``wrapper_count`` 0; callers keep such a file unchanged
    (:func:`transform_binary` refuses it). A fat binary for another machine than x86-64
    raises :class:`TransformError`.
    """
    path = Path(path)
    if _is_pe(path):
        return _inspect_pe(path)
    with open_reader(path) as reader:
        return fat_binary_info(reader, path)


def fat_binary_info(
    reader: Reader, path: Path, layout: ElfLayout | None = None
) -> FatBinaryInfo | None:
    """:func:`inspect_fat_binary` of an open ELF file (given its ``layout`` if read)."""
    if not is_elf64le(reader):
        log.debug("%s: not an ELF64 little-endian file", path)
        return None
    if elf_type(reader) == ET_REL:
        log.debug("%s: relocatable object; its device code stays for the link", path)
        return None
    fat = read_fat_layout(reader, path, layout)
    if fat is None:
        return None
    relr = read_relr(reader, fat.layout)
    shdr = fat.fatbin_shdr
    return FatBinaryInfo(
        path,
        shdr.sh_addr,
        shdr.sh_offset,
        shdr.sh_size,
        len(fat.wrappers),
        fat.already_transformed,
        relocation_kind(fat, relr),
    )


def _is_pe(path: Path) -> bool:
    from kpack.pe._image import is_pe_file  # PE support loads on use

    return is_pe_file(path)


def _inspect_pe(path: Path) -> FatBinaryInfo | None:
    """A PE image's fat binary, described like an ELF one (addresses are VAs)."""
    from kpack.pe import read_pe_fat  # PE support loads on use

    fat = read_pe_fat(path)
    if fat is None:
        return None
    hipk = sum(w.magic == HIPK for w in fat.wrappers)
    return FatBinaryInfo(
        path,
        fat.image.image_base + fat.fatbin.rva,
        fat.fatbin.raw_offset,
        fat.fatbin.file_bytes(),
        len(fat.wrappers),
        fat.marker is not None or bool(hipk),
        "base",
    )


def extract_kernels(path: Path) -> list[ExtractedKernel]:
    """Every code object of ``path``, keyed by the wrapper that points at its bundle.

    Code objects of plain bundles are views of a read-only ``mmap`` of ``path`` (it
    stays mapped while a view is alive); nothing copies the section.
    """
    path = Path(path)
    if _is_pe(path):
        from kpack.pe import extract_pe_kernels

        return extract_pe_kernels(path)
    with open_reader(path) as reader:
        fat, pointers = _scan(reader, path)
    return _extract(fat, pointers)


def encode_marker(kernel_name: str, search_paths: Sequence[str]) -> bytes:
    """The ``.rocm_kpack_ref`` content: ``{"kpack_search_paths": [...], "kernel_name": ...}``."""
    return hipfmt.encode_marker(kernel_name, search_paths, error=TransformError)


def plan_transform(
    path: Path, *, kernel_name: str, search_paths: Sequence[str], decoded: BundleSink | None = None
) -> TransformPlan:
    """Plan and verify the transform of ``path`` (kpack.md §3 steps 1-8); write nothing.
    The code objects of compressed bundles go to ``decoded`` as the check decodes them."""
    path = Path(path)
    if isinstance(search_paths, str):
        raise TransformError("search_paths must be a sequence of strings, not one string")
    paths = tuple(search_paths)
    marker = encode_marker(kernel_name, paths)
    expected: dict[str, Any] = {"kpack_search_paths": list(paths), "kernel_name": kernel_name}
    with open_reader(path) as reader:
        fat, pointers = _scan(reader, path)
        kernels = _extract(fat, pointers, decoded)
        try:
            laid = lay_out(reader, fat, pointers, marker)
        except ElfError as exc:
            if exc.path is not None:
                raise
            raise TransformError(
                f"cannot lay out the transform: {exc.message}", path=path
            ) from None
    verify_transform(fat, laid, pointers, marker, expected)
    return TransformPlan(
        path,
        laid.edit,
        kernel_name,
        paths,
        laid.cut.size if laid.cut is not None else 0,
        tuple(kernels),
        laid.notes,
    )


def plan_host_transform(
    path: Path,
    *,
    kernel_name: str,
    search_paths: Sequence[str],
    decoded: BundleSink | None = None,
) -> TransformPlan | PeTransformPlan:
    """:func:`plan_transform` for an ELF file, the PE transform for a Windows image."""
    if _is_pe(Path(path)):
        from kpack.pe import plan_pe_transform

        return plan_pe_transform(
            Path(path), kernel_name=kernel_name, search_paths=search_paths, decoded=decoded
        )
    return plan_transform(
        Path(path), kernel_name=kernel_name, search_paths=search_paths, decoded=decoded
    )


def transform_binary(
    src: Path,
    dest: Path,
    *,
    kernel_name: str,
    search_paths: Sequence[str],
    decoded: BundleSink | None = None,
) -> TransformPlan | PeTransformPlan:
    """Plan, verify and write the transform of ``src`` to ``dest`` as a new file; the code
    objects of compressed bundles go to ``decoded`` as the check decodes them.

    ``dest`` is written to a temporary sibling and renamed into place, so a hard link
    at ``dest`` (or ``dest`` being ``src`` itself) is replaced, never written through.
    """
    if _is_pe(Path(src)):
        from kpack.pe import transform_pe  # a PE image: its own layout, same contract

        return transform_pe(
            src, dest, kernel_name=kernel_name, search_paths=search_paths, decoded=decoded
        )
    plan = plan_transform(
        Path(src), kernel_name=kernel_name, search_paths=search_paths, decoded=decoded
    )
    plan.edit.write_to(Path(dest), replace_source=True)
    for note in plan.notes:
        log.info("%s: %s", dest, note)
    return plan


def _scan(reader: Reader, path: Path) -> tuple[FatLayout, tuple[Pointer, ...]]:
    """The fat layout and wrapper pointers of a file that can be transformed."""
    if not is_elf64le(reader):
        if read_ident(reader)[:4] != ELF_MAGIC:
            raise TransformError("not an ELF file", path=path)
        raise TransformError("not a 64-bit little-endian ELF file; unsupported", path=path)
    fat = read_fat_layout(reader, path)
    if fat is None:
        raise TransformError(f"no {FATBIN} section; nothing to transform", path=path)
    check_transformable(
        path, fat.wrappers, has_marker=fat.has_marker, has_segment=fat.segment is not None
    )
    relocs = read_relocations(reader, fat.layout)
    return fat, resolve_pointers(reader, fat, relocs)


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


def _extract(
    fat: FatLayout, pointers: Sequence[Pointer], decoded: BundleSink | None = None
) -> list[ExtractedKernel]:
    """§3 step 1: each wrapper's bundle, from its original pointer."""
    shdr = fat.fatbin_shdr
    section, name, bundles = _bundles(fat, decoded)
    targets: list[tuple[int, int, str]] = []
    for pointer in pointers:
        where = f"{SEGMENT} wrapper {pointer.index} points at {pointer.value:#x}"
        if not fat.fatbin_contains(pointer.value):
            raise TransformError(f"{where}, outside {FATBIN}", path=fat.path)
        targets.append((pointer.index, pointer.value - shdr.sh_addr, where))
    return kernels_of_wrappers(fat.path, FATBIN, section, name, bundles, targets)


def kernels_of_wrappers(
    path: Path,
    section_name: str,
    section: memoryview,
    name: str,
    bundles: dict[int, IndexedBundle],
    targets: Sequence[tuple[int, int, str]],
) -> list[ExtractedKernel]:
    """The code objects each wrapper reaches: ``targets`` are (wrapper index, section
    offset its pointer lands on, how to name it); every pointer must land on a bundle
    start, and no bundle may hold two code objects for one target."""
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
                    index, co.target, co.triple, co.size, co.data, bundle, co.offset, section, name
                )
            )
    unreferenced = sorted(set(bundles) - {offset for _, offset, _ in targets})
    if unreferenced:
        log.warning(
            "%s: %d bundle(s) in %s that no wrapper references, at section offsets %s",
            path,
            len(unreferenced),
            section_name,
            ", ".join(f"{o:#x}" for o in unreferenced),
        )
    return kernels


def _bundles(
    fat: FatLayout, decoded: BundleSink | None = None
) -> tuple[memoryview, str, dict[int, IndexedBundle]]:
    shdr = fat.fatbin_shdr
    return index_section(fat.path, shdr.sh_offset, shdr.sh_size, FATBIN, decoded)


def index_section(
    path: Path, offset: int, size: int, section_name: str, decoded: BundleSink | None = None
) -> tuple[memoryview, str, dict[int, IndexedBundle]]:
    """Every bundle of the device-code section at ``offset``/``size`` of ``path`` by
    section offset, read through an ``mmap`` and checked in full; compressed bundles are
    decoded as a stream and not kept (their code objects go to ``decoded`` on the way,
    see :func:`~kpack.bundle.index_bundles`)."""
    if not size:
        return memoryview(b""), "", {}
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
    return view, name, bundles
