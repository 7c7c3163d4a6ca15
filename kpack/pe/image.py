"""PE32+ (x86-64) image headers, read once into frozen values.

Only what the device-code split needs: the COFF and optional headers, the data
directories, the section table, base relocations and the debug directory (whose entries
carry file offsets). Every offset and size read from the file is checked against the
file before it is used; a malformed image is one :class:`~kpack.errors.PeError`.
"""

from __future__ import annotations

import itertools
import mmap
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kpack.errors import PeError
from kpack.pe.signature import MZ, PE_MAGIC, is_pe, is_pe_file

__all__ = [
    "DIR_BASERELOC",
    "DIR_CERTIFICATE",
    "DIR_DEBUG",
    "IMAGE_FILE_RELOCS_STRIPPED",
    "PE_MAGIC",
    "REL_BASED_ABSOLUTE",
    "REL_BASED_DIR64",
    "Buffer",
    "Checksum",
    "DebugEntry",
    "PeImage",
    "Section",
    "Sliceable",
    "imported_dlls",
    "is_pe",
    "is_pe_file",
    "pe_checksum",
    "read_image",
]


class Sliceable(Protocol):
    """What the readers need of a file's bytes: its length and slices of it. A read-only
    ``mmap``, ``bytes``, or a planned output that does not exist on disk yet."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: slice, /) -> bytes: ...


#: What the readers accept: the whole file's bytes, typically a read-only ``mmap``.
Buffer = bytes | bytearray | mmap.mmap | Sliceable

MACHINE_AMD64 = 0x8664
OPT_PE32 = 0x10B
OPT_PE32_PLUS = 0x20B
IMAGE_FILE_RELOCS_STRIPPED = 0x0001
DIR_CERTIFICATE = 4
DIR_BASERELOC = 5
DIR_DEBUG = 6
REL_BASED_ABSOLUTE = 0
REL_BASED_DIR64 = 10

COFF = struct.Struct("<HHIIIHH")
SECTION = struct.Struct("<8sIIIIIIHHI")
DEBUG_ENTRY = struct.Struct("<IIHHIIII")
#: offset of CheckSum / NumberOfRvaAndSizes / the data directories in a PE32+ optional header
OPT_CHECKSUM = 64
OPT_NUM_DIRS = 108
OPT_DIRS = 112
_MACHINES = {0x14C: "i386 (32-bit x86)", 0xAA64: "ARM64", 0x1C4: "ARMv7", 0x8664: "x86-64"}


@dataclass(frozen=True, kw_only=True)
class Section:
    index: int
    name: str
    virtual_size: int
    rva: int
    raw_size: int
    raw_offset: int
    characteristics: int
    header_offset: int  # file offset of its 40-byte header

    @property
    def mapped_size(self) -> int:
        """Bytes of address space: the loader maps max(VirtualSize, SizeOfRawData)."""
        return max(self.virtual_size, self.raw_size)

    def contains_rva(self, rva: int, size: int = 1) -> bool:
        return self.rva <= rva and rva + size <= self.rva + self.mapped_size

    def file_bytes(self) -> int:
        """Bytes of the section the file holds (the rest is zero-filled)."""
        return min(self.raw_size, self.virtual_size) if self.virtual_size else self.raw_size


@dataclass(frozen=True)
class DebugEntry:
    offset: int  # file offset of the 28-byte entry
    size: int  # SizeOfData
    rva: int  # AddressOfRawData
    pointer: int  # PointerToRawData (a file offset)


@dataclass(frozen=True, kw_only=True)
class PeImage:
    path: Path
    file_size: int
    pe_offset: int
    coff_characteristics: int
    symbol_table: int  # PointerToSymbolTable (file offset, 0 for none)
    symbol_count: int
    opt_offset: int
    image_base: int
    section_alignment: int
    file_alignment: int
    size_of_image: int
    size_of_initialized_data: int
    size_of_headers: int
    checksum: int
    directories: tuple[tuple[int, int], ...]  # (RVA or file offset, size)
    sections: tuple[Section, ...]
    section_table_end: int

    def section(self, name: str) -> Section | None:
        found = [s for s in self.sections if s.name == name]
        if len(found) > 1:
            raise PeError(f"{len(found)} sections named {name}", path=self.path)
        return found[0] if found else None

    def section_at(self, rva: int, size: int = 1) -> Section | None:
        return next((s for s in self.sections if s.contains_rva(rva, size)), None)

    def rva_to_offset(self, rva: int, size: int) -> int | None:
        """The file offset of ``size`` bytes at ``rva``, or None when they are not all in
        the file (zero-filled or unmapped)."""
        section = self.section_at(rva, size)
        if section is None:
            return None
        delta = rva - section.rva
        if delta + size > section.file_bytes():
            return None
        return section.raw_offset + delta

    def directory(self, index: int) -> tuple[int, int]:
        return self.directories[index] if index < len(self.directories) else (0, 0)

    @property
    def relocatable(self) -> bool:
        return not self.coff_characteristics & IMAGE_FILE_RELOCS_STRIPPED

    @property
    def raw_end(self) -> int:
        """End of the last section's raw data (or of the headers)."""
        ends = [s.raw_offset + s.raw_size for s in self.sections if s.raw_size]
        return max([self.size_of_headers, *ends])


def _u(data: Buffer, fmt: str, offset: int, what: str, path: Path) -> tuple[int, ...]:
    size = struct.calcsize(fmt)
    if offset < 0 or offset + size > len(data):
        raise PeError(
            f"truncated: {what} at {offset:#x} extends past the end of the file", path=path
        )
    return struct.unpack(fmt, bytes(data[offset : offset + size]))


def read_image(data: Buffer, path: Path) -> PeImage:
    """Parse and validate the headers of a PE32+ x86-64 image held in ``data``."""
    if bytes(data[:2]) != MZ:
        raise PeError("not a PE image (no MZ header)", path=path)
    (pe_offset,) = _u(data, "<I", 0x3C, "e_lfanew", path)
    if bytes(data[pe_offset : pe_offset + 4]) != PE_MAGIC:
        raise PeError(f"no PE signature at e_lfanew {pe_offset:#x}", path=path)
    machine, nsections, _stamp, symtab, nsyms, opt_size, characteristics = _u(
        data, "<HHIIIHH", pe_offset + 4, "COFF header", path
    )
    if machine != MACHINE_AMD64:
        name = _MACHINES.get(machine, f"machine {machine:#06x}")
        raise PeError(f"{name} image; only x86-64 (AMD64) images are supported", path=path)
    opt = pe_offset + 4 + COFF.size
    (magic,) = _u(data, "<H", opt, "optional header", path)
    if magic == OPT_PE32:
        raise PeError("PE32 (32-bit) image; only PE32+ (64-bit) images are supported", path=path)
    if magic != OPT_PE32_PLUS or opt_size < OPT_DIRS:
        raise PeError(
            f"optional header magic {magic:#06x} / size {opt_size} is not PE32+", path=path
        )
    (image_base,) = _u(data, "<Q", opt + 24, "ImageBase", path)
    salign, falign = _u(data, "<II", opt + 32, "alignments", path)
    (initialized,) = _u(data, "<I", opt + 8, "SizeOfInitializedData", path)
    size_of_image, size_of_headers, checksum = _u(data, "<III", opt + 56, "image sizes", path)
    (ndirs,) = _u(data, "<I", opt + OPT_NUM_DIRS, "NumberOfRvaAndSizes", path)
    if ndirs > 16 or OPT_DIRS + 8 * ndirs > opt_size:
        raise PeError(f"{ndirs} data directories do not fit the optional header", path=path)
    dirs = tuple(
        (rva, size)
        for rva, size in (
            _u(data, "<II", opt + OPT_DIRS + 8 * i, f"data directory {i}", path)
            for i in range(ndirs)
        )
    )
    for value, what in ((salign, "SectionAlignment"), (falign, "FileAlignment")):
        if value == 0 or value & (value - 1):
            raise PeError(f"{what} {value:#x} is not a power of two", path=path)
    if not 512 <= falign <= 0x10000 or salign < falign:
        raise PeError(
            f"FileAlignment {falign:#x} must be 512 to 64 KiB and at most SectionAlignment "
            f"({salign:#x}), as the PE format asks",
            path=path,
        )
    table = opt + opt_size
    table_end = table + SECTION.size * nsections
    if table_end > len(data) or table_end > size_of_headers:
        raise PeError(
            f"truncated section table: {nsections} headers at {table:#x} end at {table_end:#x}, "
            f"past the file or SizeOfHeaders ({size_of_headers:#x})",
            path=path,
        )
    sections = tuple(_section(data, i, table + SECTION.size * i, path) for i in range(nsections))
    _check_sections(sections, len(data), size_of_headers, size_of_image, path)
    return PeImage(
        path=path,
        file_size=len(data),
        pe_offset=pe_offset,
        coff_characteristics=characteristics,
        symbol_table=symtab,
        symbol_count=nsyms,
        opt_offset=opt,
        image_base=image_base,
        section_alignment=salign,
        file_alignment=falign,
        size_of_image=size_of_image,
        size_of_initialized_data=initialized,
        size_of_headers=size_of_headers,
        checksum=checksum,
        directories=dirs,
        sections=sections,
        section_table_end=table_end,
    )


def _section(data: Buffer, index: int, offset: int, path: Path) -> Section:
    raw_name, vsize, rva, raw_size, raw_ptr, _rel, _lines, _nrel, _nlines, chars = SECTION.unpack(
        bytes(data[offset : offset + SECTION.size])
    )
    name = raw_name.rstrip(b"\0").decode("latin-1")
    return Section(
        index=index,
        name=name,
        virtual_size=vsize,
        rva=rva,
        raw_size=raw_size,
        raw_offset=raw_ptr if raw_size else 0,
        characteristics=chars,
        header_offset=offset,
    )


def _check_sections(
    sections: tuple[Section, ...], file_size: int, headers: int, size_of_image: int, path: Path
) -> None:
    problems = [
        f"section {s.name} ({s.rva:#x}+{s.mapped_size:#x}) extends past SizeOfImage "
        f"({size_of_image:#x})"
        for s in sections
        if s.rva + s.mapped_size > size_of_image
    ]
    by_rva = sorted(sections, key=lambda s: s.rva)
    for a, b in itertools.pairwise(by_rva):
        if a.rva + a.mapped_size > b.rva:
            problems.append(f"sections {a.name} and {b.name} overlap in memory")
    by_file = sorted((s for s in sections if s.raw_size), key=lambda s: s.raw_offset)
    for a, b in itertools.pairwise(by_file):
        if a.raw_offset + a.raw_size > b.raw_offset:
            problems.append(f"sections {a.name} and {b.name} overlap in the file")
    for s in by_file:
        if s.raw_offset < headers or s.raw_offset + s.raw_size > file_size:
            problems.append(
                f"section {s.name}: raw data {s.raw_offset:#x}+{s.raw_size:#x} is outside the "
                f"file body ({headers:#x}..{file_size:#x})"
            )
    if problems:
        raise PeError("malformed section table", path=path, problems=problems)


def base_relocations(image: PeImage, data: Buffer) -> dict[int, int]:
    """RVA -> relocation type of every base relocation (ABSOLUTE padding left out)."""
    rva, size = image.directory(DIR_BASERELOC)
    if not size:
        return {}
    offset = image.rva_to_offset(rva, size)
    if offset is None:
        raise PeError(
            f"base relocation table {rva:#x}+{size:#x} is not in the file", path=image.path
        )
    out: dict[int, int] = {}
    pos, end = offset, offset + size
    while pos + 8 <= end:
        page, block = struct.unpack("<II", bytes(data[pos : pos + 8]))
        if block < 8 or pos + block > end or block % 2:
            raise PeError(f"base relocation block at {pos:#x} has size {block}", path=image.path)
        for (entry,) in struct.iter_unpack("<H", bytes(data[pos + 8 : pos + block])):
            kind, where = entry >> 12, entry & 0xFFF
            if kind != REL_BASED_ABSOLUTE:
                out[page + where] = kind
        pos += block
    return out


#: Data directories of the import table and the delay-load import table.
DIR_IMPORT, DIR_DELAY_IMPORT = 1, 13
_MAX_DLL_NAME = 512


def imported_dlls(image: PeImage, data: Buffer) -> tuple[str, ...]:
    """The DLL names the import table and the delay-load import table name, in order
    (``amdhip64_7.dll``, ``KERNEL32.dll``)."""
    names: list[str] = []
    # (directory, descriptor size, offset of the name's RVA in a descriptor)
    for index, size, at in ((DIR_IMPORT, 20, 12), (DIR_DELAY_IMPORT, 32, 4)):
        rva, length = image.directory(index)
        if not length:
            continue
        offset = image.rva_to_offset(rva, length)
        if offset is None:
            raise PeError(f"import directory {index} is not in the file", path=image.path)
        for pos in range(offset, offset + length - size + 1, size):
            entry = bytes(data[pos : pos + size])
            if not any(entry):
                break
            (name_rva,) = struct.unpack_from("<I", entry, at)
            names.append(_dll_name(image, data, name_rva))
    return tuple(names)


def _dll_name(image: PeImage, data: Buffer, rva: int) -> str:
    section = image.section_at(rva)
    start = image.rva_to_offset(rva, 1)
    if section is None or start is None:
        raise PeError(f"imported DLL name at RVA {rva:#x} is not in the file", path=image.path)
    end = min(start + _MAX_DLL_NAME, section.raw_offset + section.file_bytes())
    raw = bytes(data[start:end])
    if b"\0" not in raw:
        raise PeError(f"imported DLL name at RVA {rva:#x} is not terminated", path=image.path)
    return raw.split(b"\0", 1)[0].decode("ascii", "replace")


def debug_entries(image: PeImage, data: Buffer) -> Iterator[DebugEntry]:
    """The debug directory's entries (their PointerToRawData are file offsets)."""
    rva, size = image.directory(DIR_DEBUG)
    if not size:
        return
    offset = image.rva_to_offset(rva, size)
    if offset is None or size % DEBUG_ENTRY.size:
        raise PeError(f"debug directory {rva:#x}+{size:#x} is malformed", path=image.path)
    for pos in range(offset, offset + size, DEBUG_ENTRY.size):
        fields = DEBUG_ENTRY.unpack(bytes(data[pos : pos + DEBUG_ENTRY.size]))
        yield DebugEntry(pos, fields[5], fields[6], fields[7])


class Checksum:
    """The PE image checksum (the algorithm of ``CheckSumMappedFile``), fed in pieces: the
    sum of the file's little-endian 16-bit words with end-around carry, plus the file
    length; the CheckSum field must be fed as zeros.

    A piece read as one little-endian integer is congruent, modulo 0xFFFF, to the sum of
    its 16-bit words (2**16 = 1 mod 0xFFFF), shifted by a byte when it starts at an odd
    file offset; the end-around carry computes that residue, with 0xFFFF standing for a
    non-zero multiple of it.
    """

    def __init__(self) -> None:
        self.length = 0
        self._residue = 0
        self._nonzero = False

    def update(self, data: bytes | bytearray | memoryview) -> None:
        value = int.from_bytes(data, "little")
        if self.length % 2:
            value <<= 8
        self._nonzero = self._nonzero or value != 0
        self._residue = (self._residue + value) % 0xFFFF
        self.length += len(data)

    def value(self) -> int:
        folded = 0xFFFF if self._residue == 0 and self._nonzero else self._residue
        return (folded + self.length) & 0xFFFFFFFF


def pe_checksum(data: Buffer, checksum_offset: int) -> int:
    """The checksum of a whole image held in ``data`` (its CheckSum field read as zero)."""
    total = Checksum()
    chunk = 1 << 20
    for start in range(0, len(data), chunk):
        part = bytearray(data[start : start + chunk])
        for at in range(checksum_offset, checksum_offset + 4):
            if start <= at < start + len(part):
                part[at - start] = 0
        total.update(part)
    return total.value()
