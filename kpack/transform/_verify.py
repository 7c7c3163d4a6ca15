"""Verify a planned transform before anything is written (kpack.md §3 step 5, §6).

Private to :mod:`kpack.transform`. The planned result is read back through the
:class:`~kpack.elf.ElfEdit` view: first the structural verifier
(:func:`kpack.elf.verify_elf`, which parses with pyelftools), then what the transform
promises, re-read with our own reader: the wrappers, the marker, every relocation, the
program headers and sections against the source, and a sample of every moved section.
All problems are collected and raised together.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import msgpack

from kpack.elf import verify_elf
from kpack.elf.reader import ElfLayout, Reader, open_reader, read_layout
from kpack.elf.relocations import (
    R_X86_64_64,
    R_X86_64_IRELATIVE,
    R_X86_64_RELATIVE,
    Relocations,
    read_relocations,
    read_symbol_values,
    read_words,
)
from kpack.elf.structs import (
    PF_R,
    PT_LOAD,
    PT_PHDR,
    SHF_ALLOC,
    SHT_DYNSYM,
    SHT_NOBITS,
    Phdr,
)
from kpack.errors import ElfError, TransformError
from kpack.hipfmt import FATBIN, HIPK, MARKER, SEGMENT, WRAPPER
from kpack.transform._layout import LaidOut
from kpack.transform._scan import FatLayout, Pointer
from kpack.transform._sections import SHT_SYMTAB

__all__ = ["verify_transform"]

log = logging.getLogger(__name__)

_SAMPLE = 64
_SYM_SIZE = 24  # an Elf64_Sym
#: Relocation types whose value is a symbol's address (not a TLS offset or a size).
_ADDRESS_TYPES = frozenset({R_X86_64_64, 5, 6, 7})  # 64, COPY, GLOB_DAT, JUMP_SLOT


def verify_transform(
    fat: FatLayout,
    laid: LaidOut,
    pointers: Sequence[Pointer],
    marker: bytes,
    expected_marker: Mapping[str, Any],
) -> list[str]:
    """Check the planned result of ``laid``; return warnings, raise on any problem."""
    name = f"{fat.path} (transformed)"
    with laid.edit.open() as view:
        try:
            warnings = verify_elf(view, name=name)
        except ElfError as exc:
            raise TransformError(
                "planned transform is structurally invalid", path=fat.path, problems=exc.problems
            ) from exc
        reader = Reader(view, name)
        after = read_layout(reader)
        problems = _sections(fat, laid, after)
        problems += _segments(fat, laid, after)
        problems += _marker(reader, after, laid, marker, expected_marker)
        problems += _wrappers(reader, after, fat, laid)
        problems += _relocations(reader, after, fat, laid, pointers)
        with open_reader(fat.path) as source:
            problems += _content(source, reader, fat, laid, after)
            problems += _symbols(source, reader, fat, laid, after)
    if problems:
        raise TransformError(
            "planned transform failed verification", path=fat.path, problems=problems
        )
    for warning in warnings:
        log.info("%s: %s", name, warning)
    return warnings


def _sections(fat: FatLayout, laid: LaidOut, after: ElfLayout) -> list[str]:
    """Every old section keeps its index and header but for the offset (and what the
    transform must change: ``.hip_fatbin``'s type, ``.shstrtab``'s size); the marker's
    header comes last."""
    before = fat.layout
    count = len(before.shdrs)
    problems = []
    if laid.section_order != (*range(count), None) or len(after.shdrs) != count + 1:
        problems.append("the old section headers are not kept in place with the marker last")
        return problems
    if after.ehdr.e_shstrndx != before.ehdr.e_shstrndx:
        problems.append(f"e_shstrndx {before.ehdr.e_shstrndx} became {after.ehdr.e_shstrndx}")
    b = after.shdrs[count]
    marker = (MARKER, SHF_ALLOC, laid.marker_vaddr, laid.marker_size)
    if (after.section_names[count], b.sh_flags, b.sh_addr, b.sh_size) != marker:
        problems.append(f"section {count} is not the planned marker {MARKER}")
    for index in range(1, count):
        a, b, name = before.shdrs[index], after.shdrs[index], before.section_names[index]
        want = replace(
            a,
            sh_type=SHT_NOBITS if index == fat.fatbin and laid.cut is not None else a.sh_type,
            sh_offset=b.sh_offset,
            sh_size=b.sh_size if index == before.ehdr.e_shstrndx else a.sh_size,
        )
        if after.section_names[index] != name or b != want:
            problems.append(f"section {index} ({name!r}): header fields changed")
    return problems


def _segments(fat: FatLayout, laid: LaidOut, after: ElfLayout) -> list[str]:
    """Old segments unchanged but for file offsets; the split covers the old PT_LOAD."""
    before, cut = fat.layout, laid.cut
    container = cut.container if cut is not None else None
    expected = []
    for index, p in enumerate(before.phdrs):
        offset = cut.shift(p.p_offset) if cut is not None else p.p_offset
        if index != container and p.p_type != PT_PHDR:
            expected.append(replace(p, p_offset=-1 if offset is None else offset))
    new_load = next(
        (p for p in after.phdrs if p.p_type == PT_LOAD and p.p_vaddr == laid.load.vaddr), None
    )
    problems = []
    if new_load is None or new_load.p_flags != PF_R or after.segments(PT_LOAD)[-1] != new_load:
        problems.append("expected one new read-only PT_LOAD after the others")
    elif not new_load.contains_vaddr(laid.marker_vaddr, laid.marker_size):
        problems.append("the new PT_LOAD does not map the marker")
    rest = [p for p in after.phdrs if p.p_type != PT_PHDR and p is not new_load]
    if container is None:
        pieces = []
    else:
        old = before.phdrs[container]
        pieces = [p for p in rest if p.p_type == PT_LOAD and old.p_vaddr <= p.p_vaddr < old.mem_end]
        problems += _pieces(old, pieces)
    if [p for p in rest if p not in pieces] != expected:
        problems.append("a segment other than the split PT_LOAD changed")
    return problems


def _pieces(old: Phdr, pieces: list[Phdr]) -> list[str]:
    spans = [(p.p_vaddr, p.mem_end) for p in pieces]
    joined = all(a[1] == b[0] for a, b in itertools.pairwise(spans))
    if not spans or not joined or (spans[0][0], spans[-1][1]) != (old.p_vaddr, old.mem_end):
        return [f"split pieces {spans} do not cover {old.p_vaddr:#x}..{old.mem_end:#x}"]
    if any((p.p_flags, p.p_align) != (old.p_flags, old.p_align) for p in pieces):
        return ["split pieces changed flags or alignment"]
    return []


def _marker(
    reader: Reader,
    after: ElfLayout,
    laid: LaidOut,
    marker: bytes,
    expected: Mapping[str, Any],
) -> list[str]:
    offset = after.vaddr_to_offset(laid.marker_vaddr, len(marker))
    if offset is None:
        return [f"marker at {laid.marker_vaddr:#x} is not file-backed"]
    raw = reader.read_at(offset, len(marker), MARKER)
    try:
        decoded = msgpack.unpackb(raw, raw=False, strict_map_key=True)
    except (ValueError, msgpack.UnpackException) as exc:
        return [f"marker does not decode: {exc}"]
    if raw != marker or decoded != dict(expected) or list(decoded) != list(expected):
        return [f"marker reads {decoded!r}, expected {dict(expected)!r}"]
    return []


def _wrappers(reader: Reader, after: ElfLayout, fat: FatLayout, laid: LaidOut) -> list[str]:
    index = after.section_index(SEGMENT)
    if index is None:
        return [f"{SEGMENT} is missing"]
    shdr = after.shdrs[index]
    raw = reader.read_at(shdr.sh_offset, shdr.sh_size, SEGMENT)
    problems = []
    for old, (magic, version, binary, reserved1) in zip(
        fat.wrappers, WRAPPER.iter_unpack(raw), strict=True
    ):
        if (magic, version, binary, reserved1 & 0xFFFFFFFF) != (
            HIPK,
            old.version,
            laid.marker_vaddr,
            old.index,
        ):
            problems.append(
                f"wrapper {old.index} reads magic {magic:#x} binary {binary:#x} "
                f"reserved1 {reserved1:#x}"
            )
    return problems


def _relocations(
    reader: Reader, after: ElfLayout, fat: FatLayout, laid: LaidOut, pointers: Sequence[Pointer]
) -> list[str]:
    relocs = read_relocations(reader, after)
    by_offset = relocs.find(w.pointer_vaddr for w in fat.wrappers)
    relr = set(relocs.relr)
    problems = []
    for wrapper, pointer in zip(fat.wrappers, pointers, strict=True):
        where = wrapper.pointer_vaddr
        rela = by_offset.get(where)
        if pointer.kind == "rela":
            if rela is None or (rela.r_type, rela.r_sym, rela.r_addend) != (
                R_X86_64_RELATIVE,
                0,
                laid.marker_vaddr,
            ):
                problems.append(f"wrapper {wrapper.index}: RELA entry is {rela}")
        elif rela is not None or (where in relr) != (pointer.kind == "relr"):
            problems.append(f"wrapper {wrapper.index}: relocation changed kind")
    return problems + _into_old_range(reader, after, fat, relocs)


def _into_old_range(
    reader: Reader, after: ElfLayout, fat: FatLayout, relocs: Relocations
) -> list[str]:
    """Step 5: no relocation of any type writes into or points into the old section.

    The columns are scanned for candidates (a place in the range, an addend in it, or a
    symbol-relative entry landing in it); each candidate is then judged by its type.
    """
    shdr = fat.fatbin_shdr
    lo, hi = shdr.sh_addr, shdr.sh_addr + shdr.sh_size
    infos, addends = relocs.r_info, relocs.r_addend
    candidates = {i for i, place in enumerate(relocs.r_offset) if lo <= place < hi}
    candidates.update(i for i, addend in enumerate(addends) if lo <= addend < hi)
    symbolic = [i for i, info in enumerate(infos) if info >> 32]
    symbols = read_symbol_values(reader, after, {infos[i] >> 32 for i in symbolic})
    for i in symbolic:
        value = symbols.get(infos[i] >> 32)
        if value is not None and lo <= value + addends[i] < hi:
            candidates.add(i)
    problems = []
    for i in sorted(candidates):
        r = relocs.entry(i)
        target: int | None = None
        if r.r_type in (R_X86_64_RELATIVE, R_X86_64_IRELATIVE) or (
            r.r_type == R_X86_64_64 and not r.r_sym
        ):
            target = r.r_addend
        elif r.r_type in _ADDRESS_TYPES and r.r_sym in symbols:
            target = symbols[r.r_sym] + r.r_addend
        if lo <= r.r_offset < hi or (target is not None and lo <= target < hi):
            problems.append(
                f"relocation type {r.r_type} at {r.r_offset:#x} still points into {FATBIN} "
                f"({lo:#x}..{hi:#x})"
            )
    words = read_words(reader, after, relocs.relr)
    for address, value in words.items():
        if lo <= address < hi or lo <= value < hi:
            problems.append(
                f"RELR relocation at {address:#x} still points into {FATBIN} ({value:#x})"
            )
    return problems


def _content(
    source: Reader, result: Reader, fat: FatLayout, laid: LaidOut, after: ElfLayout
) -> list[str]:
    """The first and last bytes of every section that moved or stayed, unpatched, agree."""
    patched = [(offset, offset + len(data)) for offset, data in laid.edit.patches]
    problems = []
    for new, old in enumerate(laid.section_order):
        if old is None or old in (fat.fatbin, fat.layout.ehdr.e_shstrndx):
            continue
        a, b = fat.layout.shdrs[old], after.shdrs[new]
        if a.sh_type == SHT_NOBITS or not a.sh_size:
            continue
        if any(lo < a.sh_offset + a.sh_size and a.sh_offset < hi for lo, hi in patched):
            continue
        n = min(_SAMPLE, a.sh_size)
        for delta in {0, a.sh_size - n}:
            if source.read_at(a.sh_offset + delta, n, "section") != result.read_at(
                b.sh_offset + delta, n, "section"
            ):
                problems.append(f"section {fat.layout.section_names[old]!r}: content moved wrongly")
                break
    return problems


def _symbols(
    source: Reader, result: Reader, fat: FatLayout, laid: LaidOut, after: ElfLayout
) -> list[str]:
    """``.symtab`` and ``.dynsym`` keep their bytes: no section index moved."""
    before = fat.layout
    problems = []
    for index, a in enumerate(before.shdrs):
        if a.sh_type not in (SHT_SYMTAB, SHT_DYNSYM) or index >= len(after.shdrs):
            continue
        b = after.shdrs[index]
        old_raw = source.read_at(a.sh_offset, a.sh_size, "symbol table")
        new_raw = result.read_at(b.sh_offset, b.sh_size, "symbol table")
        if old_raw != new_raw:
            number = _first_difference(old_raw, new_raw) // _SYM_SIZE
            problems.append(f"{before.section_names[index]} symbol {number} changed")
    return problems


def _first_difference(a: bytes, b: bytes) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), len(a))
