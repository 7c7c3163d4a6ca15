"""One rule for a tool's output directory: a re-run replaces what the tool wrote there
before and leaves every other file alone.

A tool stages its outputs in a temporary directory inside the destination, then
:func:`publish` moves them into place. What it wrote is recorded in a small JSON file in
the destination (its name chosen by the tool): each output's path, kind, size and
modification time. The next run treats as its own only what that record lists *and* what
is still as recorded; a file someone else wrote (or rewrote since) is never deleted or
overwritten unless ``force`` is given, and the error lists a few of them and their count.

Publishing is all or nothing: every step is noted before it is taken, so a failure or a
signal (which unwinds as an exception, :mod:`kpack.common.boundary`) puts back each file
as it was found, the old record included.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from collections.abc import Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from kpack.common.tempdirs import make_temp_dir, temp_dir_name
from kpack.errors import PackagingError, UsageError

__all__ = [
    "MAX_LISTED",
    "Publication",
    "Recorded",
    "check_outputs",
    "publish",
    "publish_all",
    "read_record",
    "record_beside",
    "shown_list",
]

#: Entries a problem list shows before it gives the count of the rest.
MAX_LISTED = 5
_FORMAT = 1


@dataclass(frozen=True)
class Recorded:
    """One output as the record lists it; a directory output has no size or time."""

    kind: str  # "file" or "dir"
    size: int = 0
    mtime_ns: int = 0

    @staticmethod
    def of(path: Path) -> Recorded:
        st = path.lstat()
        if stat.S_ISDIR(st.st_mode):
            return Recorded("dir")
        return Recorded("file", st.st_size, st.st_mtime_ns)


def shown_list(items: Sequence[str], limit: int = MAX_LISTED) -> list[str]:
    """At most ``limit`` items, then ``... and N more``."""
    shown = list(items[:limit])
    if len(items) > limit:
        shown.append(f"... and {len(items) - limit} more")
    return shown


def read_record(path: Path, tool: str) -> dict[str, Recorded]:
    """The outputs ``tool`` recorded in ``path``; none if there is no record, or if it is a
    symlink, unreadable, another tool's or not in this format (then nothing is known to be
    the tool's, and the files in the way need ``force``)."""
    if path.is_symlink() or not path.is_file():
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("tool") != tool or doc.get("format") != _FORMAT:
            return {}
        return {
            str(rel): Recorded(str(e["kind"]), int(e.get("size", 0)), int(e.get("mtime_ns", 0)))
            for rel, e in doc["outputs"].items()
            if _is_relative(str(rel))
        }
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}


def _is_relative(rel: str) -> bool:
    """A plain path below the destination (no ``..``, not absolute): a record that was
    edited must not make the tool delete anything elsewhere."""
    parts = PurePosixPath(rel).parts
    return bool(parts) and not PurePosixPath(rel).is_absolute() and ".." not in parts


def _is_ours(dest: Path, rel: str, record: Mapping[str, Recorded]) -> bool:
    """``rel`` is listed in the record and still as recorded."""
    entry = record.get(rel)
    if entry is None:
        return False
    try:
        now = Recorded.of(dest / rel)
    except OSError:
        return False
    return now == entry


def _blocked_parents(dest: Path, rel: str) -> list[str]:
    """The parent directories of ``rel`` whose place holds something else (a file, or a
    symlink, which is never written through)."""
    blocked = []
    parts = PurePosixPath(rel).parts[:-1]
    for i in range(1, len(parts) + 1):
        sub = "/".join(parts[:i])
        path = dest / sub
        if path.is_symlink() or (os.path.lexists(path) and not path.is_dir()):
            blocked.append(sub)
            break
    return blocked


def _problems(dest: Path, outputs: Iterable[str], record: Mapping[str, Recorded]) -> list[str]:
    problems: dict[str, str] = {}
    for rel in outputs:
        for sub in _blocked_parents(dest, rel):
            kind = "a symlink" if (dest / sub).is_symlink() else "not a directory"
            problems.setdefault(sub, f"{sub} exists and is {kind}")
        path = dest / rel
        if os.path.lexists(path) and not _is_ours(dest, rel, record):
            if path.is_dir() and not path.is_symlink():
                problems.setdefault(rel, f"{rel} is a directory")
            else:
                problems.setdefault(rel, f"{rel} was not written by this tool")
    return list(problems.values())


def check_outputs(
    dest: Path,
    outputs: Iterable[str],
    *,
    record_name: str,
    tool: str,
    force: bool,
) -> None:
    """Refuse (without ``force``) when an output's place, or one of its parent directories'
    places, holds something this tool did not write. Callable before the work starts, for
    the outputs whose names are known then."""
    if force:
        return
    record = read_record(dest / record_name, tool)
    problems = _problems(dest, outputs, record)
    if problems:
        raise PackagingError(
            f"cannot publish: {len(problems)} in the way, not written by {tool} (see --force)",
            path=dest,
            problems=shown_list(problems),
        )


@dataclass
class _Journal:
    """Each step of :func:`publish`, noted before it is taken, so it can be taken back."""

    trash: Path
    moved: list[tuple[Path, Path]] = field(default_factory=list)  # (from, to)
    made: list[Path] = field(default_factory=list)
    count: int = 0

    def move(self, source: Path, target: Path) -> None:
        self.moved.append((source, target))
        os.rename(source, target)

    def discard(self, path: Path) -> None:
        """Move ``path`` into the trash (deleted once everything is in place)."""
        self.count += 1
        self.move(path, self.trash / str(self.count))

    def make_dirs(self, path: Path) -> None:
        missing = []
        for directory in (path, *path.parents):
            if os.path.lexists(directory):
                break
            missing.append(directory)
        for directory in reversed(missing):
            self.made.append(directory)
            directory.mkdir()

    def undo(self) -> None:
        for source, target in reversed(self.moved):
            with suppress(OSError):
                os.rename(target, source)
        for directory in reversed(self.made):
            with suppress(OSError):
                directory.rmdir()


@dataclass(frozen=True)
class Publication:
    """One destination of :func:`publish_all`: each output ``staged/<rel>`` goes to
    ``dest/<rel>``, recorded in ``dest/<record_name>``."""

    dest: Path
    staged: Path
    outputs: tuple[str, ...]
    record_name: str


def publish(
    dest: Path,
    staged: Path,
    outputs: Sequence[str],
    *,
    record_name: str,
    tool: str,
    force: bool,
) -> None:
    """Move each output ``staged/<rel>`` to ``dest/<rel>`` (``rel`` a relative POSIX path;
    a directory output moves whole), remove what the previous record lists that this run
    did not write again, and write the new record. ``staged`` must lie in ``dest``'s file
    system. All or nothing."""
    publish_all([Publication(dest, staged, tuple(outputs), record_name)], tool=tool, force=force)


def publish_all(publications: Sequence[Publication], *, tool: str, force: bool) -> None:
    """:func:`publish` into several destinations as one step: every destination is checked
    before anything moves, and a failure in one takes back those published before it."""
    for pub in publications:
        check_outputs(pub.dest, pub.outputs, record_name=pub.record_name, tool=tool, force=force)
    done: list[tuple[_Journal, Path, list[str]]] = []
    dest = publications[0].dest if publications else Path()
    try:
        for pub in publications:
            dest = pub.dest
            journal = _Journal(temp_dir_name(dest, f".{tool}-old-"))
            record = read_record(dest / pub.record_name, tool)
            stale = [r for r in sorted(record) if r not in pub.outputs]
            stale = [r for r in stale if _is_ours(dest, r, record)]
            done.append((journal, dest, stale))  # before its first step: undo covers it
            _publish_one(journal, pub, stale, tool)
    except BaseException as exc:
        for journal, _dest, _stale in reversed(done):
            journal.undo()
            shutil.rmtree(journal.trash, ignore_errors=True)
        if isinstance(exc, OSError):
            raise PackagingError(f"cannot publish the outputs: {exc.strerror}", path=dest) from exc
        raise
    for journal, dest, stale in done:
        shutil.rmtree(journal.trash, ignore_errors=True)
        _remove_empty_parents(dest, stale)


def _publish_one(journal: _Journal, pub: Publication, stale: Sequence[str], tool: str) -> None:
    journal.make_dirs(pub.dest)
    make_temp_dir(journal.trash)
    for rel in pub.outputs:
        _place(journal, pub.dest, pub.staged / rel, rel)
    for rel in stale:
        journal.discard(pub.dest / rel)
    _write_record(journal, pub.dest, pub.dest / pub.record_name, pub.outputs, tool)


def record_beside(directory: Path, tool: str) -> str:
    """The name of the record of ``tool``'s outputs in ``directory``, kept in its parent
    (beside it, so the directory holds the outputs only): ``.<tool>.<name>.json``, a name
    too long for that shortened to a digest."""
    name = Path(os.path.abspath(directory)).name
    if len(name.encode("utf-8", "surrogateescape")) > 160:
        digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:16]
        name = f"{name[:40]}-{digest}"
    return f".{tool}.{name}.json"


def _place(journal: _Journal, dest: Path, source: Path, rel: str) -> None:
    for sub in _blocked_parents(dest, rel):  # only with force: checked before
        journal.discard(dest / sub)
    final = dest / rel
    journal.make_dirs(final.parent)
    if os.path.lexists(final):
        journal.discard(final)
    journal.move(source, final)


def _write_record(
    journal: _Journal, dest: Path, record_path: Path, outputs: Sequence[str], tool: str
) -> None:
    doc = {
        "tool": tool,
        "format": _FORMAT,
        "outputs": {
            rel: {k: v for k, v in vars(Recorded.of(dest / rel)).items() if v or k == "kind"}
            for rel in sorted(outputs)
        },
    }
    new = journal.trash / "record.json"
    new.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    if os.path.lexists(record_path):
        if record_path.is_dir() and not record_path.is_symlink():
            raise UsageError("is a directory, where the record of outputs goes", path=record_path)
        journal.discard(record_path)
    journal.move(new, record_path)


def _remove_empty_parents(dest: Path, removed: Iterable[str]) -> None:
    """Directories left empty by removing old outputs held nothing but those: they go."""
    for rel in removed:
        for parent in (dest / rel).parents:
            if parent == dest or dest not in parent.parents:
                break
            try:
                parent.rmdir()
            except OSError:
                break
