"""Reading a PE/COFF (x86-64) image's device code: the ``.hip_fat`` section, the
``.hipFatB`` wrapper array and what each wrapper reaches, the ``.kpackrf`` marker of a
transformed image, and the checks an image must pass before its transform (nothing else
points into ``.hip_fat``; debug data and the COFF symbol table lie inside the file) and after
it.
"""

from __future__ import annotations

import contextlib
import mmap
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from kpack import hipfmt
from kpack.errors import PeError, TransformError
from kpack.hipfmt import HIPF, HIPK, PE_FATBIN, PE_MARKER, PE_SEGMENT, WRAPPER, RawWrapper
from kpack.pe.image import (
    DIR_CERTIFICATE,
    OPT_CHECKSUM,
    REL_BASED_DIR64,
    Buffer,
    DebugEntry,
    PeImage,
    Section,
    base_relocations,
    pe_checksum,
    read_image,
)
from kpack.transform._model import (
    ExtractedKernel,
    FatBinaryInfo,
    check_transformable,
    index_section,
    kernels_of_wrappers,
)

__all__ = [
    "PeFat",
    "PeKpackRef",
    "check_debug_data",
    "check_symbol_table",
    "extract_pe_kernels",
    "inspect_pe",
    "read_pe_fat",
    "read_pe_kpack_ref",
    "references_into",
    "relocations_into_fatbin",
    "transformed_problems",
]


@dataclass(frozen=True, kw_only=True)
class PeFat:
    """A PE image with a ``.hip_fat`` section: its headers, wrappers and relocations."""

    image: PeImage
    fatbin: Section
    segment: Section | None
    marker: Section | None
    wrappers: tuple[RawWrapper, ...]
    relocations: dict[int, int]  # RVA -> base relocation type

    @property
    def path(self) -> Path:
        return self.image.path

    def pointer_rva(self, index: int) -> int:
        assert self.segment is not None
        return self.segment.rva + index * WRAPPER.size + 8


@contextlib.contextmanager
def _mapped(path: Path) -> Iterator[mmap.mmap]:
    try:
        with open(path, "rb") as f:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:
        raise PeError(f"cannot map the file: {exc}", path=path) from exc
    try:
        yield mapped
    finally:
        mapped.close()


def _section_bytes(image: PeImage, data: Buffer, section: Section) -> bytes:
    size = section.virtual_size or section.raw_size
    if section.file_bytes() < size:
        raise PeError(
            f"{section.name}: {size} bytes but only {section.file_bytes()} in the file",
            path=image.path,
        )
    return bytes(data[section.raw_offset : section.raw_offset + size])


def _read(path: Path, data: mmap.mmap) -> PeFat | None:
    return _fat_of(read_image(data, path), data)


def _fat_of(image: PeImage, data: Buffer) -> PeFat | None:
    path = image.path
    fatbin = image.section(PE_FATBIN)
    if fatbin is None:
        return None
    segment = image.section(PE_SEGMENT)
    wrappers: tuple[RawWrapper, ...] = ()
    if segment is not None:
        raw = _section_bytes(image, data, segment)
        wrappers = hipfmt.parse_wrappers(raw, error=PeError, path=path)
    relocations = base_relocations(image, data)
    return PeFat(
        image=image,
        fatbin=fatbin,
        segment=segment,
        marker=image.section(PE_MARKER),
        wrappers=wrappers,
        relocations=relocations,
    )


def relocations_into_fatbin(
    fat: PeFat, data: Buffer, skip: frozenset[int] = frozenset()
) -> list[int]:
    """RVAs of the DIR64 base relocations (other than ``skip``) whose pointer lands in
    ``.hip_fat``: references that emptying the section would leave dangling."""
    image = fat.image
    out = []
    for rva, kind in sorted(fat.relocations.items()):
        offset = image.rva_to_offset(rva, 8)
        if rva in skip or kind != REL_BASED_DIR64 or offset is None:
            continue
        (value,) = struct.unpack("<Q", bytes(data[offset : offset + 8]))
        if fat.fatbin.contains_rva(value - image.image_base):
            out.append(rva)
    return out


def transformed_problems(fat: PeFat, data: Buffer) -> list[str]:
    """What a transformed image must satisfy, for the check before writing and for
    ``kpack verify``: a marker section; every wrapper HIPK, pointing at it, its co_index its
    index; ``.hip_fat`` without file bytes and no base relocation into it; the CheckSum
    (when set) right."""
    image = fat.image
    if fat.marker is None:
        return [f"no {PE_MARKER} section"]
    problems = []
    if fat.fatbin.raw_size:
        problems.append(f"{PE_FATBIN} still holds {fat.fatbin.raw_size} bytes of device code")
    marker = image.image_base + fat.marker.rva
    for wrapper in fat.wrappers:
        if (wrapper.magic, wrapper.pointer, wrapper.co_index) != (HIPK, marker, wrapper.index):
            problems.append(f"wrapper {wrapper.index} is not redirected to {PE_MARKER}: {wrapper}")
    problems += [
        f"base relocation at RVA {rva:#x} points into {PE_FATBIN}"
        for rva in relocations_into_fatbin(fat, data)
    ]
    if image.checksum and pe_checksum(data, image.opt_offset + OPT_CHECKSUM) != image.checksum:
        problems.append("CheckSum does not match the bytes")
    return problems


def read_pe_fat(path: Path) -> PeFat | None:
    """The fat-binary layout of the PE image ``path``; None without ``.hip_fat``."""
    path = Path(path)
    with _mapped(path) as data:
        return _read(path, data)


def _checked(fat: PeFat) -> list[tuple[int, int, str]]:
    """(wrapper index, ``.hip_fat`` offset, label) of every wrapper of a file that can be
    transformed."""
    path = fat.path
    check_transformable(
        path,
        fat.wrappers,
        has_marker=fat.marker is not None,
        has_segment=fat.segment is not None,
        names=(PE_FATBIN, PE_SEGMENT, PE_MARKER),
    )
    image, fatbin = fat.image, fat.fatbin
    out = []
    for wrapper in fat.wrappers:
        assert wrapper.magic == HIPF
        where = f"{PE_SEGMENT} wrapper {wrapper.index} points at {wrapper.pointer:#x}"
        rva = fat.pointer_rva(wrapper.index)
        if image.relocatable and fat.relocations.get(rva) != REL_BASED_DIR64:
            raise TransformError(
                f"{PE_SEGMENT} wrapper {wrapper.index}: its pointer at RVA {rva:#x} has no "
                "DIR64 base relocation",
                path=path,
            )
        target = wrapper.pointer - image.image_base
        if not (0 <= target - fatbin.rva < fatbin.file_bytes()):
            raise TransformError(f"{where}, outside {PE_FATBIN}", path=path)
        out.append((wrapper.index, target - fatbin.rva, where))
    return out


def extract_pe_kernels(path: Path) -> list[ExtractedKernel]:
    """Every code object of the PE image ``path``, keyed by the wrapper that reaches it."""
    path = Path(path)
    fat = read_pe_fat(path)
    if fat is None:
        raise TransformError(f"no {PE_FATBIN} section; nothing to extract", path=path)
    targets = _checked(fat)
    indexed = index_section(path, fat.fatbin.raw_offset, fat.fatbin.file_bytes(), PE_FATBIN)
    return kernels_of_wrappers(indexed, targets)


@dataclass(frozen=True)
class PeKpackRef:
    """The marker of a transformed PE image and its wrappers' ``co_index`` values."""

    path: Path
    kernel_name: str
    search_paths: tuple[str, ...]
    co_indices: tuple[int, ...]


def read_pe_kpack_ref(path: Path) -> PeKpackRef | None:
    """The ``.kpackrf`` marker of ``path``; None when it has none."""
    path = Path(path)
    with _mapped(path) as data:
        fat = _read(path, data)
        if fat is None or fat.marker is None:
            return None
        raw = _section_bytes(fat.image, data, fat.marker)
    kernel_name, paths = hipfmt.decode_marker(raw, error=PeError, path=path)
    indices = tuple(w.co_index for w in fat.wrappers if w.magic == HIPK)
    return PeKpackRef(path, kernel_name, paths, indices)


def inspect_pe(path: Path) -> FatBinaryInfo | None:
    """A PE image's fat binary, described like an ELF one (addresses are VAs)."""
    fat = read_pe_fat(path)
    if fat is None:
        return None
    hipk = sum(w.magic == HIPK for w in fat.wrappers)
    return FatBinaryInfo(
        path=path,
        hip_fatbin_addr=fat.image.image_base + fat.fatbin.rva,
        hip_fatbin_offset=fat.fatbin.raw_offset,
        hip_fatbin_size=fat.fatbin.file_bytes(),
        wrapper_count=len(fat.wrappers),
        already_transformed=fat.marker is not None or bool(hipk),
        relocation_kind="base",
    )


def check_symbol_table(image: PeImage, data: Buffer) -> None:
    """The COFF symbol table (``PointerToSymbolTable``, 18 bytes a symbol) and the string
    table after it must lie in the file: they move with the bytes after the sections, and
    a pointer past the end would be shifted and shipped, still pointing nowhere."""
    end = image.symbol_table + 18 * image.symbol_count
    strings = 4
    if end + 4 <= image.file_size:
        (strings,) = struct.unpack("<I", bytes(data[end : end + 4]))
    if end + max(strings, 4) > image.file_size:
        raise PeError(
            f"COFF header: PointerToSymbolTable {image.symbol_table:#x} with NumberOfSymbols "
            f"{image.symbol_count} and a {max(strings, 4)}-byte string table ends past the "
            f"end of the file ({image.file_size:#x})",
            path=image.path,
        )


def check_debug_data(image: PeImage, debug: Sequence[DebugEntry]) -> None:
    """Every debug directory entry's data (``PointerToRawData`` + ``SizeOfData``) must lie
    in the file, and in the sections or after them, not across their end: the transform
    moves it with the bytes around it."""
    problems = []
    for number, entry in enumerate(debug):
        end = entry.pointer + entry.size
        where = f"entry {number}: PointerToRawData {entry.pointer:#x}"
        if not entry.pointer:
            continue
        if end > image.file_size:
            problems.append(
                f"{where} + SizeOfData {entry.size:#x} ends past the end of the file "
                f"({image.file_size:#x})"
            )
        elif entry.pointer < image.raw_end < end:
            problems.append(
                f"{where} + SizeOfData {entry.size:#x} crosses the end of the sections "
                f"({image.raw_end:#x})"
            )
    if problems:
        raise PeError("malformed debug directory", path=image.path, problems=problems)


def references_into(fat: PeFat, data: Buffer, debug: Sequence[DebugEntry]) -> list[str]:
    """Base relocations (other than the wrapper pointers) whose pointer lands in
    ``.hip_fat``, and data directories that point into it."""
    image, fatbin = fat.image, fat.fatbin
    cut = fatbin.raw_offset
    wrapper_pointers = frozenset(fat.pointer_rva(w.index) for w in fat.wrappers)
    problems = [
        f"a base relocation at RVA {rva:#x} points into {PE_FATBIN}"
        for rva in relocations_into_fatbin(fat, data, wrapper_pointers)
    ]
    for index, (rva, size) in enumerate(image.directories):
        if size and index != DIR_CERTIFICATE and fatbin.contains_rva(rva):
            problems.append(f"data directory {index} lies in {PE_FATBIN}")
    for entry in debug:
        start, end = entry.pointer, entry.pointer + entry.size
        if entry.size and start and start < fatbin.raw_offset + fatbin.raw_size and end > cut:
            problems.append(f"debug data at file offset {entry.pointer:#x} lies in {PE_FATBIN}")
        elif entry.size and entry.rva and fatbin.contains_rva(entry.rva):
            problems.append(f"debug data at RVA {entry.rva:#x} lies in {PE_FATBIN}")
    return problems
