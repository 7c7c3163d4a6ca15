"""The record a tool keeps of what it wrote into an output directory, and the fingerprints
that decide whether a file there is still what the tool wrote.

A record is a claim, never an authority (:mod:`kpack.common.outputs` acts on it): it lists,
by relative POSIX path below the output directory, every file, symlink and directory the
last run published, each with a fingerprint:

- a file: its size, its inode number once in place and the sha256 of its bytes. A size or
  inode that differs short-cuts the comparison; a match never decides alone. The inode ties
  the claim to the file this tool made: a record planted ahead of time (in a tarball of a
  ``dist/``, a shared workspace) cannot name the inode of a file the user puts there later,
  even one whose bytes it knows (a wheel from PyPI);
- a symlink: its target text and inode number (a symlink is never followed);
- a directory: nothing; it is the tool's only while every entry in it is.

One format for every tool (``"format": "rocm-packaging-output-record/2"``, plus the writing
tool's name). The file is read bounded (size and JSON depth), and every name in it must pass
the same check as an output name (:func:`kpack.common.safepath.safe_relpath`). A record that
is not a regular file, is malformed, names a path that could leave the directory, or was
written by another tool or format is one error naming it and how to recover; with ``force``
it is ignored (with a warning) and then owns nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path

from kpack.common.frozen import frozen
from kpack.common.jsonfile import load_json_object
from kpack.common.safepath import safe_relpath
from kpack.common.workers import thread_min_bytes
from kpack.errors import PackagingError, RocmPackagingError

__all__ = [
    "FORMAT",
    "Entry",
    "entry_of",
    "is_link",
    "read_record",
    "record_bytes",
    "staged_entries",
    "write_record_file",
]

log = logging.getLogger(__name__)

FORMAT = "rocm-packaging-output-record/2"
#: A record's permission bits: writable by the user who ran the tool only.
RECORD_MODE = 0o644
#: Files a record lists are hashed in this many threads (hashlib releases the GIL).
_HASH_THREADS = 2
_CHUNK = 1 << 20
_HEX = frozenset("0123456789abcdef")


@frozen(kw_only=True)
class Entry:
    """One recorded output: ``kind`` is ``file``, ``symlink`` or ``dir``."""

    kind: str
    size: int = 0
    sha256: str = ""
    inode: int = 0
    target: str = ""

    def as_json(self) -> dict[str, object]:
        if self.kind == "file":
            return {"kind": "file", "size": self.size, "sha256": self.sha256, "inode": self.inode}
        if self.kind == "symlink":
            return {"kind": "symlink", "target": self.target, "inode": self.inode}
        return {"kind": "dir"}


def is_link(st: os.stat_result) -> bool:
    """A symlink, or on Windows any reparse point (a junction too): never walked through."""
    if stat.S_ISLNK(st.st_mode):
        return True
    attributes = getattr(st, "st_file_attributes", 0)
    return bool(attributes & getattr(stat, "FILE_ATTRIBUTE_REPARSE_POINT", 0))


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The sha256 of a regular file's bytes; the file is opened without following a link."""
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0))
    with open(fd, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def entry_of(path: Path, *, digest: bool = True) -> Entry | None:
    """What ``path`` is now (never following it), or None for a missing path or anything
    that is neither a file, a symlink nor a directory. ``digest=False`` leaves a file's
    sha256 empty (the caller hashes later, or compares sizes first)."""
    try:
        st = os.lstat(path)
    except OSError:  # missing, or a name the system cannot look up: nothing of ours
        return None
    if is_link(st):
        return Entry(kind="symlink", target=os.readlink(path), inode=st.st_ino)
    if stat.S_ISDIR(st.st_mode):
        return Entry(kind="dir")
    if stat.S_ISREG(st.st_mode):
        sha = file_sha256(path) if digest else ""
        return Entry(kind="file", size=st.st_size, sha256=sha, inode=st.st_ino)
    return None


def _walk(root: Path, rel: str) -> Iterator[tuple[str, os.stat_result]]:
    """``rel`` and everything below it, never following a link."""
    pending = [rel]
    while pending:
        here = pending.pop()
        st = os.lstat(root / here)
        yield here, st
        if stat.S_ISDIR(st.st_mode) and not is_link(st):
            with os.scandir(root / here) as it:
                pending += sorted((f"{here}/{e.name}" for e in it), reverse=True)


def staged_entries(root: Path, outputs: tuple[str, ...]) -> dict[str, Entry]:
    """The entries of each output ``root/<rel>`` (a file, a symlink or a whole tree), with
    every file hashed, by relative path."""
    found: dict[str, os.stat_result] = {}
    for rel in outputs:
        found.update(_walk(root, rel))
    files = sorted(rel for rel, st in found.items() if stat.S_ISREG(st.st_mode))
    digests = _digests(root, files, sum(found[rel].st_size for rel in files))
    entries: dict[str, Entry] = {}
    for rel, st in sorted(found.items()):
        if is_link(st):
            entries[rel] = Entry(kind="symlink", target=os.readlink(root / rel))
        elif stat.S_ISDIR(st.st_mode):
            entries[rel] = Entry(kind="dir")
        elif stat.S_ISREG(st.st_mode):
            entries[rel] = Entry(kind="file", size=st.st_size, sha256=digests[rel])
        else:
            raise PackagingError("staged output is not a file, directory or symlink", path=rel)
    return entries


def _digests(root: Path, files: list[str], total: int) -> dict[str, str]:
    """The sha256 of each file of ``files`` (``total`` bytes in all): on threads when
    there is enough to hash for threads to pay (:mod:`kpack.common.workers`)."""
    if len(files) < 2 or total < thread_min_bytes():
        return {rel: file_sha256(root / rel) for rel in files}
    from kpack.common.threadpool import ThreadPool

    with ThreadPool(max_workers=_HASH_THREADS) as pool:
        return dict(zip(files, pool.map(lambda r: file_sha256(root / r), files), strict=True))


def record_bytes(tool: str, entries: Mapping[str, Entry]) -> bytes:
    """The record of ``entries`` as ``tool`` writes it: deterministic (sorted, no times)."""
    doc = {
        "format": FORMAT,
        "tool": tool,
        "outputs": {rel: entries[rel].as_json() for rel in sorted(entries)},
    }
    return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode("utf-8")


class _Bad(Exception):
    pass


def _entry(rel: object, value: object, source: Path) -> tuple[str, Entry]:
    try:
        name = safe_relpath(rel, what="recorded name", source=source).as_posix()
    except RocmPackagingError as exc:
        raise _Bad(exc.message) from None
    if not isinstance(value, dict):
        raise _Bad(f"entry {name!r} is not an object")
    kind = value.get("kind")
    if kind == "dir" and set(value) == {"kind"}:
        return name, Entry(kind="dir")
    if kind == "symlink" and set(value) == {"kind", "target", "inode"}:
        target, inode = value["target"], value["inode"]
        if (
            isinstance(target, str)
            and 0 < len(target) <= 4096
            and "\0" not in target
            and type(inode) is int
            and 0 <= inode < 1 << 64
        ):
            return name, Entry(kind="symlink", target=target, inode=inode)
    if kind == "file" and set(value) == {"kind", "size", "sha256", "inode"}:
        size, sha, inode = value["size"], value["sha256"], value["inode"]
        if (
            all(type(n) is int and 0 <= n < 1 << 64 for n in (size, inode))
            and isinstance(sha, str)
            and len(sha) == 64
            and set(sha) <= _HEX
        ):
            return name, Entry(kind="file", size=size, sha256=sha, inode=inode)
    raise _Bad(f"entry {name!r} is not a file, symlink or directory fingerprint")


def _untrusted(st: os.stat_result) -> str:
    """Why a record file with this status is no claim of this user's: not a regular file,
    or (on POSIX) another user's or writable by others — a record in a shared directory
    speaks only for the user running the tool, who wrote it read-only for everyone else."""
    if not stat.S_ISREG(st.st_mode) or is_link(st):
        return "not a regular file"
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        return f"owned by another user (uid {st.st_uid})"
    if hasattr(os, "geteuid") and st.st_mode & 0o022:
        return "writable by other users"
    return ""


def write_record_file(path: Path, data: bytes) -> None:
    """A new record at ``path`` (which must not exist), readable by all, writable by its
    owner only whatever the umask, as :func:`read_record` requires."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags | getattr(os, "O_BINARY", 0), RECORD_MODE)
    with open(fd, "wb") as handle:
        if hasattr(os, "fchmod"):
            os.fchmod(handle.fileno(), RECORD_MODE)
        handle.write(data)


def read_record(path: Path, tool: str, *, force: bool) -> dict[str, Entry]:
    """The entries ``tool`` recorded at ``path`` (no record: none). A record that cannot be
    trusted is an error naming it and how to recover; with ``force`` it is ignored."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):  # no record (nor, maybe, its directory)
        return {}
    except OSError as exc:
        problem = f"cannot be read ({exc.strerror})"
    else:
        problem = _untrusted(st)
    try:
        if problem:
            raise _Bad(problem)
        try:
            doc = load_json_object(path, error=PackagingError)
        except PackagingError as exc:
            raise _Bad(exc.message) from None
        if doc.get("format") != FORMAT or doc.get("tool") != tool:
            raise _Bad(f"not a record of {tool} in format {FORMAT}")
        outputs = doc.get("outputs")
        if set(doc) != {"format", "tool", "outputs"} or not isinstance(outputs, dict):
            raise _Bad("not a record of outputs")
        return dict(_entry(rel, value, path) for rel, value in outputs.items())
    except _Bad as exc:
        if force:
            log.warning("%s: output record ignored (--force): %s", path, exc)
            return {}
        raise PackagingError(
            f"untrusted record of earlier outputs: {exc}; nothing was changed. Remove it "
            "(and the files it lists, if they are yours to remove) or pass --force to ignore it",
            path=path,
        ) from None
