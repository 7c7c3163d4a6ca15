"""Place new data in one trailing PT_LOAD and grow the program-header table by one entry.

This is the layout primitive shared by every edit that adds bytes to a loaded image
(RPATH strings, the kpack marker). It works in two steps so that callers can put final
addresses into their data: :func:`plan_load` decides the geometry from blob sizes,
:func:`render_load` (or the caller, with :func:`grown_table`) produces the bytes. A
caller that also removes bytes or splits segments plans on the layout as it will be
after that (kpack.transform does), and may ask for spare table slots.

Rules (packages.md §21 E2/E3, kpack.md §3):

- the program-header table grows in place only if the bytes after it, up to the next
  section, segment or section-header table, are unused and still inside the PT_LOAD that
  covers it; otherwise it moves to the start of the new segment;
- the new segment starts at the page-rounded highest PT_LOAD end, at a file offset past
  the end of the file with ``p_offset ≡ p_vaddr (mod 4096)``; it is inserted after the
  last PT_LOAD, never first, and no existing segment changes its flags;
- for executables (PT_INTERP) with a moved table, ``p_vaddr - p_offset`` of the new
  segment equals that of the first PT_LOAD, so ``AT_PHDR = load base + e_phoff`` holds
  (libraries too, on request, when that costs little padding).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from kpack.common.frozen import frozen
from kpack.elf.reader import ElfLayout
from kpack.elf.structs import (
    EHDR_SIZE,
    PAGE,
    PHDR_SIZE,
    PT_INTERP,
    PT_LOAD,
    PT_PHDR,
    SHDR_SIZE,
    SHT_NOBITS,
    Phdr,
    align_up,
)
from kpack.errors import ElfError

#: Refuse plans that would pad the file by more than this to pin an executable's table.
MAX_PADDING = 64 << 20

Patch = tuple[int, bytes]


@frozen
class Blob:
    """Space requested in the new segment."""

    size: int
    align: int = 1


@frozen(kw_only=True)
class LoadPlan:
    """Geometry of the new trailing PT_LOAD and of the grown program-header table."""

    table_moved: bool
    phoff: int
    phnum: int
    offset: int
    vaddr: int
    size: int
    flags: int
    starts: tuple[int, ...]  # blob start relative to the segment

    def blob_offset(self, index: int) -> int:
        return self.offset + self.starts[index]

    def blob_vaddr(self, index: int) -> int:
        return self.vaddr + self.starts[index]

    def new_load(self) -> Phdr:
        return Phdr(
            p_type=PT_LOAD,
            p_flags=self.flags,
            p_offset=self.offset,
            p_vaddr=self.vaddr,
            p_paddr=self.vaddr,
            p_filesz=self.size,
            p_memsz=self.size,
            p_align=PAGE,
        )


def plan_load(
    layout: ElfLayout,
    blobs: Sequence[Blob],
    flags: int,
    *,
    spare_slots: bool = False,
    max_padding: int | None = MAX_PADDING,
    pin_padding: int | None = None,
) -> LoadPlan:
    """Decide where ``blobs`` go in one new PT_LOAD with ``flags``.

    ``layout.phdrs`` is the table the file will have before the new PT_LOAD is added
    (a caller that also splits segments passes the split table; ``ehdr.e_phnum`` stays
    the count of entries present in the file). With ``spare_slots`` a moved table gets
    room for ``align_up(entries, 16)`` entries; the spare slots stay zero (PT_NULL) and
    are not counted in ``e_phnum``. A moved table is pinned (``p_vaddr - p_offset`` of
    the first PT_LOAD) for executables always, and for other files when that costs at
    most ``pin_padding`` bytes of padding. ``max_padding=None`` allows any padding.
    """
    loads = layout.segments(PT_LOAD)
    if not loads:
        raise ElfError("no PT_LOAD segment; cannot add one after it", path=layout.name)
    phnum = len(layout.phdrs) + 1
    moved = not _room_in_place(layout, phnum * PHDR_SIZE)
    slots = (align_up(phnum, 16) if spare_slots else phnum) if moved else 0
    pos = slots * PHDR_SIZE
    starts = []
    for blob in blobs:
        pos = align_up(pos, max(blob.align, 1))
        starts.append(pos)
        pos += blob.size
    vaddr = align_up(max(p.mem_end for p in loads), PAGE)
    offset = align_up(layout.size, PAGE)
    if moved:
        offset, vaddr = _pin(layout, loads[0], offset, vaddr, pin_padding)
    if vaddr + pos >= 1 << 63 or offset + pos >= 1 << 63:
        raise ElfError(f"no room for a new segment above {vaddr:#x}", path=layout.name)
    if max_padding is not None and offset - layout.size > max_padding:
        raise ElfError(
            f"new segment would need {offset - layout.size:#x} bytes of padding",
            path=layout.name,
        )
    phoff = offset if moved else layout.ehdr.e_phoff
    return LoadPlan(
        table_moved=moved,
        phoff=phoff,
        phnum=phnum,
        offset=offset,
        vaddr=vaddr,
        size=pos,
        flags=flags,
        starts=tuple(starts),
    )


def _pin(
    layout: ElfLayout, first: Phdr, offset: int, vaddr: int, pin_padding: int | None
) -> tuple[int, int]:
    """``(offset, vaddr)`` of a new segment holding a moved table, pinned if required.

    Pinned means ``vaddr - offset`` equals that of the first PT_LOAD, so that
    ``AT_PHDR = load base + e_phoff`` (Linux 4.18) points at the table.
    """
    executable = layout.first(PT_INTERP) is not None
    delta = first.p_vaddr - first.p_offset
    if delta % PAGE:
        if executable:
            raise ElfError(
                f"first PT_LOAD has p_vaddr - p_offset = {delta:#x}, not page-aligned; "
                "cannot keep AT_PHDR valid for a moved program-header table",
                path=layout.name,
            )
        return offset, vaddr
    pinned = max(offset, vaddr - delta)
    if executable or (pin_padding is not None and pinned - offset <= pin_padding):
        return pinned, pinned + delta
    return offset, vaddr


def render_load(
    layout: ElfLayout, plan: LoadPlan, phdrs: Sequence[Phdr], blobs: Sequence[bytes]
) -> tuple[list[Patch], bytes]:
    """Patches (ELF header, in-place table) and appended bytes for ``plan``.

    ``phdrs`` is the existing table, possibly with caller updates (e.g. PT_DYNAMIC).
    """
    if len(blobs) != len(plan.starts):
        raise ElfError("internal: blob count does not match the plan", path=layout.name)
    table = grown_table(phdrs, plan)
    raw_table = b"".join(p.pack() for p in table)
    content = bytearray(plan.size)
    patches: list[Patch] = []
    if plan.table_moved:
        content[: len(raw_table)] = raw_table
    else:
        patches.append((plan.phoff, raw_table))
    for start, data in zip(plan.starts, blobs, strict=True):
        content[start : start + len(data)] = data
    ehdr = replace(layout.ehdr, e_phoff=plan.phoff, e_phnum=plan.phnum)
    patches.append((0, ehdr.pack()))
    appended = bytes(plan.offset - layout.size) + bytes(content)
    return patches, appended


def grown_table(phdrs: Sequence[Phdr], plan: LoadPlan) -> list[Phdr]:
    """``phdrs`` with the new PT_LOAD after the last PT_LOAD and PT_PHDR updated."""
    table_size = plan.phnum * PHDR_SIZE
    out: list[Phdr] = []
    for p in phdrs:
        if p.p_type == PT_PHDR:
            if plan.table_moved:
                p = replace(p, p_offset=plan.offset, p_vaddr=plan.vaddr, p_paddr=plan.vaddr)
            p = replace(p, p_filesz=table_size, p_memsz=table_size)
        out.append(p)
    last_load = max(i for i, p in enumerate(out) if p.p_type == PT_LOAD)
    out.insert(last_load + 1, plan.new_load())
    return out


def _room_in_place(layout: ElfLayout, needed: int) -> bool:
    """True if the table can grow to ``needed`` bytes where it is.

    Needs section headers (otherwise unused bytes cannot be told apart), and the grown
    table must end before any section (NOBITS ones occupy no file bytes), segment or the
    section-header table that starts after it, and inside the PT_LOAD that maps it.
    """
    ehdr = layout.ehdr
    start = ehdr.e_phoff
    end = start + needed
    if not layout.shdrs or start < EHDR_SIZE:
        return False
    if not any(
        p.p_type == PT_LOAD and p.p_offset <= start and end <= p.file_end for p in layout.phdrs
    ):
        return False
    old_end = start + ehdr.e_phnum * PHDR_SIZE
    if end > layout.size:
        return False
    occupied = [(ehdr.e_shoff, len(layout.shdrs) * SHDR_SIZE)]
    occupied += [
        (s.sh_offset, 1 if s.sh_type == SHT_NOBITS else max(s.sh_size, 1)) for s in layout.shdrs[1:]
    ]
    occupied += [
        (p.p_offset, max(p.p_filesz, 1))
        for p in layout.phdrs
        if p.p_type != PT_PHDR and not (p.p_type == PT_LOAD and p.p_offset <= start)
    ]
    return not any(off < end and old_end < off + size for off, size in occupied)
