"""Structural verification of an ELF64 file (packages.md §21 E4, kpack.md §6).

Parsing here goes through pyelftools, not through :mod:`kpack.elf.reader`, so that the
writer and its checker do not share a reader: its record structures (``ELFStructs``: the
header, program and section headers, dynamic entries), read the way its ``ELFFile`` reads
them. ``ELFFile`` itself is not used: importing it imports pyelftools' DWARF, EHABI and
section readers, which cost a split of a small wheel more than its verification; and
pyelftools is imported by the first file verified.
Every problem is collected; errors are raised together in one :class:`ElfError`,
warnings are returned.
"""

from __future__ import annotations

import io
import itertools
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from kpack.common.frozen import frozen
from kpack.errors import ElfError

if TYPE_CHECKING:
    from elftools.elf.structs import ELFStructs

__all__ = ["verify_elf"]

_PAGE = 0x1000
_UNIQUE = (
    "PT_PHDR",
    "PT_INTERP",
    "PT_DYNAMIC",
    "PT_GNU_EH_FRAME",
    "PT_GNU_STACK",
    "PT_GNU_RELRO",
    "PT_TLS",
)
#: What seeks past the end of a stream and pyelftools (its ``ELFError`` too) raise on
#: malformed input.
_PARSE_ERRORS = (struct.error, OSError, ValueError, LookupError, TypeError, OverflowError)
_STRING_TAGS = ("DT_NEEDED", "DT_SONAME", "DT_RPATH", "DT_RUNPATH")


@frozen(kw_only=True)
class _Seg:
    index: int
    type: str
    flags: int
    offset: int
    vaddr: int
    filesz: int
    memsz: int
    align: int

    @classmethod
    def of(cls, index: int, h: Any) -> _Seg:
        """From pyelftools' parsed ``Elf_Phdr`` ``h``."""
        return cls(
            index=index,
            type=str(h.p_type),
            flags=h.p_flags,
            offset=h.p_offset,
            vaddr=h.p_vaddr,
            filesz=h.p_filesz,
            memsz=h.p_memsz,
            align=h.p_align,
        )

    @property
    def file_end(self) -> int:
        return self.offset + self.filesz

    def maps_file(self, offset: int, size: int) -> bool:
        return self.offset <= offset and offset + size <= self.file_end


@frozen(kw_only=True)
class _Sec:
    index: int
    name: int
    type: str
    flags: int
    addr: int
    offset: int
    size: int
    addralign: int

    @classmethod
    def of(cls, index: int, h: Any) -> _Sec:
        """From pyelftools' parsed ``Elf_Shdr`` ``h``."""
        return cls(
            index=index,
            name=h.sh_name,
            type=str(h.sh_type),
            flags=h.sh_flags,
            addr=h.sh_addr,
            offset=h.sh_offset,
            size=h.sh_size,
            addralign=h.sh_addralign,
        )


@frozen(kw_only=True)
class _Facts:
    size: int
    header: Any
    segs: tuple[_Seg, ...]
    secs: tuple[_Sec, ...]
    dynamic: tuple[tuple[str, int], ...]  # up to and excluding DT_NULL
    dynamic_terminated: bool
    dynstr_last: bytes  # last byte of the DT_STRTAB table (b"" if unknown)


def verify_elf(f: BinaryIO | Path, *, name: str) -> list[str]:
    """Check ``f`` (an open seekable stream or a path); return warnings.

    Raises :class:`ElfError` whose ``problems`` list every error found.
    """
    with _stream(f, name) as stream:
        facts = _load(stream, name)
    errors: list[str] = []
    warnings: list[str] = []
    for check in (_check_tables, _check_loads, _check_phdr, _check_dynamic, _check_sections):
        check(facts, errors, warnings)
    if errors:
        raise ElfError(f"{len(errors)} structural error(s)", path=name, problems=errors)
    return warnings


@contextmanager
def _stream(f: BinaryIO | Path, name: str) -> Iterator[BinaryIO]:
    if not isinstance(f, (str, os.PathLike)):
        yield f
        return
    try:
        stream = open(f, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise ElfError(f"cannot open: {exc.strerror}", path=name) from exc
    with stream:
        yield stream


def _load(stream: BinaryIO, name: str) -> _Facts:
    try:
        return _parse(stream)
    except ElfError:
        raise
    except (_elftools_error(), *_PARSE_ERRORS) as exc:
        raise ElfError(f"cannot parse ELF structure: {exc}", path=name) from exc


def _elftools_error() -> type[Exception]:
    from elftools.common.exceptions import ELFError

    return ELFError


def _structs(stream: BinaryIO) -> tuple[ELFStructs, Any, int]:
    """pyelftools' structures for ``stream``'s ELF64 file, its parsed header and the
    stream's length; errors as pyelftools' ``ELFFile`` raises them."""
    from elftools.common.exceptions import ELFError
    from elftools.common.utils import struct_parse
    from elftools.elf.structs import ELFStructs

    stream.seek(0, io.SEEK_END)
    size = stream.tell()
    stream.seek(0)
    ident = stream.read(6)
    if ident[:4] != b"\x7fELF":
        raise ELFError("Magic number does not match")
    if ident[4:5] not in (b"\x01", b"\x02"):
        raise ELFError(f"Invalid EI_CLASS {ident[4:5]!r}")
    if ident[5:6] not in (b"\x01", b"\x02"):
        raise ELFError(f"Invalid EI_DATA {ident[5:6]!r}")
    if ident[4:5] != b"\x02":
        raise ElfError("verification supports ELF64 only")
    structs = ELFStructs(little_endian=ident[5:6] == b"\x01", elfclass=64)
    structs.create_basic_structs()
    hdr = struct_parse(structs.Elf_Ehdr, stream, stream_pos=0)
    structs.create_advanced_structs(hdr.e_type, hdr.e_machine, hdr.e_ident.EI_OSABI)
    return structs, hdr, size


def _section_zero(structs: ELFStructs, hdr: Any, stream: BinaryIO, size: int) -> Any:
    """Section header 0, which holds the counts too large for the ELF header."""
    from elftools.common.exceptions import ELFError, ELFParseError
    from elftools.common.utils import struct_parse

    if hdr.e_shoff > 0 and hdr.e_shentsize < structs.Elf_Shdr.sizeof():
        raise ELFError(f"Too small e_shentsize: {hdr.e_shentsize}")
    if hdr.e_shoff > size:
        raise ELFParseError(f"Reading section 0 at offset {hdr.e_shoff} past EOF {size}")
    return struct_parse(structs.Elf_Shdr, stream, stream_pos=hdr.e_shoff)


def _counts(structs: ELFStructs, hdr: Any, stream: BinaryIO, size: int) -> tuple[int, int]:
    """(program headers, section headers), with the escapes of counts over 0xfffe."""
    segments, sections = hdr.e_phnum, hdr.e_shnum
    if hdr.e_shoff == 0:
        sections = 0
    elif sections == 0:
        sections = _section_zero(structs, hdr, stream, size).sh_size
    if segments >= 0xFFFF:  # PN_XNUM: the count is section 0's sh_info
        segments = _section_zero(structs, hdr, stream, size).sh_info
    return segments, sections


def _parse(stream: BinaryIO) -> _Facts:
    from elftools.common.utils import struct_parse

    structs, hdr, size = _structs(stream)
    num_segments, num_sections = _counts(structs, hdr, stream, size)
    segs = tuple(
        _Seg.of(i, h)
        for i, h in (
            (i, struct_parse(structs.Elf_Phdr, stream, hdr.e_phoff + i * hdr.e_phentsize))
            for i in range(num_segments)
        )
    )
    secs = tuple(
        _Sec.of(i, h)
        for i, h in (
            (i, struct_parse(structs.Elf_Shdr, stream, hdr.e_shoff + i * hdr.e_shentsize))
            for i in range(num_sections)
        )
    )
    dynamic: list[tuple[str, int]] = []
    terminated = False
    dyn = next((s for s in segs if s.type == "PT_DYNAMIC"), None)
    if dyn is not None and dyn.file_end <= size:
        for i in range(dyn.filesz // 16):
            entry = struct_parse(structs.Elf_Dyn, stream, dyn.offset + i * 16)
            if entry.d_tag == "DT_NULL":
                terminated = True
                break
            dynamic.append((str(entry.d_tag), entry.d_val))
    facts = _Facts(
        size=size,
        header=hdr,
        segs=segs,
        secs=secs,
        dynamic=tuple(dynamic),
        dynamic_terminated=terminated,
        dynstr_last=b"",
    )
    strtab, strsz = _dyn(facts, "DT_STRTAB"), _dyn(facts, "DT_STRSZ")
    if strtab is not None and strsz:
        offset = _file_offset(segs, strtab, strsz)
        if offset is not None and offset + strsz <= size:
            stream.seek(offset + strsz - 1)
            facts = replace(facts, dynstr_last=stream.read(1))
    return facts


def _dyn(facts: _Facts, tag: str) -> int | None:
    return next((v for t, v in facts.dynamic if t == tag), None)


def _loads(facts: _Facts) -> list[_Seg]:
    return [s for s in facts.segs if s.type == "PT_LOAD"]


def _file_offset(segs: tuple[_Seg, ...], vaddr: int, size: int) -> int | None:
    for s in segs:
        if s.type == "PT_LOAD" and s.vaddr <= vaddr and vaddr + size <= s.vaddr + s.filesz:
            return s.offset + vaddr - s.vaddr
    return None


def _overlap(a: int, a_size: int, b: int, b_size: int) -> bool:
    return a < b + b_size and b < a + a_size


def _check_tables(facts: _Facts, errors: list[str], warnings: list[str]) -> None:
    hdr = facts.header
    ph = (hdr.e_phoff, len(facts.segs) * hdr.e_phentsize)
    sh = (hdr.e_shoff, len(facts.secs) * hdr.e_shentsize)
    for what, (off, size) in (("program-header", ph), ("section-header", sh)):
        if size and off + size > facts.size:
            errors.append(f"{what} table at {off:#x} (+{size:#x}) extends past end of file")
        if size and off < hdr.e_ehsize:
            errors.append(f"{what} table at {off:#x} overlaps the ELF header")
    if ph[1] and sh[1] and _overlap(*ph, *sh):
        errors.append(f"section-header table {sh[0]:#x} overlaps program-header table {ph[0]:#x}")
    if ph[1] and hdr.e_phentsize != 56:
        errors.append(f"e_phentsize {hdr.e_phentsize} != 56")


def _check_loads(facts: _Facts, errors: list[str], warnings: list[str]) -> None:
    loads = _loads(facts)
    for s in loads:
        tag = f"PT_LOAD[{s.index}] (offset {s.offset:#x}, vaddr {s.vaddr:#x})"
        if s.offset % _PAGE != s.vaddr % _PAGE:
            errors.append(f"{tag}: p_offset % 4096 != p_vaddr % 4096")
        elif s.align > 1 and (s.offset - s.vaddr) % s.align:
            errors.append(f"{tag}: p_offset not congruent to p_vaddr mod p_align {s.align:#x}")
        if s.filesz > s.memsz:
            errors.append(f"{tag}: p_filesz {s.filesz:#x} > p_memsz {s.memsz:#x}")
        if s.file_end > facts.size:
            errors.append(f"{tag}: file range ends past end of file")
    for a, b in itertools.pairwise(loads):
        if b.vaddr < a.vaddr:
            errors.append(f"PT_LOAD[{b.index}] is not in ascending p_vaddr order")
    for i, a in enumerate(loads):
        for b in loads[i + 1 :]:
            pair = f"PT_LOAD[{a.index}] and PT_LOAD[{b.index}]"
            if a.filesz and b.filesz and _overlap(a.offset, a.filesz, b.offset, b.filesz):
                errors.append(f"{pair}: file ranges overlap")
            if a.offset == b.offset and (a.filesz == 0 or b.filesz == 0):
                errors.append(f"{pair}: share p_offset {a.offset:#x} and one has p_filesz 0")
            if a.memsz and b.memsz and _overlap(a.vaddr, a.memsz, b.vaddr, b.memsz):
                errors.append(f"{pair}: memory ranges overlap")
    if loads and loads[0].flags & 2:
        warnings.append(f"first PT_LOAD[{loads[0].index}] is writable (rejected by old kernels)")
    for kind in _UNIQUE:
        count = sum(1 for s in facts.segs if s.type == kind)
        if count > 1:
            errors.append(f"{count} {kind} segments (must be unique)")
    first_load = loads[0].index if loads else len(facts.segs)
    for s in facts.segs:
        if s.type in ("PT_PHDR", "PT_INTERP") and s.index > first_load:
            warnings.append(f"{s.type}[{s.index}] comes after the first PT_LOAD (gABI order)")


def _check_phdr(facts: _Facts, errors: list[str], warnings: list[str]) -> None:
    hdr = facts.header
    loads = _loads(facts)
    size = len(facts.segs) * 56
    if not facts.segs:
        return
    cover = next((s for s in loads if s.maps_file(hdr.e_phoff, size)), None)
    if cover is None:
        errors.append(f"program-header table at e_phoff {hdr.e_phoff:#x} is not inside a PT_LOAD")
    for s in (s for s in facts.segs if s.type == "PT_PHDR"):
        if s.offset != hdr.e_phoff:
            errors.append(f"PT_PHDR p_offset {s.offset:#x} != e_phoff {hdr.e_phoff:#x}")
        if s.filesz < size or s.memsz < size:
            errors.append(f"PT_PHDR size {s.filesz:#x} is smaller than e_phnum*56 = {size:#x}")
        elif s.filesz != size:
            warnings.append(f"PT_PHDR size {s.filesz:#x} != e_phnum*56 = {size:#x} (spare slots)")
        home = next((ld for ld in loads if ld.offset <= s.offset < ld.file_end), None)
        if home is None:
            errors.append("PT_PHDR is not covered by a PT_LOAD")
            continue
        if s.offset + s.filesz > home.file_end or s.offset + s.memsz > home.file_end:
            errors.append(
                f"PT_PHDR ({s.offset:#x}+{max(s.filesz, s.memsz):#x}) extends past the p_filesz "
                f"of its covering PT_LOAD[{home.index}] (ends {home.file_end:#x})"
            )
        if s.vaddr - s.offset != home.vaddr - home.offset:
            errors.append(f"PT_PHDR p_vaddr {s.vaddr:#x} does not match PT_LOAD[{home.index}]")
    if cover is not None and loads and any(s.type == "PT_INTERP" for s in facts.segs):
        table_delta = cover.vaddr - cover.offset
        first_delta = loads[0].vaddr - loads[0].offset
        if table_delta != first_delta:
            errors.append(
                f"executable: program-header table has p_vaddr - p_offset {table_delta:#x} but "
                f"the first PT_LOAD has {first_delta:#x}; AT_PHDR = base + e_phoff is wrong on "
                "old kernels"
            )


def _check_dynamic(facts: _Facts, errors: list[str], warnings: list[str]) -> None:
    dyn = next((s for s in facts.segs if s.type == "PT_DYNAMIC"), None)
    if dyn is None:
        return
    if _file_offset(facts.segs, dyn.vaddr, dyn.filesz) != dyn.offset:
        errors.append("PT_DYNAMIC is not file-backed by a PT_LOAD at a consistent offset")
    if not facts.dynamic_terminated:
        errors.append("dynamic table has no DT_NULL terminator within PT_DYNAMIC")
    for sec in facts.secs:
        if sec.type == "SHT_DYNAMIC" and (sec.addr != dyn.vaddr or sec.offset != dyn.offset):
            errors.append(f"section {sec.index} (SHT_DYNAMIC) does not match PT_DYNAMIC")
    for tag in ("DT_RPATH", "DT_RUNPATH", "DT_SONAME"):
        if sum(1 for t, _ in facts.dynamic if t == tag) > 1:
            warnings.append(f"more than one {tag}")
    strtab, strsz = _dyn(facts, "DT_STRTAB"), _dyn(facts, "DT_STRSZ")
    if strtab is None or strsz is None:
        errors.append("dynamic table lacks DT_STRTAB or DT_STRSZ")
        return
    offset = _file_offset(facts.segs, strtab, strsz)
    if offset is None:
        errors.append(f"DT_STRTAB {strtab:#x} (+DT_STRSZ {strsz:#x}) is not inside a PT_LOAD")
    elif strsz and facts.dynstr_last != b"\0":
        errors.append("dynamic string table does not end with NUL")
    for tag, value in facts.dynamic:
        if tag in _STRING_TAGS and value >= strsz:
            errors.append(f"{tag} offset {value:#x} beyond DT_STRSZ {strsz:#x}")
    dynstr = [s for s in facts.secs if s.type == "SHT_STRTAB" and s.flags & 2 and s.addr == strtab]
    if facts.secs and not dynstr:
        errors.append(f"no SHF_ALLOC string-table section at DT_STRTAB {strtab:#x}")
    for sec in dynstr:
        if sec.size != strsz or (offset is not None and sec.offset != offset):
            errors.append(
                f"section {sec.index} at DT_STRTAB: offset {sec.offset:#x} size {sec.size:#x}, "
                f"dynamic table says offset {offset or 0:#x} size {strsz:#x}"
            )


def _check_sections(facts: _Facts, errors: list[str], warnings: list[str]) -> None:
    hdr = facts.header
    if not facts.secs:
        return
    shstrndx = hdr.e_shstrndx if hdr.e_shstrndx != 0xFFFF else None
    if shstrndx is None or shstrndx >= len(facts.secs):
        errors.append(f"e_shstrndx {hdr.e_shstrndx} is not a valid section index")
        limit = None
    else:
        limit = facts.secs[shstrndx].size
    for sec in facts.secs[1:]:
        tag = f"section {sec.index}"
        if limit is not None and sec.name >= limit:
            errors.append(f"{tag}: sh_name {sec.name:#x} beyond .shstrtab size {limit:#x}")
        if sec.type != "SHT_NOBITS" and sec.offset + sec.size > facts.size:
            errors.append(f"{tag}: extends past end of file")
        align = sec.addralign
        misaligned_offset = sec.type != "SHT_NOBITS" and sec.offset % max(align, 1)
        if align > 1 and (misaligned_offset or sec.addr % align):
            warnings.append(f"{tag}: offset/address not aligned to sh_addralign {align}")
        if sec.flags & 2 and sec.type != "SHT_NOBITS" and sec.size and hdr.e_type != "ET_REL":
            home = _file_offset(facts.segs, sec.addr, sec.size)
            if home is None:
                warnings.append(f"{tag}: SHF_ALLOC section at {sec.addr:#x} not in a PT_LOAD")
            elif home != sec.offset:
                errors.append(
                    f"{tag}: sh_offset {sec.offset:#x} but its address {sec.addr:#x} maps to "
                    f"file offset {home:#x}"
                )
