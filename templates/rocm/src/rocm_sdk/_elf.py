"""A minimal ELF reader: file type, DT_NEEDED and DT_SONAME, and named sections.

Used by the self-tests to see which libraries a shared object needs (the ELF
header, the program headers and the dynamic segment) and to read the sections
of kpack-transformed binaries (the section-header table and ``.shstrtab``).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

ELF_MAGIC = b"\x7fELF"
ET_EXEC, ET_DYN = 2, 3
PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME = 0, 1, 5, 10, 14
SHT_NOBITS = 8
SHN_XINDEX = 0xFFFF
MAX_SHSTRTAB = 16 << 20

# (ehdr after e_ident, phdr, dyn, shdr) layouts for ELFCLASS32 (1) and ELFCLASS64 (2).
_LAYOUTS = {
    1: ("HHIIIIIHHHHHH", "IIIIIIII", "iI", "IIIIIIIIII"),
    2: ("HHIQQQIHHHHHH", "IIQQQQQQ", "qQ", "IIQQQQIIQQ"),
}


class ElfError(ValueError):
    """The file is not a readable ELF file."""


@dataclass(frozen=True)
class ElfDynamic:
    e_type: int
    machine: int
    needed: tuple[str, ...]
    soname: str | None


@dataclass(frozen=True, kw_only=True)
class ElfSection:
    name: str
    sh_type: int
    flags: int
    addr: int
    offset: int
    size: int


@dataclass(frozen=True)
class _Segment:
    p_type: int
    offset: int
    vaddr: int
    filesz: int


def is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == ELF_MAGIC
    except OSError:
        return False


def _segments(
    f: BinaryIO, endian: str, elf_class: int, header: tuple[int, ...]
) -> list[_Segment]:
    phoff, phentsize, phnum = header[4], header[8], header[9]
    fmt = endian + _LAYOUTS[elf_class][1]
    size = struct.calcsize(fmt)
    if phnum and phentsize < size:
        raise ElfError("program header entries are too small")
    segments = []
    for i in range(phnum):
        f.seek(phoff + i * phentsize)
        raw = struct.unpack(fmt, f.read(size))
        if elf_class == 2:
            segments.append(_Segment(raw[0], raw[2], raw[3], raw[5]))
        else:
            segments.append(_Segment(raw[0], raw[1], raw[2], raw[4]))
    return segments


def _vaddr_to_offset(segments: list[_Segment], vaddr: int) -> int:
    for seg in segments:
        if seg.p_type == PT_LOAD and seg.vaddr <= vaddr < seg.vaddr + seg.filesz:
            return vaddr - seg.vaddr + seg.offset
    raise ElfError(f"address {vaddr:#x} is not in any PT_LOAD segment")


def _dynamic_entries(
    f: BinaryIO, endian: str, elf_class: int, seg: _Segment
) -> list[tuple[int, int]]:
    fmt = endian + _LAYOUTS[elf_class][2]
    size = struct.calcsize(fmt)
    f.seek(seg.offset)
    data = f.read(seg.filesz)
    entries = []
    for pos in range(0, len(data) - size + 1, size):
        tag, value = struct.unpack_from(fmt, data, pos)
        if tag == DT_NULL:
            break
        entries.append((tag, value))
    return entries


def _string(f: BinaryIO, strtab: int, strsz: int, index: int) -> str:
    if index >= strsz:
        raise ElfError("string index past the end of DT_STRTAB")
    f.seek(strtab + index)
    raw = f.read(min(4096, strsz - index))
    return raw.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def read_dynamic(path: Path) -> ElfDynamic:
    """Type, machine, DT_NEEDED (in order) and DT_SONAME of an ELF file."""
    with open(path, "rb") as f:
        ident = f.read(16)
        if len(ident) < 16 or ident[:4] != ELF_MAGIC or ident[4] not in _LAYOUTS:
            raise ElfError(f"{path} is not an ELF32/ELF64 file")
        endian = "<" if ident[5] == 1 else ">"
        elf_class = ident[4]
        fmt = endian + _LAYOUTS[elf_class][0]
        header = struct.unpack(fmt, f.read(struct.calcsize(fmt)))
        segments = _segments(f, endian, elf_class, header)
        dynamic = next((s for s in segments if s.p_type == PT_DYNAMIC), None)
        if dynamic is None:
            return ElfDynamic(header[0], header[1], (), None)
        entries = _dynamic_entries(f, endian, elf_class, dynamic)
        tags = dict(entries)
        if DT_STRTAB not in tags:
            raise ElfError(f"{path} has a dynamic segment without DT_STRTAB")
        strtab = _vaddr_to_offset(segments, tags[DT_STRTAB])
        strsz = tags.get(DT_STRSZ, 1 << 20)
        needed = tuple(_string(f, strtab, strsz, v) for t, v in entries if t == DT_NEEDED)
        soname = _string(f, strtab, strsz, tags[DT_SONAME]) if DT_SONAME in tags else None
        return ElfDynamic(header[0], header[1], needed, soname)


def _header(f: BinaryIO, path: Path) -> tuple[str, int, tuple[int, ...]]:
    ident = f.read(16)
    if len(ident) < 16 or ident[:4] != ELF_MAGIC or ident[4] not in _LAYOUTS:
        raise ElfError(f"{path} is not an ELF32/ELF64 file")
    endian = "<" if ident[5] == 1 else ">"
    fmt = endian + _LAYOUTS[ident[4]][0]
    raw = f.read(struct.calcsize(fmt))
    if len(raw) != struct.calcsize(fmt):
        raise ElfError(f"{path}: truncated ELF header")
    return endian, ident[4], struct.unpack(fmt, raw)


def _read_exact(f: BinaryIO, offset: int, size: int, file_size: int, what: str) -> bytes:
    if offset < 0 or size < 0 or offset + size > file_size:
        raise ElfError(f"{what} [{offset:#x}, {offset + size:#x}) lies outside the file")
    f.seek(offset)
    return f.read(size)


def read_sections(path: Path) -> list[ElfSection]:
    """Every section header of ``path`` with its name, in table order."""
    with open(path, "rb") as f:
        file_size = os.fstat(f.fileno()).st_size
        endian, elf_class, header = _header(f, path)
        shoff, shentsize, shnum, shstrndx = header[5], header[10], header[11], header[12]
        if shoff == 0:
            return []
        fmt = struct.Struct(endian + _LAYOUTS[elf_class][3])
        if shentsize < fmt.size:
            raise ElfError(f"{path}: section header entries are too small")
        first = fmt.unpack(_read_exact(f, shoff, fmt.size, file_size, "section header 0"))
        if shnum == 0:  # extended numbering: the count is in section 0's sh_size
            shnum = first[5]
        if shstrndx == SHN_XINDEX:
            shstrndx = first[6]
        table = _read_exact(f, shoff, shnum * shentsize, file_size, "section-header table")
        raw = [fmt.unpack_from(table, i * shentsize) for i in range(shnum)]
        if not 0 < shstrndx < shnum:
            raise ElfError(f"{path}: e_shstrndx {shstrndx} is not a section")
        strtab = raw[shstrndx]
        if strtab[5] > MAX_SHSTRTAB:
            raise ElfError(f"{path}: .shstrtab is implausibly large ({strtab[5]} bytes)")
        names = _read_exact(f, strtab[4], strtab[5], file_size, ".shstrtab")
    sections = []
    for sh_name, sh_type, flags, addr, offset, size, *_rest in raw:
        if sh_name >= max(len(names), 1):
            raise ElfError(f"{path}: sh_name {sh_name} is past the end of .shstrtab")
        name = names[sh_name:].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
        sections.append(ElfSection(name=name, sh_type=sh_type, flags=flags, addr=addr,
                                   offset=offset, size=size))
    return sections


def read_section_data(path: Path, section: ElfSection, limit: int) -> bytes:
    """The first ``limit`` bytes (at most) of ``section``'s content in the file."""
    if section.sh_type == SHT_NOBITS:
        raise ElfError(f"{path}: section {section.name} has no bytes in the file (NOBITS)")
    with open(path, "rb") as f:
        file_size = os.fstat(f.fileno()).st_size
        size = min(section.size, limit)
        return _read_exact(f, section.offset, size, file_size, f"section {section.name}")
