"""Plan the library side of a finalize: which members go and how each ELF file links.

Scan every ELF member once (:func:`kpack.elf.scan_elf`), then decide, as values:

- **vendored copies** of libraries the set provides (auditwheel's
  ``<dist>.libs/libamdhip64-1a2b3c4d.so.6``, or a plain copy anywhere) are removed, and
  every NEEDED name that pointed at one is restored to the set's name
  (``libamdhip64.so.6``), so that one copy of each library loads;
- vendored libraries in a ``.libs`` directory that no kept ELF file still needs (the
  ROCm libraries' own dependencies) go with them;
- every other ELF file that needs a library of the set gets a search path that reaches the
  set's directory of that library relative to where the file installs
  (``$ORIGIN/../_rocm_sdk_core/lib`` from ``pkg/``, ``$ORIGIN/../../…`` from
  ``pkg/sub/``), first; of its old entries it keeps those relative to ``$ORIGIN`` that
  still lead into the wheel, never an absolute one (a path on the machine that built it,
  such as ``/opt/rocm/lib``) or one into a directory of the set by another name;
- a NEEDED name of a ROCm library that the set does not provide in that version
  (``libamdhip64.so.5`` against a set with ``libamdhip64.so.7``) is an error.
"""

from __future__ import annotations

import mmap
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kpack.elf import ElfInfo, FileKind, scan_elf
from kpack.elf.structs import DT_RPATH, DT_RUNPATH
from kpack.errors import PackagingError, shown_list
from kpack.finalize._set import PLATFORM_PREFIXES, RocmSet, library_stem
from kpack.pe import imported_dlls, is_pe_file, read_image
from kpack.wheelfile import InputWheel

__all__ = ["ElfPlan", "LibraryPlan", "plan_libraries", "plan_windows"]

#: auditwheel's name of a vendored copy: ``<stem>-<8 hex digits>`` before ``.so``.
_HASHED = re.compile(r"(?P<stem>.+)-[0-9a-f]{8}(?P<ext>\.so(?:\..*)?)")
#: delvewheel's name of a vendored DLL: ``<stem>-<hex digits>.dll``.
_HASHED_DLL = re.compile(r"(?P<stem>.+)-[0-9a-f]{8,32}(?P<ext>\.dll)", re.IGNORECASE)
_ORIGIN = re.compile(r"\$(?:ORIGIN|\{ORIGIN\})(?=/|$)")


@dataclass(frozen=True, kw_only=True)
class ElfPlan:
    """The edit of one ELF member: NEEDED renames and its new search path."""

    arcname: str
    renames: Mapping[str, str]
    needed: tuple[str, ...]  # after the renames
    search: tuple[str, ...]
    tag: int  # DT_RUNPATH, or DT_RPATH for a file that had one (auditwheel writes DT_RPATH)
    dropped: tuple[str, ...]  # old entries left out


@dataclass(frozen=True, kw_only=True)
class LibraryPlan:
    """Members to remove, ELF edits, and which set distributions the kept files link."""

    removed: tuple[str, ...]
    edits: tuple[ElfPlan, ...]
    links: frozenset[str]  # set distributions whose libraries a kept ELF file needs
    elves: tuple[str, ...]  # every kept ELF member (device-code checks read them)


def restored_name(name: str) -> str:
    """``libamdhip64-1a2b3c4d.so.6`` -> ``libamdhip64.so.6``; other names as they are."""
    found = _HASHED.fullmatch(name)
    return found["stem"] + found["ext"] if found else name


def plan_libraries(wheel: InputWheel, rocm: RocmSet) -> LibraryPlan:
    """The library plan of ``wheel`` (extracted) against the set ``rocm``."""
    infos = _scan(wheel)
    names = {a: info.soname or posixpath.basename(a) for a, info in infos.items()}
    vendored = {
        arcname: restored_name(names[arcname])
        for arcname, info in infos.items()
        if info.kind is FileKind.SHARED_LIBRARY and rocm.lookup(restored_name(names[arcname]))
    }
    renames = {names[a]: new for a, new in vendored.items() if names[a] != new}
    kept = {a: i for a, i in infos.items() if a not in vendored}
    orphans = _orphans(kept, renames)
    kept = {a: i for a, i in kept.items() if a not in orphans}
    removed = tuple(sorted({*vendored, *orphans}))
    remaining = {e.arcname for e in wheel.entries} - set(removed)
    problems: list[str] = []
    edits = []
    links: set[str] = set()
    for arcname, info in sorted(kept.items()):
        edit = _plan_elf(wheel, arcname, info, rocm, renames, remaining, links, problems)
        if edit is not None:
            edits.append(edit)
    if problems:
        raise PackagingError(
            "the wheel needs ROCm libraries the set does not provide",
            path=wheel.path,
            problems=shown_list(problems),
        )
    return LibraryPlan(
        removed=removed, edits=tuple(edits), links=frozenset(links), elves=tuple(sorted(kept))
    )


def _scan(wheel: InputWheel) -> dict[str, ElfInfo]:
    """Every x86-64 ELF executable or shared library of the wheel, by arcname."""
    out = {}
    for entry in wheel.entries:
        info = scan_elf(wheel.root / entry.arcname)
        if info is not None and info.kind in (FileKind.EXECUTABLE, FileKind.SHARED_LIBRARY):
            out[entry.arcname] = info
    return out


def _orphans(kept: Mapping[str, ElfInfo], renames: Mapping[str, str]) -> set[str]:
    """Libraries in a top-level ``*.libs`` directory that no other kept file needs (after
    the vendored ROCm copies are gone)."""
    vendored = {a for a in kept if a.split("/", 1)[0].endswith(".libs")}
    by_name = {kept[a].soname or posixpath.basename(a): a for a in vendored}
    reached: set[str] = set()
    todo = [a for a in kept if a not in vendored]
    while todo:
        for name in kept[todo.pop()].needed:
            target = by_name.get(renames.get(name, name))
            if target is not None and target not in reached:
                reached.add(target)
                todo.append(target)
    return vendored - reached


def _plan_elf(
    wheel: InputWheel,
    arcname: str,
    info: ElfInfo,
    rocm: RocmSet,
    renames: Mapping[str, str],
    remaining: set[str],
    links: set[str],
    problems: list[str],
) -> ElfPlan | None:
    ours = {n: renames[n] for n in info.needed if n in renames}
    needed = tuple(ours.get(n, n) for n in info.needed)
    install = wheel.install_path(arcname)
    here = posixpath.dirname(install)
    entries: list[str] = []
    stems = rocm.stems()
    for name in needed:
        copies = rocm.lookup(name)
        if not copies and library_stem(name) in stems:
            problems.append(
                f"{arcname}: needs {name}; the set {rocm.version} has "
                f"{', '.join(stems[library_stem(name)])}"
            )
        for copy in copies:
            links.add(copy.dist)
            entry = "$ORIGIN/" + posixpath.relpath(copy.directory, here or ".")
            if entry not in entries:
                entries.append(entry)
    if not entries and not ours:
        return None
    if install == arcname and arcname.startswith(wheel.data_dir + "/"):
        problems.append(
            f"{arcname}: installs outside site-packages; its search path cannot reach the set"
        )
        return None
    old = info.runpath if info.runpath is not None else info.rpath or ()
    kept_old, dropped = _old_entries(old, here, remaining, wheel)
    search = tuple(dict.fromkeys([*entries, *kept_old]))
    tag = DT_RPATH if info.rpath is not None and info.runpath is None else DT_RUNPATH
    return ElfPlan(
        arcname=arcname, renames=ours, needed=needed, search=search, tag=tag, dropped=dropped
    )


def _old_entries(
    old: Sequence[str], here: str, remaining: set[str], wheel: InputWheel
) -> tuple[list[str], tuple[str, ...]]:
    """(kept, dropped) old search-path entries: dropped are absolute ones, those into a
    platform directory of the set (a rebase by hand, with names that may not be this
    set's) and those into a directory of this wheel whose members all went."""
    before = {wheel.install_path(e.arcname) for e in wheel.entries}
    after = {wheel.install_path(a) for a in remaining}
    kept, dropped = [], []
    for entry in old:
        if not entry:
            continue
        if not _ORIGIN.match(entry):
            dropped.append(entry)
            continue
        target = posixpath.normpath(
            posixpath.join(here, _ORIGIN.sub("", entry, count=1).lstrip("/"))
        )
        top = target.split("/", 1)[0]
        emptied = _holds(before, target) and not _holds(after, target)
        if top.startswith(PLATFORM_PREFIXES) or emptied:
            dropped.append(entry)
        else:
            kept.append(entry)
    return kept, tuple(dropped)


def _holds(paths: set[str], directory: str) -> bool:
    return directory == "." or any(p.startswith(directory + "/") for p in paths)


def plan_windows(wheel: InputWheel, rocm: RocmSet) -> LibraryPlan:
    """Windows: DLLs are found as ``rocm_sdk.initialize_process`` preloads the set's (by full
    path; the loader then takes a loaded module of that name for every import), so a copy of
    a set DLL under its own name is removed; a renamed copy (delvewheel's
    ``amdhip64_7-<hash>.dll``) would need its importers' import tables rewritten, which is not
    done: an error naming it. The DLLs the wheel's images import (delay-loaded ones too) say
    which set distributions it links."""
    removed, problems = [], []
    for entry in wheel.entries:
        name = posixpath.basename(entry.arcname)
        if not name.lower().endswith(".dll"):
            continue
        hashed = _HASHED_DLL.fullmatch(name)
        if rocm.lookup(name):
            removed.append(entry.arcname)
        elif hashed and rocm.lookup(hashed["stem"] + hashed["ext"]):
            problems.append(
                f"{entry.arcname}: a renamed copy of the set's {hashed['stem']}{hashed['ext']}; "
                "repair the wheel without vendoring it (delvewheel --exclude)"
            )
    if problems:
        raise PackagingError(
            "the wheel vendors renamed copies of the set's DLLs",
            path=wheel.path,
            problems=shown_list(problems),
        )
    images = [
        e.arcname
        for e in wheel.entries
        if e.arcname.lower().endswith((".dll", ".pyd", ".exe"))
        and e.arcname not in removed
        and is_pe_file(wheel.root / e.arcname)
    ]
    links = {
        copy.dist
        for name in images
        for dll in _imports(wheel.root / name)
        for copy in rocm.lookup(dll)
    }
    return LibraryPlan(
        removed=tuple(sorted(removed)), edits=(), links=frozenset(links), elves=tuple(images)
    )


def _imports(path: Path) -> tuple[str, ...]:
    """The DLLs the PE image ``path`` imports (delay-loaded ones too)."""
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return imported_dlls(read_image(data, path), data)
