"""Read what the host-binary transform needs: ``.hip_fatbin``, the wrappers, their pointers.

Private to :mod:`kpack.transform`. Only headers, the wrapper array (24 bytes per
translation unit) and the relocation tables are read; device code is never touched here.
"""

from __future__ import annotations

import bisect
import logging
from pathlib import Path
from typing import Literal

from kpack.common.frozen import frozen
from kpack.elf.reader import ElfLayout, Reader, read_ident, read_layout
from kpack.elf.relocations import (
    R_X86_64_64,
    R_X86_64_RELATIVE,
    Rela,
    Relocations,
    read_symbol_values,
)
from kpack.elf.structs import (
    ELF_MAGIC,
    ELFCLASS64,
    ELFDATA2LSB,
    EM_X86_64,
    ET_DYN,
    ET_EXEC,
    SHF_ALLOC,
    SHT_NOBITS,
    Shdr,
)
from kpack.errors import TransformError
from kpack.hipfmt import FATBIN, HIPK, MARKER, SEGMENT, WRAPPER, parse_wrappers

log = logging.getLogger(__name__)


RelocationKind = Literal["rela", "relr", "none", "base"]  # base: PE base relocations


@frozen(kw_only=True)
class Wrapper:
    """One ``__CudaFatBinaryWrapper`` as stored in the file."""

    index: int
    vaddr: int
    file_offset: int
    magic: int
    version: int
    binary: int  # the pointer as stored in place
    reserved1: int

    @property
    def pointer_vaddr(self) -> int:
        return self.vaddr + 8


@frozen
class Pointer:
    """Where wrapper ``index`` points before the transform, and how that is relocated."""

    index: int
    kind: RelocationKind
    value: int  # the original bundle address (RELA addend, RELR/ET_EXEC in-place value)
    rela: Rela | None


@frozen(kw_only=True)
class FatLayout:
    """A host ELF file with a ``.hip_fatbin`` section."""

    path: Path
    layout: ElfLayout
    fatbin: int  # section index of .hip_fatbin
    segment: int | None  # section index of .hipFatBinSegment
    wrappers: tuple[Wrapper, ...]
    has_marker: bool

    @property
    def fatbin_shdr(self) -> Shdr:
        return self.layout.shdrs[self.fatbin]

    @property
    def already_transformed(self) -> bool:
        return self.has_marker or any(w.magic == HIPK for w in self.wrappers)

    def fatbin_contains(self, vaddr: int) -> bool:
        shdr = self.fatbin_shdr
        return shdr.sh_addr <= vaddr < shdr.sh_addr + shdr.sh_size


def is_elf64le(reader: Reader) -> bool:
    """True for an ELF64 little-endian file; False for anything else (no error)."""
    ident = read_ident(reader)
    return (
        len(ident) >= 6
        and ident[:4] == ELF_MAGIC
        and ident[4:6] == bytes((ELFCLASS64, ELFDATA2LSB))
    )


def elf_type(reader: Reader) -> int:
    """``e_type`` of an ELF64 LE file (2 bytes read)."""
    return int.from_bytes(reader.read_at(16, 2, "e_type"), "little")


def read_fat_layout(
    reader: Reader, path: Path, layout: ElfLayout | None = None
) -> FatLayout | None:
    """The fat-binary facts of an ELF64 LE file; ``None`` without ``.hip_fatbin``."""
    layout = read_layout(reader) if layout is None else layout
    fatbin = layout.section_index(FATBIN)
    if fatbin is None:
        return None
    if layout.section_names.count(FATBIN) > 1:
        raise TransformError(f"more than one {FATBIN} section", path=path)
    if layout.ehdr.e_machine != EM_X86_64:
        raise TransformError(
            f"e_machine {layout.ehdr.e_machine} is not x86-64; cannot transform", path=path
        )
    if layout.ehdr.e_type not in (ET_EXEC, ET_DYN):
        raise TransformError(
            f"e_type {layout.ehdr.e_type} is not EXEC or DYN (a relocatable object keeps its "
            "device code for the link)",
            path=path,
        )
    shdr = layout.shdrs[fatbin]
    has_marker = layout.section_index(MARKER) is not None
    if not has_marker and (shdr.sh_type == SHT_NOBITS or not shdr.sh_flags & SHF_ALLOC):
        raise TransformError(f"{FATBIN} is NOBITS or not allocated", path=path)
    segment = layout.section_index(SEGMENT)
    wrappers = _read_wrappers(reader, layout, segment, path) if segment is not None else ()
    return FatLayout(
        path=path,
        layout=layout,
        fatbin=fatbin,
        segment=segment,
        wrappers=wrappers,
        has_marker=has_marker,
    )


def _read_wrappers(
    reader: Reader, layout: ElfLayout, segment: int, path: Path
) -> tuple[Wrapper, ...]:
    shdr = layout.shdrs[segment]
    if shdr.sh_type == SHT_NOBITS or shdr.sh_size % WRAPPER.size:
        raise TransformError(
            f"{SEGMENT} has type {shdr.sh_type} and size {shdr.sh_size}; expected PROGBITS "
            f"with a multiple of {WRAPPER.size} bytes",
            path=path,
        )
    if shdr.sh_size and layout.vaddr_to_offset(shdr.sh_addr, shdr.sh_size) != shdr.sh_offset:
        raise TransformError(
            f"{SEGMENT} at {shdr.sh_addr:#x} is not file-backed at its sh_offset "
            f"{shdr.sh_offset:#x}",
            path=path,
        )
    raw = reader.read_at(shdr.sh_offset, shdr.sh_size, SEGMENT)
    return tuple(
        Wrapper(
            index=w.index,
            vaddr=shdr.sh_addr + w.index * WRAPPER.size,
            file_offset=shdr.sh_offset + w.index * WRAPPER.size,
            magic=w.magic,
            version=w.version,
            binary=w.pointer,
            reserved1=w.reserved1,
        )
        for w in parse_wrappers(raw, error=TransformError, path=path)
    )


def relocation_kind(fat: FatLayout, relr: tuple[int, ...]) -> RelocationKind:
    """How the first wrapper's pointer is relocated (cheap: RELA is not read)."""
    if fat.layout.ehdr.e_type == ET_EXEC:
        return "none"
    if fat.wrappers:
        return "relr" if _in_sorted(relr, fat.wrappers[0].pointer_vaddr) else "rela"
    return "relr" if relr else "rela"


def resolve_pointers(reader: Reader, fat: FatLayout, relocs: Relocations) -> tuple[Pointer, ...]:
    """Each wrapper's original bundle address, from RELA, RELR or the in-place value."""
    by_offset = relocs.find(w.pointer_vaddr for w in fat.wrappers)
    found = {w.index: by_offset.get(w.pointer_vaddr) for w in fat.wrappers}
    symbols = read_symbol_values(
        reader, fat.layout, (r.r_sym for r in found.values() if r is not None)
    )
    pointers = []
    for wrapper in fat.wrappers:
        rela = found[wrapper.index]
        in_relr = _in_sorted(relocs.relr, wrapper.pointer_vaddr)
        where = f"{SEGMENT} wrapper {wrapper.index} (pointer at {wrapper.pointer_vaddr:#x})"
        if rela is not None and in_relr:
            raise TransformError(f"{where} is relocated by both RELA and RELR", path=fat.path)
        if rela is not None:
            value = _rela_value(rela, symbols, where, fat.path)
            pointers.append(Pointer(wrapper.index, "rela", value, rela))
        elif in_relr:
            pointers.append(Pointer(wrapper.index, "relr", wrapper.binary, None))
        elif fat.layout.ehdr.e_type == ET_EXEC:
            pointers.append(Pointer(wrapper.index, "none", wrapper.binary, None))
        else:
            raise TransformError(
                f"{where} has no dynamic relocation in a position-independent file",
                path=fat.path,
            )
    return tuple(pointers)


def _rela_value(rela: Rela, symbols: dict[int, int], where: str, path: Path) -> int:
    if rela.r_type == R_X86_64_RELATIVE:
        return rela.r_addend
    if rela.r_type == R_X86_64_64 and rela.r_sym in symbols:
        return (symbols[rela.r_sym] + rela.r_addend) & 0xFFFFFFFFFFFFFFFF
    raise TransformError(
        f"{where} has relocation type {rela.r_type} (symbol {rela.r_sym}); expected "
        "R_X86_64_RELATIVE or R_X86_64_64 against a defined symbol",
        path=path,
    )


def _in_sorted(values: tuple[int, ...], value: int) -> bool:
    index = bisect.bisect_left(values, value)
    return index < len(values) and values[index] == value
