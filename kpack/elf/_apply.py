"""Plan, verify and write an RPATH edit in one call; verify an edit of NEEDED names and the
search path (:func:`check_link_edit`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from kpack.elf._edit import ElfEdit
from kpack.elf._rpath import plan_rpath_edit
from kpack.elf._scan import ElfInfo, scan_reader
from kpack.elf._verify import verify_elf
from kpack.elf.reader import Reader, open_reader, read_layout
from kpack.elf.structs import DT_RUNPATH, PF_R, PF_W, PF_X, PT_DYNAMIC, PT_LOAD, PT_PHDR, Phdr
from kpack.errors import ElfError

__all__ = ["apply_rpath_edit", "check_link_edit", "check_rpath_edit"]

log = logging.getLogger(__name__)


def apply_rpath_edit(path: Path, entries: Sequence[str], dest: Path) -> bool:
    """Set DT_RPATH of ``path`` to ``entries`` and write the result to ``dest``.

    The planned result is verified before anything is written; ``dest`` is replaced
    atomically. Returns ``False`` if nothing had to change (``dest`` is then a copy).
    """
    path = Path(path)
    edit = plan_rpath_edit(path, entries)
    if edit is None:
        with open_reader(path) as reader:
            size = reader.size
        ElfEdit(path, size, (), b"").write_to(Path(dest))
        return False
    check_rpath_edit(edit, entries)
    edit.write_to(Path(dest))
    return True


def check_rpath_edit(edit: ElfEdit, entries: Sequence[str]) -> list[str]:
    """Verify a planned RPATH edit: structure (E4), meaning, and segment invariants (E2/E3).

    Returns the verifier's warnings; raises :class:`ElfError` on any problem.
    """
    return _check(edit, lambda before, after: _meaning(before, after, entries))


def check_link_edit(
    edit: ElfEdit, *, needed: Sequence[str], search: Sequence[str], tag: int
) -> list[str]:
    """Verify a planned edit of the NEEDED names and the library search path: the result
    is sound (as :func:`check_rpath_edit` checks it), NEEDED is ``needed`` in order, the
    search path is ``search`` under ``tag`` (DT_RPATH or DT_RUNPATH) and the other tag is
    gone, and nothing else the dynamic linker reads changed."""

    def meaning(before: ElfInfo | None, after: ElfInfo | None) -> list[str]:
        if before is None or after is None:
            return ["result is not an ELF file"]
        want = tuple(search) or None
        got = (after.runpath, after.rpath) if tag == DT_RUNPATH else (after.rpath, after.runpath)
        problems = [f"NEEDED is {after.needed!r}, expected {tuple(needed)!r}"] * (
            after.needed != tuple(needed)
        )
        if got != (want, None):
            problems.append(f"search path is {got!r}, expected {want!r} under tag {tag:#x}")
        if replace(after, needed=(), rpath=None, runpath=None) != replace(
            before, needed=(), rpath=None, runpath=None
        ):
            problems.append("SONAME, interpreter, kind or sections changed")
        return problems

    return _check(edit, meaning)


def _check(
    edit: ElfEdit, meaning: Callable[[ElfInfo | None, ElfInfo | None], list[str]]
) -> list[str]:
    name = f"{edit.path} (edited)"
    with open_reader(edit.source) as reader:
        before = scan_reader(reader, edit.path)
        old_phdrs = read_layout(reader, with_sections=False).phdrs
    with edit.open() as view:
        warnings = verify_elf(view, name=name)
        new_reader = Reader(view, name)
        after = scan_reader(new_reader, edit.path)
        new_phdrs = read_layout(new_reader, with_sections=False).phdrs
    for warning in warnings:
        log.warning("%s: %s", name, warning)
    problems = meaning(before, after) + _invariants(old_phdrs, new_phdrs)
    if problems:
        raise ElfError("planned edit is wrong", path=edit.path, problems=problems)
    return warnings


def _meaning(before: ElfInfo | None, after: ElfInfo | None, entries: Sequence[str]) -> list[str]:
    if before is None or after is None:
        return ["result is not an ELF file"]
    want = tuple(entries) if entries else None
    problems = []
    if after.rpath != want:
        problems.append(f"DT_RPATH is {after.rpath!r}, expected {want!r}")
    if after.runpath is not None:
        problems.append(f"DT_RUNPATH {after.runpath!r} remains")
    if replace(after, rpath=None, runpath=None) != replace(before, rpath=None, runpath=None):
        problems.append("SONAME, NEEDED, interpreter, kind or sections changed")
    return problems


def _invariants(old: tuple[Phdr, ...], new: tuple[Phdr, ...]) -> list[str]:
    """At most one added PT_LOAD (R or RW, not first); other segments keep type and flags."""
    added = [i for i, p in enumerate(new) if p.p_type == PT_LOAD and p not in old]
    problems = []
    if len(new) not in (len(old), len(old) + 1) or len(added) != len(new) - len(old):
        return [f"segment count {len(old)} -> {len(new)}; expected at most one new PT_LOAD"]
    for index in added:
        p = new[index]
        if p.p_flags & PF_X or not p.p_flags & PF_R or p.p_flags & ~(PF_R | PF_W | PF_X):
            problems.append(f"new PT_LOAD[{index}] has flags {p.p_flags:#x}")
        if index == min(i for i, q in enumerate(new) if q.p_type == PT_LOAD):
            problems.append("new PT_LOAD is the first PT_LOAD")
    kept = [p for i, p in enumerate(new) if i not in added]
    for a, b in zip(old, kept, strict=True):
        if (a.p_type, a.p_flags) != (b.p_type, b.p_flags):
            problems.append(f"segment type/flags changed: {a} -> {b}")
        elif a.p_type not in (PT_PHDR, PT_DYNAMIC) and a != b:
            problems.append(f"segment changed: {a} -> {b}")
    return problems
