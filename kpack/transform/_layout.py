"""Lay out a transformed host binary (kpack.md §3 steps 2-4 and 6) as one ElfEdit.

Private to :mod:`kpack.transform`. The result is the source with:

- the page-aligned interior of ``.hip_fatbin`` cut out (:class:`Cut`), every later file
  offset moved down, and the PT_LOAD that held it split so that every address stays
  mapped (the cut range reads as zeros);
- one new read-only PT_LOAD at the end holding the program-header table (when it cannot
  grow in place; pinned for executables, after the cut) and the marker
  (:func:`kpack.elf._load.plan_load` decides where);
- the wrappers redirected to the marker, in place and in their RELA entries;
- a fresh ``.shstrtab`` and a full new section-header table: every original section at
  its old index, the marker's header appended last.

Device bytes are never copied: :class:`kpack.elf.ElfEdit` streams the source and skips
the cut range.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from kpack.common.cli import format_size
from kpack.common.frozen import frozen
from kpack.elf import Blob, ElfEdit, LoadPlan, Patch, grown_table, plan_load
from kpack.elf.reader import ElfLayout, Reader
from kpack.elf.relocations import R_X86_64_RELATIVE, Rela
from kpack.elf.structs import (
    PAGE,
    PF_R,
    PT_INTERP,
    PT_LOAD,
    Phdr,
    Shdr,
    align_up,
)
from kpack.hipfmt import HIPK, WRAPPER
from kpack.transform._cut import Cut, container_of, cut_phdrs, cut_shdrs, must, plan_cut
from kpack.transform._scan import FatLayout, Pointer
from kpack.transform._sections import SectionTable

__all__ = ["Cut", "LaidOut", "lay_out"]

#: Pin a shared library's moved table too when that costs at most this much padding.
PIN_LIBRARY_PADDING = PAGE


@frozen(kw_only=True)
class LaidOut:
    """The planned edit and the facts the verifier checks it against."""

    edit: ElfEdit
    marker_vaddr: int
    marker_offset: int  # in the result
    marker_size: int
    cut: Cut | None
    load: LoadPlan
    section_order: tuple[int | None, ...]  # new index -> old index (None: the marker)
    notes: tuple[str, ...]


def lay_out(reader: Reader, fat: FatLayout, pointers: Sequence[Pointer], marker: bytes) -> LaidOut:
    """Plan the whole transform of ``fat`` (already checked to be transformable)."""
    layout = fat.layout
    cut, phdrs, shdrs, load = _geometry(fat, len(marker))
    marker_vaddr, marker_offset = load.blob_vaddr(0), load.blob_offset(0)
    sections = SectionTable.build(
        reader, fat, shdrs, marker=marker, marker_vaddr=marker_vaddr, marker_offset=marker_offset
    )
    table = b"".join(p.pack() for p in grown_table(phdrs, load))
    appended, sht_offset = _appended(load, table, marker, sections)
    ehdr = replace(
        layout.ehdr,
        e_phoff=load.phoff,
        e_phnum=load.phnum,
        e_shoff=sht_offset,
        e_shnum=len(sections.order),
        e_shstrndx=sections.shstrndx,
    )
    patches: list[Patch] = [(0, ehdr.pack())]
    if not load.table_moved:
        patches.append((layout.ehdr.e_phoff, table))
    patches += _wrapper_patches(fat, pointers, marker_vaddr)
    kept = layout.size - (cut.size if cut else 0)
    edit = ElfEdit(
        fat.path,
        layout.size,
        tuple(sorted(patches)),
        appended,
        removed=(cut.start, cut.end) if cut is not None else None,
        zero_fill=load.offset - kept,
    )
    notes = _notes(fat, cut, load, edit)
    return LaidOut(
        edit=edit,
        marker_vaddr=marker_vaddr,
        marker_offset=marker_offset,
        marker_size=len(marker),
        cut=cut,
        load=load,
        section_order=sections.order,
        notes=notes,
    )


def _geometry(
    fat: FatLayout, marker_size: int
) -> tuple[Cut | None, list[Phdr], list[Shdr], LoadPlan]:
    """The cut, the headers after it, and where the new PT_LOAD goes (steps 3 and 6).

    The new segment is planned on the layout the file has *after* the cut, so that an
    executable's moved table is pinned with its final file offset.
    """
    layout = fat.layout
    container = container_of(fat)
    cut = plan_cut(fat, container)
    phdrs = cut_phdrs(fat, cut, container)
    shdrs = cut_shdrs(fat, cut)
    ehdr = layout.ehdr
    if cut is not None:
        ehdr = replace(
            ehdr,
            e_phoff=must(cut.shift(ehdr.e_phoff), "e_phoff", fat),
            e_shoff=must(cut.shift(ehdr.e_shoff), "e_shoff", fat),
        )
    kept = layout.size - (cut.size if cut else 0)
    after_cut = replace(layout, size=kept, ehdr=ehdr, phdrs=tuple(phdrs), shdrs=tuple(shdrs))
    load = plan_load(
        after_cut,
        [Blob(marker_size, 1)],
        PF_R,
        spare_slots=True,
        max_padding=None,
        pin_padding=PIN_LIBRARY_PADDING,
    )
    return cut, phdrs, shdrs, load


def _appended(
    load: LoadPlan, table: bytes, marker: bytes, sections: SectionTable
) -> tuple[bytes, int]:
    """The new segment (moved table, marker), ``.shstrtab`` and the section-header table."""
    content = bytearray(load.size)
    if load.table_moved:
        content[: len(table)] = table
    content[load.starts[0] : load.starts[0] + len(marker)] = marker
    shstrtab_offset = load.offset + load.size
    sht_offset = align_up(shstrtab_offset + len(sections.shstrtab), 8)
    gap = bytes(sht_offset - shstrtab_offset - len(sections.shstrtab))
    return bytes(content) + sections.shstrtab + gap + sections.pack(shstrtab_offset), sht_offset


def _wrapper_patches(fat: FatLayout, pointers: Sequence[Pointer], marker_vaddr: int) -> list[Patch]:
    """Step 4: HIPK, the marker address in place, ``reserved1`` = index; RELA rewritten."""
    patches: list[Patch] = []
    for wrapper, pointer in zip(fat.wrappers, pointers, strict=True):
        reserved1 = (wrapper.reserved1 & ~0xFFFFFFFF) | wrapper.index
        raw = WRAPPER.pack(HIPK, wrapper.version, marker_vaddr, reserved1)
        patches.append((wrapper.file_offset, raw))
        if pointer.rela is not None:
            rela = Rela(
                pointer.rela.file_offset,
                wrapper.pointer_vaddr,
                R_X86_64_RELATIVE,
                0,
                marker_vaddr,
            )
            patches.append((rela.file_offset, rela.pack()))
    return patches


def _notes(fat: FatLayout, cut: Cut | None, load: LoadPlan, edit: ElfEdit) -> tuple[str, ...]:
    shdr = fat.fatbin_shdr
    notes = []
    if cut is None:
        notes.append(
            f".hip_fatbin ({format_size(shdr.sh_size)}) has no whole page to remove; it stays "
            f"in the file and the file grows by {format_size(edit.size - fat.layout.size)}"
        )
    else:
        notes.append(f"removed {format_size(cut.size)} of device code from .hip_fatbin")
    if load.table_moved:
        pinned = load.vaddr - load.offset == _first_load_delta(fat.layout)
        notes.append(
            f"program-header table moved to offset {load.phoff:#x}"
            + (" (p_vaddr - p_offset pinned to the first PT_LOAD's)" if pinned else "")
        )
    else:
        notes.append("program-header table grew in place")
    if edit.zero_fill > PAGE and fat.layout.first(PT_INTERP) is not None:
        notes.append(
            f"executable: {format_size(edit.zero_fill)} of zero padding (a hole) keep the moved "
            "program-header table at p_vaddr - p_offset of the first PT_LOAD"
        )
    return tuple(notes)


def _first_load_delta(layout: ElfLayout) -> int:
    first = layout.segments(PT_LOAD)[0]
    return first.p_vaddr - first.p_offset
