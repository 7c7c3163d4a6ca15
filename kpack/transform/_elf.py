"""The ELF64 x86-64 transform (kpack.md §3): shared libraries, PIE and non-PIE executables,
pointers relocated through RELA, RELR or not at all.

:func:`fat_binary_info` describes an open file's device code; :func:`plan_transform` plans the
rewritten file as a :class:`TransformPlan` (marker section and PT_LOAD, wrappers redirected,
device bytes removed, the marker's section header appended; every original section keeps
its index) and verifies the planned bytes; nothing is written here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from kpack.bundle import BundleSink
from kpack.common.frozen import frozen
from kpack.elf import ElfEdit
from kpack.elf.reader import ElfLayout, Reader, open_reader, read_ident
from kpack.elf.relocations import read_relocations, read_relr
from kpack.elf.structs import ELF_MAGIC, ET_REL
from kpack.errors import ElfError, TransformError
from kpack.hipfmt import FATBIN, SEGMENT
from kpack.transform._layout import lay_out
from kpack.transform._model import (
    ExtractedKernel,
    FatBinaryInfo,
    check_transformable,
    encode_marker,
    index_section,
    kernels_of_wrappers,
)
from kpack.transform._scan import (
    FatLayout,
    Pointer,
    elf_type,
    is_elf64le,
    read_fat_layout,
    relocation_kind,
    resolve_pointers,
)
from kpack.transform._verify import verify_transform

__all__ = ["TransformPlan", "elf_kernels", "fat_binary_info", "inspect_elf", "plan_transform"]

log = logging.getLogger(__name__)


@frozen(kw_only=True)
class TransformPlan:
    """A verified, not yet written transform of ``source``."""

    source: Path
    edit: ElfEdit
    kernel_name: str
    search_paths: tuple[str, ...]
    removed_bytes: int
    kernels: tuple[ExtractedKernel, ...]
    notes: tuple[str, ...]

    @property
    def size(self) -> int:
        return self.edit.size

    def iter_chunks(self) -> Iterator[bytes]:
        """The transformed file, streamed from the source through the edit."""
        return self.edit.iter_chunks()

    def open(self) -> BinaryIO:
        return self.edit.open()


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
        path=path,
        hip_fatbin_addr=shdr.sh_addr,
        hip_fatbin_offset=shdr.sh_offset,
        hip_fatbin_size=shdr.sh_size,
        wrapper_count=len(fat.wrappers),
        already_transformed=fat.already_transformed,
        relocation_kind=relocation_kind(fat, relr),
    )


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
        source=path,
        edit=laid.edit,
        kernel_name=kernel_name,
        search_paths=paths,
        removed_bytes=laid.cut.size if laid.cut is not None else 0,
        kernels=tuple(kernels),
        notes=laid.notes,
    )


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


def _extract(
    fat: FatLayout, pointers: Sequence[Pointer], decoded: BundleSink | None = None
) -> list[ExtractedKernel]:
    """§3 step 1: each wrapper's bundle, from its original pointer."""
    shdr = fat.fatbin_shdr
    indexed = index_section(fat.path, shdr.sh_offset, shdr.sh_size, FATBIN, decoded)
    targets: list[tuple[int, int, str]] = []
    for pointer in pointers:
        where = f"{SEGMENT} wrapper {pointer.index} points at {pointer.value:#x}"
        if not fat.fatbin_contains(pointer.value):
            raise TransformError(f"{where}, outside {FATBIN}", path=fat.path)
        targets.append((pointer.index, pointer.value - shdr.sh_addr, where))
    return kernels_of_wrappers(indexed, targets)


def inspect_elf(path: Path) -> FatBinaryInfo | None:
    """:func:`fat_binary_info` of the ELF file at ``path``."""
    with open_reader(path) as reader:
        return fat_binary_info(reader, path)


def elf_kernels(path: Path) -> list[ExtractedKernel]:
    """Every code object of the ELF file at ``path``, keyed by its wrapper."""
    with open_reader(path) as reader:
        fat, pointers = _scan(reader, path)
    return _extract(fat, pointers)
