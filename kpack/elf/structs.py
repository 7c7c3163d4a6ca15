"""ELF64 little-endian record layouts and the constants this package uses.

Only the records we read or write are described: the file header, program headers,
section headers and dynamic entries. Decoding and encoding are pure functions of bytes;
I/O lives in :mod:`kpack.elf.reader`.
"""

from __future__ import annotations

import struct
from dataclasses import fields

from kpack.common.frozen import frozen
from kpack.errors import ElfError

ELF_MAGIC = b"\x7fELF"
AR_MAGIC = b"!<arch>\n"

ELFCLASS32 = 1
ELFCLASS64 = 2
ELFDATA2LSB = 1
ELFDATA2MSB = 2

ET_REL = 1
ET_EXEC = 2
ET_DYN = 3

EM_X86_64 = 62
EM_AMDGPU = 224

PT_NULL = 0
PT_LOAD = 1
PT_DYNAMIC = 2
PT_INTERP = 3
PT_NOTE = 4
PT_PHDR = 6
PT_TLS = 7
PT_GNU_EH_FRAME = 0x6474E550
PT_GNU_STACK = 0x6474E551
PT_GNU_RELRO = 0x6474E552

PF_X = 1
PF_W = 2
PF_R = 4

SHT_NULL = 0
SHT_STRTAB = 3
SHT_DYNAMIC = 6
SHT_NOBITS = 8
SHT_DYNSYM = 11
SHT_GNU_VERDEF = 0x6FFFFFFD
SHT_GNU_VERNEED = 0x6FFFFFFE
SHT_GNU_VERSYM = 0x6FFFFFFF
SHF_ALLOC = 2

SHN_UNDEF = 0
SHN_LORESERVE = 0xFF00
SHN_XINDEX = 0xFFFF
PN_XNUM = 0xFFFF

DT_NULL = 0
DT_NEEDED = 1
DT_STRTAB = 5
DT_SYMTAB = 6
DT_STRSZ = 10
DT_SONAME = 14
DT_RPATH = 15
DT_RUNPATH = 29
DT_FLAGS_1 = 0x6FFFFFFB
DF_1_PIE = 0x08000000

#: Dynamic tags whose value is an offset into the dynamic string table.
STRING_TAGS = frozenset(
    {
        DT_NEEDED,
        DT_SONAME,
        DT_RPATH,
        DT_RUNPATH,
        0x7FFFFFFD,  # DT_AUXILIARY
        0x7FFFFFFF,  # DT_FILTER
        0x6FFFFEFA,  # DT_CONFIG
        0x6FFFFEFB,  # DT_DEPAUDIT
        0x6FFFFEFC,  # DT_AUDIT
    }
)

PAGE = 0x1000

EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
PHDR = struct.Struct("<IIQQQQQQ")
SHDR = struct.Struct("<IIQQQQIIQQ")
DYN = struct.Struct("<qQ")

EHDR_SIZE = EHDR.size  # 64
PHDR_SIZE = PHDR.size  # 56
SHDR_SIZE = SHDR.size  # 64
DYN_SIZE = DYN.size  # 16


def align_up(value: int, alignment: int) -> int:
    """Round ``value`` up to a multiple of ``alignment`` (a positive integer)."""
    return -(-value // alignment) * alignment


@frozen
class Ehdr:
    """The ELF64 file header (``e_ident`` kept raw)."""

    ident: bytes
    e_type: int
    e_machine: int
    e_version: int
    e_entry: int
    e_phoff: int
    e_shoff: int
    e_flags: int
    e_ehsize: int
    e_phentsize: int
    e_phnum: int
    e_shentsize: int
    e_shnum: int
    e_shstrndx: int

    @classmethod
    def unpack(cls, raw: bytes) -> Ehdr:
        return cls(*EHDR.unpack(raw))

    def pack(self) -> bytes:
        return _pack(EHDR, self, "ELF header")


@frozen
class Phdr:
    """One ELF64 program header."""

    p_type: int
    p_flags: int
    p_offset: int
    p_vaddr: int
    p_paddr: int
    p_filesz: int
    p_memsz: int
    p_align: int

    @classmethod
    def unpack(cls, raw: bytes) -> Phdr:
        return cls(*PHDR.unpack(raw))

    def pack(self) -> bytes:
        return _pack(PHDR, self, "program header")

    @property
    def file_end(self) -> int:
        return self.p_offset + self.p_filesz

    @property
    def mem_end(self) -> int:
        return self.p_vaddr + self.p_memsz

    def contains_vaddr(self, vaddr: int, size: int) -> bool:
        """True if ``[vaddr, vaddr + size)`` lies in this segment's file-backed bytes."""
        return self.p_vaddr <= vaddr and vaddr + size <= self.p_vaddr + self.p_filesz


@frozen
class Shdr:
    """One ELF64 section header (``name`` resolved from ``.shstrtab``, may be empty)."""

    sh_name: int
    sh_type: int
    sh_flags: int
    sh_addr: int
    sh_offset: int
    sh_size: int
    sh_link: int
    sh_info: int
    sh_addralign: int
    sh_entsize: int

    @classmethod
    def unpack(cls, raw: bytes) -> Shdr:
        return cls(*SHDR.unpack(raw))

    def pack(self) -> bytes:
        return _pack(SHDR, self, "section header")


def _pack(layout: struct.Struct, header: object, what: str) -> bytes:
    """Encode a header; a field computed out of its range (from hostile input values that
    overflow when an edit moves or grows something) is an :class:`ElfError`, not a crash."""
    values = tuple(getattr(header, f.name) for f in fields(header))  # type: ignore[arg-type]
    try:
        return layout.pack(*values)
    except struct.error:
        raise ElfError(f"{what} field out of range after the edit: {values}") from None


def pack_dynamic(entries: list[tuple[int, int]]) -> bytes:
    """Encode ``(d_tag, d_val)`` pairs; ``d_tag`` is signed like ``Elf64_Sxword``."""
    return b"".join(DYN.pack(tag, value) for tag, value in entries)
