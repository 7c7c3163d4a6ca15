"""Which entries of an output directory are still what a tool recorded writing there.

Every look-up here goes component by component with ``lstat`` and never follows a symlink
(nor, on Windows, a reparse point): a recorded path whose parent is a symlink or not a
directory is nobody's, a path the system cannot look up (too long, no permission) is not
the tool's, and a recorded directory is the tool's only while everything in it is, checked
by a walk (a planted tree of any depth costs no recursion).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath

from kpack.common.output_record import Entry, entry_of, is_link

__all__ = [
    "CHANGED",
    "OWNS",
    "Owns",
    "blocked_parent",
    "is_ours",
    "problems_in_the_way",
    "what_changed",
]

#: What a run may replace: ``"recorded"`` — only what its record proves it wrote (the rule
#: above); ``"named"`` — its named outputs whatever is there (rocm-kpack's own rule for the
#: artifact dirs it writes; nothing else is touched and nothing stale removed).
Owns = str
OWNS = ("recorded", "named")
#: The words of a problem about an output this tool wrote and someone changed since.
CHANGED = "changed since this tool wrote it"


def blocked_parent(dest: Path, rel: str) -> str | None:
    """The first proper parent of ``rel`` that exists but is not a real directory."""
    parts = PurePosixPath(rel).parts[:-1]
    for i in range(1, len(parts) + 1):
        sub = "/".join(parts[:i])
        try:
            st = os.lstat(dest / sub)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError:  # a name the system cannot look up (too long, no permission)
            return sub
        if is_link(st) or not stat.S_ISDIR(st.st_mode):
            return sub
    return None


def _matches(path: Path, entry: Entry) -> bool:
    now = entry_of(path, digest=False)
    if now is None or now.kind != entry.kind:
        return False
    if now.kind == "symlink":
        return (now.target, now.inode) == (entry.target, entry.inode)
    if now.kind == "file":  # size and inode decide "no" at once; a match is then hashed
        if (now.size, now.inode) != (entry.size, entry.inode):
            return False
        current = entry_of(path)
        return current is not None and current.sha256 == entry.sha256
    return True


def is_ours(dest: Path, rel: str, record: Mapping[str, Entry]) -> bool:
    """``dest/rel`` (its parents real directories) is still what the record says, and, for a
    directory, so is everything in it."""
    if blocked_parent(dest, rel) is not None:
        return False
    pending = [rel]  # a walk, not a recursion: a planted tree can be any depth
    while pending:
        here = pending.pop()
        entry = record.get(here)
        if entry is None or not _matches(dest / here, entry):
            return False
        if entry.kind == "dir":
            try:
                with os.scandir(dest / here) as it:
                    pending += [f"{here}/{e.name}" for e in it]
            except OSError:
                return False
    return True


def _taken(path: Path) -> bool:
    """Something is at ``path``; an empty real directory holds nothing and counts as free."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True
    if stat.S_ISDIR(st.st_mode) and not is_link(st):
        try:
            with os.scandir(path) as it:
                return next(it, None) is not None
        except OSError:
            return True
    return True


def _kind_name(kind: str) -> str:
    return {"file": "a file", "symlink": "a symlink", "dir": "a directory"}.get(kind, kind)


def _entry_change(path: Path, entry: Entry) -> str | None:
    """What differs between ``path`` now and its recorded ``entry`` (``None``: nothing)."""
    now = entry_of(path, digest=False)
    if now is None:
        return "removed"
    if now.kind != entry.kind:
        return f"{_kind_name(now.kind)} now, {_kind_name(entry.kind)} when written"
    if now.kind == "symlink":
        if now.target != entry.target:
            return f"link target {entry.target!r} -> {now.target!r}"
        return None if now.inode == entry.inode else "the link replaced (same target)"
    if now.kind == "file":
        if now.size != entry.size:
            return f"size {entry.size} -> {now.size} bytes"
        current = entry_of(path)
        if current is not None and current.sha256 != entry.sha256:
            return "other contents, same size"
        if now.inode != entry.inode:
            return "replaced by a copy (same contents, another inode)"
    return None


def what_changed(dest: Path, rel: str, record: Mapping[str, Entry]) -> str:
    """Why a recorded ``rel`` is no longer this tool's: the first difference found, in it
    or (a directory) in what it holds — ``size 123 -> 456 bytes``, ``x/y: added``."""
    pending = [rel]
    while pending:
        here = pending.pop()
        entry = record.get(here)
        where = "" if here == rel else f"{here[len(rel) + 1 :]}: "
        if entry is None:
            return f"{where}added"
        change = _entry_change(dest / here, entry)
        if change is not None:
            return where + change
        if entry.kind == "dir":
            try:
                with os.scandir(dest / here) as it:
                    pending += sorted((f"{here}/{e.name}" for e in it), reverse=True)
            except OSError as exc:
                return f"{where}cannot be read ({exc.strerror})"
    return "changed"


def _why(dest: Path, rel: str, record: Mapping[str, Entry]) -> str:
    path = dest / rel
    if rel in record:
        return f"{CHANGED} ({what_changed(dest, rel, record)})"
    kind = "a symlink" if os.path.islink(path) else "a directory" if path.is_dir() else "a file"
    return f"{kind} not written by this tool"


def problems_in_the_way(
    dest: Path, outputs: Iterable[str], record: Mapping[str, Entry], owns: Owns
) -> list[str]:
    problems: dict[str, str] = {}
    for rel in outputs:
        sub = blocked_parent(dest, rel)
        if sub is not None:
            kind = "a symlink" if os.path.islink(dest / sub) else "not a directory"
            problems.setdefault(sub, f"{sub} exists and is {kind}")
        elif _taken(dest / rel) and owns != "named" and not is_ours(dest, rel, record):
            problems.setdefault(rel, f"{rel}: {_why(dest, rel, record)}")
    return list(problems.values())
