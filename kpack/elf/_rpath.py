"""Plan a DT_RPATH edit (packages.md §7, §21 E1-E5) as an :class:`ElfEdit`.

The result has exactly one DT_RPATH and no DT_RUNPATH (or, with ``tag=DT_RUNPATH``, one
DT_RUNPATH and no DT_RPATH). The cheapest correct change wins:

1. the string already exists (in the old RPATH/RUNPATH or elsewhere in ``.dynstr``):
   only the dynamic table changes (E5: a retag of DT_RUNPATH to DT_RPATH in place);
2. it fits over an old RPATH/RUNPATH string that nothing else references: overwrite;
3. otherwise append a new ``.dynstr`` (old content + string) in one new PT_LOAD.

The dynamic table is rewritten in place if it has a spare DT_NULL slot, otherwise it
moves into the same new PT_LOAD (then writable: glibc adjusts ``.dynamic`` in place).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from kpack.elf._edit import ElfEdit, ElfSource, root_path
from kpack.elf._load import Blob, LoadPlan, Patch, plan_load, render_load
from kpack.elf._strrefs import dynstr_references, is_unshared
from kpack.elf.reader import ElfLayout, Reader, open_reader, read_layout
from kpack.elf.structs import (
    DT_NULL,
    DT_RPATH,
    DT_RUNPATH,
    DT_STRSZ,
    DT_STRTAB,
    DYN_SIZE,
    EM_X86_64,
    ET_DYN,
    ET_EXEC,
    PF_R,
    PF_W,
    PT_DYNAMIC,
    SHDR_SIZE,
    SHF_ALLOC,
    SHT_DYNAMIC,
    SHT_STRTAB,
    pack_dynamic,
)
from kpack.errors import ElfError

__all__ = ["plan_rpath_edit"]

log = logging.getLogger(__name__)

Dyn = tuple[int, int]


def plan_rpath_edit(
    path: ElfSource, entries: Sequence[str], *, tag: int = DT_RPATH
) -> ElfEdit | None:
    """Plan setting DT_RPATH (or ``tag``: DT_RUNPATH) of ``path`` to ``':'.join(entries)``;
    ``None`` if already so.

    ``path`` may be a planned edit (a transformed binary): the RPATH edit is planned on its
    result and streams from the file underneath.

    An empty ``entries`` removes DT_RPATH and DT_RUNPATH (``None`` if there are none).
    Raises :class:`ElfError` for files that cannot be edited safely.
    """
    if tag not in (DT_RPATH, DT_RUNPATH):
        raise ElfError(f"internal: tag {tag:#x} is neither DT_RPATH nor DT_RUNPATH")
    value = _encode(path, entries)
    with open_reader(path) as reader:
        layout = read_layout(reader)
        _check_editable(layout)
        base, size = layout.dynstr_range()
        dynstr = reader.read_at(base, size, "dynamic string table")
        old = [
            (slot, kind, off)
            for slot, (kind, off) in enumerate(layout.dyn_entries())
            if kind in (DT_RPATH, DT_RUNPATH)
        ]
        for slot, kind, off in old:
            if off >= size:
                raise ElfError(
                    f"dynamic slot {slot} (tag {kind}) points beyond DT_STRSZ", path=root_path(path)
                )
        if not entries:
            if not old:
                return None
            kept = [e for i, e in enumerate(layout.dyn_entries()) if i not in {o[0] for o in old}]
            return _finish(path, layout, _dynamic_patches(layout, kept), b"")
        if len(old) == 1 and old[0][1] == tag and _string_at(dynstr, old[0][2]) == value:
            return None
        patches: list[Patch] = []
        offset = _existing_string(dynstr, value, old)
        if offset is None:
            offset = _overwrite_in_place(
                reader, layout, dynstr=dynstr, value=value, old=old, patches=patches, tag=tag
            )
        return _plan(
            path,
            layout,
            dynstr=dynstr,
            value=value,
            old=old,
            offset=offset,
            patches=patches,
            tag=tag,
        )


def _plan(
    path: ElfSource,
    layout: ElfLayout,
    *,
    dynstr: bytes,
    value: bytes,
    old: list[tuple[int, int, int]],
    offset: int | None,
    patches: list[Patch],
    tag: int,
) -> ElfEdit:
    str_offset = len(dynstr) if offset is None else offset
    entries = _with_rpath(layout.dyn_entries(), old, str_offset, tag)
    move_dynamic = len(entries) + 1 > len(layout.dynamic)
    if offset is not None and not move_dynamic:
        return _finish(path, layout, patches + _dynamic_patches(layout, entries), b"")
    new_dynstr = dynstr + value + b"\0" if offset is None else None
    return _plan_new_load(
        path,
        layout,
        entries=entries,
        new_dynstr=new_dynstr,
        move_dynamic=move_dynamic,
        patches=patches,
    )


def _plan_new_load(
    path: ElfSource,
    layout: ElfLayout,
    *,
    entries: list[Dyn],
    new_dynstr: bytes | None,
    move_dynamic: bool,
    patches: list[Patch],
) -> ElfEdit:
    """Put a new ``.dynstr`` and/or the grown ``.dynamic`` into one new PT_LOAD."""
    blobs = [Blob(DYN_SIZE * (len(entries) + 1), 8)] if move_dynamic else []
    blobs += [Blob(len(new_dynstr), 1)] if new_dynstr is not None else []
    plan = plan_load(layout, blobs, PF_R | PF_W if move_dynamic else PF_R)
    data: list[bytes] = []
    phdrs = list(layout.phdrs)
    if new_dynstr is not None:
        index = len(blobs) - 1
        moved = {DT_STRTAB: plan.blob_vaddr(index), DT_STRSZ: len(new_dynstr)}
        entries = [(t, moved.get(t, v)) for t, v in entries]
        patches += _section_patch(layout, _dynstr_section(layout), plan, index, len(new_dynstr))
    if move_dynamic:
        dyn_raw = pack_dynamic([*entries, (DT_NULL, 0)])
        data.append(dyn_raw)
        offset, vaddr = plan.blob_offset(0), plan.blob_vaddr(0)
        size = len(dyn_raw)
        phdrs = [
            replace(p, p_offset=offset, p_vaddr=vaddr, p_paddr=vaddr, p_filesz=size, p_memsz=size)
            if p.p_type == PT_DYNAMIC
            else p
            for p in phdrs
        ]
        patches += _section_patch(layout, _dynamic_section(layout), plan, 0, len(dyn_raw))
    else:
        patches += _dynamic_patches(layout, entries)
    if new_dynstr is not None:
        data.append(new_dynstr)
    load_patches, appended = render_load(layout, plan, phdrs, data)
    log.debug("%s: new PT_LOAD at %#x (table moved: %s)", path, plan.offset, plan.table_moved)
    return _finish(path, layout, patches + load_patches, appended)


def _finish(path: ElfSource, layout: ElfLayout, patches: list[Patch], appended: bytes) -> ElfEdit:
    return ElfEdit(path, layout.size, tuple(sorted(patches)), appended)


def _encode(path: ElfSource, entries: Sequence[str]) -> bytes:
    for entry in entries:
        if ":" in entry or "\0" in entry:
            raise ElfError(
                f"invalid RPATH entry {entry!r} (contains ':' or NUL)", path=root_path(path)
            )
    return ":".join(entries).encode("utf-8", "surrogateescape")


def _check_editable(layout: ElfLayout) -> None:
    name = layout.name
    if layout.ehdr.e_machine != EM_X86_64:
        raise ElfError(f"e_machine {layout.ehdr.e_machine} is not x86-64; not editing", path=name)
    if layout.ehdr.e_type not in (ET_EXEC, ET_DYN):
        raise ElfError(f"e_type {layout.ehdr.e_type} is not EXEC or DYN; not editing", path=name)
    dyn = layout.first(PT_DYNAMIC)
    if dyn is None:
        raise ElfError("no PT_DYNAMIC (statically linked?); cannot set an RPATH", path=name)
    if layout.vaddr_to_offset(dyn.p_vaddr, dyn.p_filesz) != dyn.p_offset:
        raise ElfError("PT_DYNAMIC is not file-backed by a PT_LOAD at its offset", path=name)
    layout.dynstr_range()


def _string_at(dynstr: bytes, offset: int) -> bytes | None:
    end = dynstr.find(b"\0", offset)
    return dynstr[offset:end] if end >= 0 else None


def _existing_string(dynstr: bytes, value: bytes, old: list[tuple[int, int, int]]) -> int | None:
    """Offset of ``value`` already present: an old RPATH/RUNPATH first, then anywhere."""
    for _, _, off in old:
        if _string_at(dynstr, off) == value:
            return off
    found = dynstr.find(value + b"\0")
    return found if found >= 0 else None


def _overwrite_in_place(
    reader: Reader,
    layout: ElfLayout,
    *,
    dynstr: bytes,
    value: bytes,
    old: list[tuple[int, int, int]],
    patches: list[Patch],
    tag: int,
) -> int | None:
    """Overwrite an old, unshared RPATH/RUNPATH string if ``value`` fits; its offset."""
    if not old:
        return None
    refs = dynstr_references(reader, layout, exclude_slots=frozenset(o[0] for o in old))
    if refs is None:
        return None
    base, _ = layout.dynstr_range()
    for _, _, off in sorted(old, key=lambda o: o[1] != tag):
        current = _string_at(dynstr, off)
        if current is not None and len(value) <= len(current) and is_unshared(dynstr, off, refs):
            patches.append((base + off, value + bytes(len(current) + 1 - len(value))))
            return off
    return None


def _with_rpath(
    entries: list[Dyn], old: list[tuple[int, int, int]], offset: int, tag: int
) -> list[Dyn]:
    """Drop old RPATH/RUNPATH entries; put one ``tag`` entry where the first was (or last)."""
    old_slots = {o[0] for o in old}
    at = min(old_slots) if old_slots else len(entries)
    out = [e for i, e in enumerate(entries) if i not in old_slots and i < at]
    out.append((tag, offset))
    out += [e for i, e in enumerate(entries) if i not in old_slots and i >= at]
    return out


def _dynamic_patches(layout: ElfLayout, entries: list[Dyn]) -> list[Patch]:
    """Rewrite changed slots of the dynamic table in place (trailing slots DT_NULL)."""
    dyn = layout.first(PT_DYNAMIC)
    if dyn is None or len(entries) + 1 > len(layout.dynamic):
        raise ElfError("internal: dynamic table does not fit in place", path=layout.name)
    new = [*entries] + [(DT_NULL, 0)] * (len(layout.dynamic) - len(entries))
    patches: list[Patch] = []
    for slot, (before, after) in enumerate(zip(layout.dynamic, new, strict=True)):
        if before != after:
            patches.append((dyn.p_offset + slot * DYN_SIZE, pack_dynamic([after])))
    return _coalesce(patches)


def _coalesce(patches: list[Patch]) -> list[Patch]:
    out: list[Patch] = []
    for offset, data in sorted(patches):
        if out and out[-1][0] + len(out[-1][1]) == offset:
            out[-1] = (out[-1][0], out[-1][1] + data)
        else:
            out.append((offset, data))
    return out


def _dynstr_section(layout: ElfLayout) -> int | None:
    strtab = layout.dyn_value(DT_STRTAB)
    for index, shdr in enumerate(layout.shdrs):
        if (
            index
            and shdr.sh_type == SHT_STRTAB
            and shdr.sh_flags & SHF_ALLOC
            and shdr.sh_addr == strtab
        ):
            return index
    return None


def _dynamic_section(layout: ElfLayout) -> int | None:
    dyn = layout.first(PT_DYNAMIC)
    for index, shdr in enumerate(layout.shdrs):
        if (
            index
            and shdr.sh_type == SHT_DYNAMIC
            and dyn is not None
            and shdr.sh_addr == dyn.p_vaddr
        ):
            return index
    return None


def _section_patch(
    layout: ElfLayout, index: int | None, plan: LoadPlan, blob: int, size: int
) -> list[Patch]:
    """Point section header ``index`` (if any) at blob ``blob`` of the new segment."""
    if index is None:
        log.info("%s: no section header to update for a moved table", layout.name)
        return []
    shdr = replace(
        layout.shdrs[index],
        sh_offset=plan.blob_offset(blob),
        sh_addr=plan.blob_vaddr(blob),
        sh_size=size,
    )
    return [(layout.ehdr.e_shoff + index * SHDR_SIZE, shdr.pack())]
