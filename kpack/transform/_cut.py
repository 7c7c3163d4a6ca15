"""Zero-paging of ``.hip_fatbin`` (kpack.md §3 step 6): which bytes go, and the headers after.

Private to :mod:`kpack.transform`. The removed range is the page-aligned interior of the
section, shortened so that a section ending on a page boundary keeps its last page and
so that every alignment of what moves down is preserved. The PT_LOAD holding the section
is split into up to three PT_LOADs (before and unaligned head / a zero-filled piece
with ``p_filesz`` 0 / after), so every address stays mapped.
"""

from __future__ import annotations

import math
from dataclasses import replace

from kpack.common.frozen import frozen
from kpack.elf.structs import PAGE, PT_LOAD, SHT_NOBITS, Phdr, Shdr, align_up
from kpack.errors import TransformError
from kpack.transform._scan import FatLayout

__all__ = ["Cut", "container_of", "cut_phdrs", "cut_shdrs", "must", "plan_cut"]


@frozen
class Cut:
    """The source byte range ``[start, end)`` removed from the file."""

    start: int
    end: int
    container: int  # index of the PT_LOAD that holds .hip_fatbin

    @property
    def size(self) -> int:
        return self.end - self.start

    def shift(self, offset: int) -> int | None:
        """Result offset of source ``offset``; ``None`` inside the removed interior."""
        if offset <= self.start:
            return offset
        if offset >= self.end:
            return offset - self.size
        return None


def must(value: int | None, what: str, fat: FatLayout) -> int:
    if value is None:
        raise TransformError(f"{what} lies inside the removed part of .hip_fatbin", path=fat.path)
    return value


def container_of(fat: FatLayout) -> int:
    """Index of the PT_LOAD whose file-backed bytes hold all of ``.hip_fatbin``."""
    shdr = fat.fatbin_shdr
    for index, p in enumerate(fat.layout.phdrs):
        if (
            p.p_type == PT_LOAD
            and p.p_offset <= shdr.sh_offset
            and shdr.sh_offset + shdr.sh_size <= p.file_end
            and p.p_vaddr - p.p_offset == shdr.sh_addr - shdr.sh_offset
        ):
            return index
    raise TransformError(
        f".hip_fatbin ({shdr.sh_offset:#x}+{shdr.sh_size:#x} at {shdr.sh_addr:#x}) is not "
        "file-backed by one PT_LOAD",
        path=fat.path,
    )


def plan_cut(fat: FatLayout, container: int) -> Cut | None:
    """The page-aligned interior of ``.hip_fatbin`` that can go, or ``None``.

    A section that ends on a page boundary keeps its last page, so that the zero-size
    piece and the piece after it never share a file offset. The removed length is a
    multiple of every alignment of what moves (segments and sections after it).
    """
    layout = fat.layout
    shdr = fat.fatbin_shdr
    end_off = shdr.sh_offset + shdr.sh_size
    start = align_up(shdr.sh_offset, PAGE)
    end = end_off // PAGE * PAGE
    if end_off % PAGE == 0:
        end -= PAGE
    aligns = [PAGE, max(layout.phdrs[container].p_align, 1)]
    aligns += [max(p.p_align, 1) for p in layout.phdrs if p.p_offset >= end_off]
    aligns += [
        max(s.sh_addralign, 1)
        for s in layout.shdrs[1:]
        if s.sh_offset >= end_off and s.sh_type != SHT_NOBITS
    ]
    unit = math.lcm(*aligns)
    end = start + max(end - start, 0) // unit * unit
    if end <= start:
        return None
    for index, s in enumerate(layout.shdrs[1:], start=1):
        inside = start < s.sh_offset < end or (
            s.sh_type != SHT_NOBITS and s.sh_offset < end and start < s.sh_offset + s.sh_size
        )
        if index != fat.fatbin and s.sh_size and inside:
            raise TransformError(
                f"section {layout.section_names[index]!r} overlaps .hip_fatbin's interior",
                path=fat.path,
            )
    return Cut(start, end, container)


def cut_phdrs(fat: FatLayout, cut: Cut | None, container: int) -> list[Phdr]:
    """The program headers after the cut: the container split, later offsets moved down."""
    if cut is None:
        return list(fat.layout.phdrs)
    out: list[Phdr] = []
    for index, p in enumerate(fat.layout.phdrs):
        if index == container:
            out += _split(p, fat.fatbin_shdr, cut)
            continue
        offset = cut.shift(p.p_offset)
        overlaps = p.p_filesz and p.p_offset < cut.end and cut.start < p.file_end
        if offset is None or overlaps:
            raise TransformError(
                f"segment {index} (type {p.p_type:#x}) overlaps .hip_fatbin's interior",
                path=fat.path,
            )
        out.append(replace(p, p_offset=offset))
    return out


def _split(p: Phdr, fatbin: Shdr, cut: Cut) -> list[Phdr]:
    """Up to three PT_LOADs replacing ``p``: before (with the unaligned head), zeros, after.

    The before piece and the section's unaligned head are contiguous in the file and in
    memory with the same flags, so they share one entry.
    """
    delta = p.p_vaddr - p.p_offset

    def piece(offset: int, source: int, filesz: int, memsz: int) -> Phdr:
        vaddr = source + delta
        paddr = p.p_paddr + (vaddr - p.p_vaddr)
        return replace(
            p, p_offset=offset, p_vaddr=vaddr, p_paddr=paddr, p_filesz=filesz, p_memsz=memsz
        )

    section_end = fatbin.sh_offset + fatbin.sh_size
    mem_end = p.p_offset + p.p_memsz  # in source-offset space
    out = []
    if cut.start > p.p_offset:
        out.append(piece(p.p_offset, p.p_offset, cut.start - p.p_offset, cut.start - p.p_offset))
    if section_end < p.file_end:
        out.append(piece(cut.start, cut.start, 0, section_end - cut.start))
        after_file = p.file_end - section_end
        out.append(piece(section_end - cut.size, section_end, after_file, mem_end - section_end))
    else:
        out.append(piece(cut.start, cut.start, 0, mem_end - cut.start))
    return out


def cut_shdrs(fat: FatLayout, cut: Cut | None) -> list[Shdr]:
    """Section headers after the cut; ``.hip_fatbin`` becomes NOBITS when bytes go."""
    out = [fat.layout.shdrs[0]]
    for index, s in enumerate(fat.layout.shdrs[1:], start=1):
        if cut is None:
            out.append(s)
        elif index == fat.fatbin:
            out.append(replace(s, sh_type=SHT_NOBITS))
        else:
            shifted = cut.shift(s.sh_offset)
            out.append(replace(s, sh_offset=cut.start if shifted is None else shifted))
    return out
