"""The old-kernel rule for an executable's program-header table, checked and re-applied.

Linux 4.18 (EL8) passes ``AT_PHDR = load base + e_phoff`` to ``ld.so``, where the load
base is ``p_vaddr - p_offset`` of the first PT_LOAD. That points at the table only if the
PT_LOAD holding the table has the same ``p_vaddr - p_offset`` ("pinned"; ``p_vaddr ==
p_offset`` for a PIE). The kpack transform pins a table it moves (kpack.md §3); tools
run afterwards may not: ``llvm-strip`` packs the trailing table's file offset down and
keeps its address, and the executable then dies in ``ld.so`` on old kernels (and, when the
offset is no longer page-congruent, on every kernel). TheRock#5430, #4561.

:func:`phdr_pin_problem` names what is wrong (``None`` when compliant);
:func:`plan_phdr_pin` plans the repair, as rocm-kpack's ``normalize_phdr_tree`` does it:

- only executables (PT_INTERP) are considered: ``ld.so`` maps libraries itself and finds
  their table through the covering segment;
- a table inside the first PT_LOAD is compliant by construction;
- a table at the start of another PT_LOAD is pinned by giving that segment (and PT_PHDR)
  the first PT_LOAD's ``p_vaddr - p_offset``: a header-only edit when that address lies
  above every other segment, otherwise the table is copied to a new page at the end of
  the file at an offset whose pinned address clears every segment (the old copy stays as
  dead bytes);
- a table inside, but not at the start of, a later PT_LOAD cannot be pinned without
  moving that segment's other contents: a problem :func:`plan_phdr_pin` refuses;
- so is a file whose PT_LOADs overlap in memory (:func:`load_overlap_problem`; GNU strip
  2.40 writes such executables from split ones): the later mapping replaces the earlier
  one's bytes, and the program dies on every kernel wherever its table is. Pinning it
  would only hide that; the tool that wrote it must run again on the unstripped file.

Upstream pins ``p_vaddr == p_offset``; that is the same rule for a PIE (first PT_LOAD at
address 0) and the right one for a non-PIE executable as well (first PT_LOAD at
0x400000), where ``p_vaddr == p_offset`` would not match the kernel's load base.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import BinaryIO

from kpack.elf._edit import ElfEdit, ElfSource, root_path
from kpack.elf._verify import verify_elf
from kpack.elf.reader import ElfLayout, Reader, open_reader, read_layout
from kpack.elf.structs import PAGE, PT_INTERP, PT_LOAD, PT_PHDR, SHT_NOBITS, Phdr, align_up
from kpack.errors import ElfError

__all__ = ["load_overlap_problem", "phdr_pin_problem", "pin_phdr", "plan_phdr_pin"]


def _table_load(layout: ElfLayout) -> tuple[int, Phdr] | None:
    """Index and entry of the PT_LOAD whose file range holds ``e_phoff``."""
    phoff = layout.ehdr.e_phoff
    for index, p in enumerate(layout.phdrs):
        if p.p_type == PT_LOAD and p.p_offset <= phoff < p.file_end:
            return index, p
    return None


def phdr_pin_problem(layout: ElfLayout) -> str | None:
    """Why ``AT_PHDR = load base + e_phoff`` misses the table of this executable, or
    ``None`` (also for files that are not executables, or have no program headers)."""
    if layout.first(PT_INTERP) is None:
        return None
    loads = layout.segments(PT_LOAD)
    if not loads:
        return "executable without a PT_LOAD"
    found = _table_load(layout)
    if found is None:
        return f"program-header table at e_phoff {layout.ehdr.e_phoff:#x} is not in a PT_LOAD"
    _, cover = found
    delta, first = cover.p_vaddr - cover.p_offset, loads[0].p_vaddr - loads[0].p_offset
    if delta == first:
        return None
    return (
        f"program-header table's PT_LOAD has p_vaddr {cover.p_vaddr:#x} at p_offset "
        f"{cover.p_offset:#x} (p_vaddr - p_offset {delta:#x}, the first PT_LOAD has "
        f"{first:#x}): AT_PHDR = load base + e_phoff misses it on old kernels (EL8)"
    )


def load_overlap_problem(layout: ElfLayout) -> str | None:
    """Which PT_LOADs of ``layout`` overlap in memory (the file cannot load as linked),
    or ``None``. Linkers never write such files; ``strip`` of a split executable may."""
    loads = [(i, p) for i, p in enumerate(layout.phdrs) if p.p_type == PT_LOAD and p.p_memsz]
    for n, (i, a) in enumerate(loads):
        for j, b in loads[n + 1 :]:
            if a.p_vaddr < b.mem_end and b.p_vaddr < a.mem_end:
                return (
                    f"PT_LOAD[{i}] [{a.p_vaddr:#x}, {a.mem_end:#x}) and PT_LOAD[{j}] "
                    f"[{b.p_vaddr:#x}, {b.mem_end:#x}) overlap in memory: it cannot load "
                    "on any kernel"
                )
    return None


def plan_phdr_pin(path: ElfSource) -> ElfEdit | None:
    """Plan pinning the program-header table of ``path``; ``None`` if it is compliant.

    Raises :class:`ElfError` when the table cannot be pinned (see the module docstring).
    """
    with open_reader(path) as reader:
        layout = read_layout(reader)
        problem = phdr_pin_problem(layout)
        if problem is None:
            return None
        overlap = load_overlap_problem(layout)
        if overlap is not None:
            raise ElfError(
                f"cannot repair: {overlap} (strip before the split, or with llvm-strip)",
                path=root_path(path),
            )
        found = _table_load(layout)
        ehdr = layout.ehdr
        if found is None or found[1].p_offset != ehdr.e_phoff:
            raise ElfError(f"cannot pin: {problem}", path=root_path(path))
        index, cover = found
        first = layout.segments(PT_LOAD)[0]
        delta = first.p_vaddr - first.p_offset
        if delta % PAGE:
            raise ElfError(
                f"cannot pin: the first PT_LOAD's p_vaddr - p_offset {delta:#x} is not "
                "page-aligned",
                path=root_path(path),
            )
        inside = [
            i
            for i, s in enumerate(layout.shdrs)
            if i and s.sh_type != SHT_NOBITS and cover.p_offset <= s.sh_offset < cover.file_end
        ]
        if cover.p_vaddr - delta >= layout.size:
            offset, vaddr = cover.p_vaddr - delta, cover.p_vaddr  # move the bytes
        elif inside:
            raise ElfError(
                f"cannot pin: {problem}; the segment also holds sections and its address "
                "lies inside the file",
                path=root_path(path),
            )
        else:
            ceiling = align_up(
                max(
                    p.mem_end
                    for i, p in enumerate(layout.phdrs)
                    if p.p_type == PT_LOAD and i != index
                ),
                PAGE,
            )
            offset = cover.p_offset
            if offset + delta < ceiling:
                offset = align_up(max(layout.size, ceiling - delta), PAGE)
            vaddr = offset + delta
        content = (
            b""
            if offset == cover.p_offset
            else reader.read_at(cover.p_offset, cover.p_filesz, "program-header table segment")
        )
    moved = offset - cover.p_offset
    phdrs = list(layout.phdrs)
    phdrs[index] = replace(cover, p_offset=offset, p_vaddr=vaddr, p_paddr=vaddr)
    for i, p in enumerate(phdrs):
        if p.p_type == PT_PHDR:
            phdrs[i] = replace(p, p_offset=offset, p_vaddr=vaddr, p_paddr=vaddr)
    slots = [i for i, p in enumerate(phdrs) if p.p_type == PT_LOAD]
    for i, p in zip(slots, sorted((phdrs[i] for i in slots), key=lambda p: p.p_vaddr), strict=True):
        phdrs[i] = p  # the moved segment may now be the highest: keep ascending p_vaddr
    table = b"".join(p.pack() for p in phdrs)
    if not moved:
        return ElfEdit(path, layout.size, ((offset, table),), b"")
    patches: list[tuple[int, bytes]] = [(0, replace(ehdr, e_phoff=offset).pack())]
    if inside:
        shdrs = list(layout.shdrs)
        for i in inside:
            shdrs[i] = replace(shdrs[i], sh_offset=shdrs[i].sh_offset + moved)
        patches.append((ehdr.e_shoff, b"".join(s.pack() for s in shdrs)))
    appended = bytes(offset - layout.size) + table + content[len(table) :]
    return ElfEdit(path, layout.size, tuple(patches), appended)


def pin_phdr(path: Path) -> bool:
    """Pin the program-header table of ``path`` in place; ``False`` if it was compliant.

    The result is checked before it replaces ``path`` (a new file renamed over it, mode
    kept): compliant, and no structural error the input did not already have.
    """
    edit = plan_phdr_pin(path)
    if edit is None:
        return False
    name = f"{path} (pinned)"
    with edit.open() as view:
        left = phdr_pin_problem(read_layout(Reader(view, name), with_sections=False))
        new = set(_errors(view, name)) - set(_errors(path, str(path)))
    if left is not None or new:
        raise ElfError(
            "pinning the program-header table went wrong", path=path, problems=[*new, left or ""]
        )
    edit.write_to(path, replace_source=True)
    return True


def _errors(f: BinaryIO | Path, name: str) -> list[str]:
    try:
        verify_elf(f, name=name)
    except ElfError as exc:
        return list(exc.problems)
    return []
