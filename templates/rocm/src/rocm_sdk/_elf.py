"""A minimal ELF reader: file type, DT_NEEDED and DT_SONAME.

Used by the self-tests to see which libraries a shared object needs. Reads only
the ELF header, the program headers and the dynamic segment.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

ELF_MAGIC = b"\x7fELF"
ET_EXEC, ET_DYN = 2, 3
PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME = 0, 1, 5, 10, 14

# (ehdr after e_ident, phdr, dyn) layouts for ELFCLASS32 (1) and ELFCLASS64 (2).
_LAYOUTS = {
    1: ("HHIIIIIHHHHHH", "IIIIIIII", "iI"),
    2: ("HHIQQQIHHHHHH", "IIQQQQQQ", "qQ"),
}


class ElfError(ValueError):
    """The file is not a readable ELF file."""


@dataclass(frozen=True)
class ElfDynamic:
    e_type: int
    machine: int
    needed: tuple[str, ...]
    soname: str | None


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
