"""Seek-based reading of ELF64 little-endian headers into a frozen :class:`ElfLayout`.

Only the file header, the program-header table, the dynamic table, the section-header
table and ``.shstrtab`` are read, each with one bounded read. Nothing here reads a
file's body, so scanning a 1.3 GB library costs a few kilobytes of I/O.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from kpack.common.frozen import frozen
from kpack.elf._edit import ElfEdit
from kpack.elf.structs import (
    DT_NULL,
    DT_STRSZ,
    DT_STRTAB,
    DYN,
    DYN_SIZE,
    EHDR_SIZE,
    ELF_MAGIC,
    ELFCLASS64,
    ELFDATA2LSB,
    PHDR_SIZE,
    PN_XNUM,
    PT_DYNAMIC,
    PT_LOAD,
    SHDR_SIZE,
    SHN_XINDEX,
    Ehdr,
    Phdr,
    Shdr,
)
from kpack.errors import ElfError

#: Upper bound for any single table we read into memory (dynamic, .shstrtab, .dynstr).
MAX_TABLE = 256 << 20


@frozen(kw_only=True)
class ElfLayout:
    """The structural view of one ELF64 LE file: headers and the dynamic table."""

    name: str
    size: int
    ehdr: Ehdr
    phdrs: tuple[Phdr, ...]
    shdrs: tuple[Shdr, ...]
    section_names: tuple[str, ...]
    dynamic: tuple[tuple[int, int], ...]  # every slot of PT_DYNAMIC, trailing DT_NULLs too

    def segments(self, p_type: int) -> list[Phdr]:
        return [p for p in self.phdrs if p.p_type == p_type]

    def first(self, p_type: int) -> Phdr | None:
        found = self.segments(p_type)
        return found[0] if found else None

    def dyn_entries(self) -> list[tuple[int, int]]:
        """The dynamic entries up to (excluding) the first ``DT_NULL``."""
        out: list[tuple[int, int]] = []
        for tag, value in self.dynamic:
            if tag == DT_NULL:
                break
            out.append((tag, value))
        return out

    def dyn_values(self, tag: int) -> list[int]:
        return [v for t, v in self.dyn_entries() if t == tag]

    def dyn_value(self, tag: int) -> int | None:
        values = self.dyn_values(tag)
        return values[0] if values else None

    def vaddr_to_offset(self, vaddr: int, size: int = 0) -> int | None:
        """File offset of ``vaddr`` if ``size`` bytes there are file-backed by a PT_LOAD."""
        for p in self.phdrs:
            if p.p_type == PT_LOAD and p.contains_vaddr(vaddr, size):
                return p.p_offset + (vaddr - p.p_vaddr)
        return None

    def section_index(self, name: str) -> int | None:
        for index, section_name in enumerate(self.section_names):
            if section_name == name and index > 0:
                return index
        return None

    def dynstr_range(self) -> tuple[int, int]:
        """``(file offset, size)`` of the table named by DT_STRTAB / DT_STRSZ."""
        strtab = self.dyn_value(DT_STRTAB)
        strsz = self.dyn_value(DT_STRSZ)
        if strtab is None or strsz is None:
            raise ElfError("dynamic table lacks DT_STRTAB or DT_STRSZ", path=self.name)
        offset = self.vaddr_to_offset(strtab, strsz)
        if offset is None or offset + strsz > self.size:
            raise ElfError(
                f"DT_STRTAB {strtab:#x} (+{strsz:#x}) is not file-backed by a PT_LOAD",
                path=self.name,
            )
        return offset, strsz


class Reader:
    """Bounded random access to a binary stream, raising :class:`ElfError` on short data."""

    def __init__(self, stream: BinaryIO, name: str) -> None:
        self.stream = stream
        self.name = name
        try:
            self.size = stream.seek(0, os.SEEK_END)
        except OSError as exc:
            raise ElfError(f"cannot seek: {exc}", path=name) from exc

    def read_at(self, offset: int, size: int, what: str) -> bytes:
        if offset < 0 or size < 0 or offset + size > self.size:
            raise ElfError(
                f"{what} at {offset:#x} (+{size:#x}) lies beyond the end of the file "
                f"({self.size:#x} bytes); truncated or corrupt",
                path=self.name,
            )
        if size > MAX_TABLE:
            raise ElfError(f"{what} is implausibly large ({size:#x} bytes)", path=self.name)
        try:
            self.stream.seek(offset)
            data = self.stream.read(size)
        except OSError as exc:
            raise ElfError(f"cannot read {what}: {exc}", path=self.name) from exc
        if len(data) != size:
            raise ElfError(f"short read of {what} at {offset:#x}", path=self.name)
        return data

    def read_cstring(self, offset: int, end: int, what: str) -> bytes:
        """The NUL-terminated bytes at ``offset``; the NUL must come before ``end``."""
        parts: list[bytes] = []
        pos = offset
        while pos < end:
            chunk = self.read_at(pos, min(256, end - pos), what)
            nul = chunk.find(b"\0")
            if nul >= 0:
                parts.append(chunk[:nul])
                return b"".join(parts)
            parts.append(chunk)
            pos += len(chunk)
        raise ElfError(f"{what} at {offset:#x} is not NUL-terminated", path=self.name)


def read_ident(reader: Reader) -> bytes:
    """Up to the first 16 bytes of the file (fewer if the file is shorter)."""
    return reader.read_at(0, min(16, reader.size), "e_ident")


def read_layout(reader: Reader, *, with_sections: bool = True) -> ElfLayout:
    """Read headers, program headers, dynamic table and (optionally) section headers."""
    name = reader.name
    ident = read_ident(reader)
    if ident[:4] != ELF_MAGIC:
        raise ElfError("not an ELF file", path=name)
    if len(ident) < 6 or ident[4] != ELFCLASS64 or ident[5] != ELFDATA2LSB:
        raise ElfError(
            f"unsupported ELF class/data {ident[4:6].hex()} (only ELF64 little-endian)", path=name
        )
    ehdr = Ehdr.unpack(reader.read_at(0, EHDR_SIZE, "ELF header"))
    shdrs, names = _read_sections(reader, ehdr) if with_sections else ((), ())
    phdrs = _read_phdrs(reader, ehdr)
    dynamic = _read_dynamic(reader, phdrs)
    return ElfLayout(
        name=name,
        size=reader.size,
        ehdr=ehdr,
        phdrs=phdrs,
        shdrs=shdrs,
        section_names=names,
        dynamic=dynamic,
    )


def _read_phdrs(reader: Reader, ehdr: Ehdr) -> tuple[Phdr, ...]:
    if ehdr.e_phnum == 0:
        return ()
    if ehdr.e_phnum == PN_XNUM:
        raise ElfError("extended program-header numbering (PN_XNUM) unsupported", path=reader.name)
    if ehdr.e_phentsize != PHDR_SIZE:
        raise ElfError(f"e_phentsize is {ehdr.e_phentsize}, expected 56", path=reader.name)
    raw = reader.read_at(ehdr.e_phoff, ehdr.e_phnum * PHDR_SIZE, "program-header table")
    phdrs = tuple(Phdr.unpack(raw[i : i + PHDR_SIZE]) for i in range(0, len(raw), PHDR_SIZE))
    for index, phdr in enumerate(phdrs):
        if phdr.p_type == PT_LOAD and phdr.p_memsz < phdr.p_filesz:
            # the dynamic loader refuses such a file too ("p_memsz < p_filesz")
            raise ElfError(
                f"program header {index}: PT_LOAD p_memsz {phdr.p_memsz:#x} < p_filesz "
                f"{phdr.p_filesz:#x}",
                path=reader.name,
            )
    return phdrs


def _read_dynamic(reader: Reader, phdrs: tuple[Phdr, ...]) -> tuple[tuple[int, int], ...]:
    dynamics = [p for p in phdrs if p.p_type == PT_DYNAMIC]
    if not dynamics:
        return ()
    if len(dynamics) > 1:
        raise ElfError("more than one PT_DYNAMIC", path=reader.name)
    dyn = dynamics[0]
    count = dyn.p_filesz // DYN_SIZE
    raw = reader.read_at(dyn.p_offset, count * DYN_SIZE, "dynamic table (PT_DYNAMIC)")
    entries = tuple(DYN.unpack_from(raw, i * DYN_SIZE) for i in range(count))
    if not any(tag == DT_NULL for tag, _ in entries):
        raise ElfError("dynamic table has no DT_NULL terminator", path=reader.name)
    return entries


def _read_sections(reader: Reader, ehdr: Ehdr) -> tuple[tuple[Shdr, ...], tuple[str, ...]]:
    if ehdr.e_shoff == 0:
        return (), ()
    if ehdr.e_shentsize != SHDR_SIZE:
        raise ElfError(f"e_shentsize is {ehdr.e_shentsize}, expected 64", path=reader.name)
    first = Shdr.unpack(reader.read_at(ehdr.e_shoff, SHDR_SIZE, "section header 0"))
    shnum = ehdr.e_shnum or first.sh_size
    shstrndx = first.sh_link if ehdr.e_shstrndx == SHN_XINDEX else ehdr.e_shstrndx
    raw = reader.read_at(ehdr.e_shoff, shnum * SHDR_SIZE, "section-header table")
    shdrs = tuple(Shdr.unpack(raw[i : i + SHDR_SIZE]) for i in range(0, len(raw), SHDR_SIZE))
    if shstrndx == 0:
        return shdrs, ("",) * len(shdrs)
    if shstrndx >= len(shdrs):
        raise ElfError(f"e_shstrndx {shstrndx} >= section count {len(shdrs)}", path=reader.name)
    strtab = shdrs[shstrndx]
    table = reader.read_at(strtab.sh_offset, strtab.sh_size, "section-name table (.shstrtab)")
    names = []
    for index, shdr in enumerate(shdrs):
        if shdr.sh_name >= len(table) and (index > 0 or shdr.sh_name):
            raise ElfError(
                f"section {index}: sh_name {shdr.sh_name:#x} beyond .shstrtab "
                f"({len(table):#x} bytes)",
                path=reader.name,
            )
        end = table.find(b"\0", shdr.sh_name)
        names.append(table[shdr.sh_name : end if end >= 0 else len(table)].decode("latin-1"))
    return shdrs, tuple(names)


def open_binary(path: Path) -> BinaryIO:
    """Open a regular file for reading without following a final symlink (tests patch this)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    return os.fdopen(fd, "rb", buffering=0)


def is_regular_file(path: Path) -> bool:
    """True for a regular file; false for symlinks (not followed), directories, devices."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError as exc:
        raise ElfError(f"cannot stat: {exc.strerror}", path=path) from exc


@contextmanager
def open_reader(path: Path | ElfEdit) -> Iterator[Reader]:
    """A :class:`Reader` on ``path`` (or on the result of a planned edit); OS errors become
    :class:`ElfError`."""
    if isinstance(path, ElfEdit):
        with path.open() as view:
            yield Reader(view, f"{os.fspath(path.path)} (edited)")
        return
    try:
        stream = open_binary(path)
    except OSError as exc:
        raise ElfError(f"cannot open: {exc.strerror}", path=path) from exc
    with stream:
        yield Reader(stream, os.fspath(path))
