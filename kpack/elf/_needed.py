"""Plan renaming DT_NEEDED entries (``libamdhip64-1a2b3c4d.so.6`` -> ``libamdhip64.so.6``)
as an :class:`ElfEdit`.

A new name no longer than the old one is written over the old string in ``.dynstr``, NUL
padded, at every offset that holds the old name: the DT_NEEDED entry and the version
requirement (``.gnu.version_r``'s ``vn_file``, which the dynamic linker matches against the
loaded library's name) change together. The overwrite is made only where every reference
into the string's bytes points at its first byte (:mod:`kpack.elf._strrefs`): a string a
linker shares by suffix with another name is never touched. A longer name, or a string whose
sharing cannot be proven, is an :class:`ElfError` (restoring a name that a repair tool
lengthened never needs more room).
"""

from __future__ import annotations

from collections.abc import Mapping

from kpack.elf._edit import ElfEdit, ElfSource, root_path
from kpack.elf._strrefs import dynstr_references
from kpack.elf.reader import open_reader, read_layout
from kpack.elf.structs import DT_NEEDED
from kpack.errors import ElfError

__all__ = ["plan_needed_edit"]


def plan_needed_edit(path: ElfSource, renames: Mapping[str, str]) -> ElfEdit | None:
    """Plan renaming each DT_NEEDED name of ``path`` found in ``renames``; ``None`` if no
    NEEDED name is in it."""
    with open_reader(path) as reader:
        layout = read_layout(reader)
        base, size = layout.dynstr_range()
        dynstr = reader.read_at(base, size, "dynamic string table")
        needed = [v for t, v in layout.dyn_entries() if t == DT_NEEDED]
        wanted = {
            name: renames[name]
            for name in map(lambda o: _string(dynstr, o), needed)
            if name in renames
        }
        if not wanted:
            return None
        refs = dynstr_references(reader, layout)
    if refs is None:
        raise ElfError(
            "cannot rename NEEDED entries: a section linked to .dynstr is not understood, so "
            "sharing of the strings cannot be ruled out",
            path=root_path(path),
        )
    patches = []
    for offset in sorted({r for r in refs if _string(dynstr, r) in wanted}):
        old = _string(dynstr, offset)
        new = wanted[old].encode("utf-8", "surrogateescape")
        _check(path, dynstr, offset, old, new, refs)
        patches.append(
            (base + offset, new + bytes(len(old.encode("utf-8", "surrogateescape")) - len(new)))
        )
    return ElfEdit(path, layout.size, tuple(patches), b"")


def _string(dynstr: bytes, offset: int) -> str:
    end = dynstr.find(b"\0", offset)
    return dynstr[offset : end if end >= 0 else len(dynstr)].decode("utf-8", "surrogateescape")


def _check(
    path: ElfSource, dynstr: bytes, offset: int, old: str, new: bytes, refs: frozenset[int]
) -> None:
    where = root_path(path)
    if not new or b"\0" in new or b"/" in new:
        raise ElfError(f"invalid library name {new!r} for NEEDED {old!r}", path=where)
    if len(new) > len(old.encode("utf-8", "surrogateescape")):
        raise ElfError(f"cannot rename NEEDED {old!r} to the longer {new.decode()!r}", path=where)
    end = dynstr.find(b"\0", offset)
    start = dynstr.rfind(b"\0", 0, offset) + 1
    shared = sorted(r for r in refs if start <= r <= end and r != offset)
    if start != offset or shared:
        raise ElfError(
            f"NEEDED {old!r} shares its bytes in .dynstr with another name; not renaming it",
            path=where,
        )
