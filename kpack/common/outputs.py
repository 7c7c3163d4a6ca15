"""One rule for every tool's output directory: a re-run replaces what the tool wrote there
before and leaves every other file alone.

A run builds its outputs in a marked staging directory inside the destination
(:func:`staging`), then :func:`publish_all` moves them into place and rewrites the tool's
record (:mod:`kpack.common.output_record`). The record is a claim to check, never an
authority:

- every name in it passes the same check as an output name, and is looked up without
  following a symlink in any component: a recorded path whose parent is a symlink (or not a
  directory) is never touched;
- a file is replaced or removed only while its bytes still match the record (sha256); a
  symlink only while its target does; a directory only when everything in it is the tool's,
  and a directory the new outputs no longer need only once it is empty;
- something in the way of a new output that is not the tool's stops the run before anything
  moves (listed, a few names and a count), unless ``force``; ``force`` never lets a stale
  entry that is not the tool's be removed.

Publishing is all or nothing: each step is noted before it is taken, so a failure or a
signal (which unwinds as an exception, :mod:`kpack.common.boundary`) puts back each file as
it was found. Staging left behind by a killed run (:mod:`kpack.common.staging`) is removed
by the next run of the same tool into the same destination, with one notice.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Collection, Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from kpack.common.frozen import frozen
from kpack.common.output_claims import (
    CHANGED,
    OWNS,
    Owns,
    blocked_parent,
    is_ours,
    problems_in_the_way,
)
from kpack.common.output_record import (
    Entry,
    is_link,
    read_record,
    record_bytes,
    staged_entries,
    write_record_file,
)
from kpack.common.safepath import safe_relpath
from kpack.common.staging import Staging, refuse_symlinked, signals_held, staging
from kpack.errors import PackagingError, shown_list

__all__ = [
    "Owns",
    "Publication",
    "check_outputs",
    "publish",
    "publish_all",
    "record_beside",
    "staging",
]

log = logging.getLogger(__name__)


@frozen(kw_only=True)
class Publication:
    """One destination: each output ``staged/<rel>`` goes to ``dest/<rel>`` (``rel`` a
    relative POSIX path; a directory moves whole), recorded in ``dest/<record>`` (None: a
    scratch destination, nothing recorded and nothing there the tool's)."""

    dest: Path
    staged: Path
    outputs: tuple[str, ...]
    record: str | None


def record_beside(directory: Path, tool: str) -> str:
    """The name of the record of ``tool``'s outputs in ``directory``, kept in its parent
    (beside it, so the directory holds the outputs only): ``.<tool>.<name>.json``."""
    name = Path(os.path.abspath(directory)).name
    return f".{tool.replace(' ', '-')}.{name}.json"


def _checked_names(outputs: Iterable[str], where: Path) -> tuple[str, ...]:
    return tuple(safe_relpath(rel, what="output name", source=where).as_posix() for rel in outputs)


def check_outputs(
    dest: Path,
    outputs: Iterable[str],
    *,
    record: str | None,
    tool: str,
    force: bool,
    owns: Owns = "recorded",
) -> None:
    """Refuse (without ``force``) when an output's place, or one of its parents' places,
    holds something this tool did not write; a record that cannot be trusted is refused
    too. Callable before the work starts, for the outputs whose names are known then."""
    names = _checked_names(outputs, dest)
    trusting = force or owns == "named"  # by name, the record decides nothing
    recorded = read_record(dest / record, tool, force=trusting) if record else {}
    problems = problems_in_the_way(dest, names, recorded, owns)
    if problems and not force:
        raise PackagingError(
            f"cannot publish: {len(problems)} in the way, {_whose(problems, tool)} (see --force)",
            path=dest,
            problems=shown_list(problems),
        )


def _whose(problems: Sequence[str], tool: str) -> str:
    """``changed since T wrote them``, ``not written by T``, or both with their counts."""
    changed = sum(CHANGED in p for p in problems)
    if not changed:
        return f"not written by {tool}"
    if changed == len(problems):
        return f"changed since {tool} wrote {'it' if changed == 1 else 'them'}"
    return f"{changed} changed since {tool} wrote them, {len(problems) - changed} not written by it"


# --- publishing ----------------------------------------------------------------------------


@dataclass
class _Journal:
    """Each step of a publication, noted before it is taken, so it can be taken back."""

    trash: Staging
    moved: list[tuple[Path, Path]] = field(default_factory=list)  # (from, to)
    made: list[Path] = field(default_factory=list)
    count: int = 0

    def move(self, source: Path, target: Path) -> None:
        self.moved.append((source, target))
        os.rename(source, target)

    def discard(self, path: Path) -> None:
        """Move ``path`` (never followed) into the trash, deleted once all is in place."""
        self.count += 1
        self.move(path, self.trash.path / str(self.count))

    def make_dirs(self, dest: Path, rel: str) -> None:
        parts = PurePosixPath(rel).parts
        for i in range(1, len(parts) + 1):
            directory = dest.joinpath(*parts[:i])
            if not os.path.lexists(directory):
                self.made.append(directory)
                directory.mkdir()

    def undo(self) -> None:
        """Every move taken back, the trash removed, then the directories made."""
        for source, target in reversed(self.moved):
            with suppress(OSError):
                os.rename(target, source)
        self.trash.remove()
        for directory in reversed(self.made):
            with suppress(OSError):
                directory.rmdir()


def _stale(
    dest: Path, record: Mapping[str, Entry], outputs: Sequence[str]
) -> tuple[list[str], list[str]]:
    """Recorded entries this run does not write again: the files and symlinks still the
    tool's (to remove), and the directories (removed later, only if empty)."""
    written = set(outputs)
    kept = set(written)
    for rel in outputs:
        kept.update(_parents(rel))
    stale = [rel for rel in record if rel not in kept and not _under(rel, written)]
    files, dirs = [], []
    for rel in stale:
        if record[rel].kind == "dir":
            dirs.append(rel)
        elif is_ours(dest, rel, record):
            files.append(rel)
        elif os.path.lexists(dest / rel):
            log.warning("%s: changed since this tool wrote it; left alone", dest / rel)
    return files, sorted(dirs, key=lambda r: -r.count("/"))


def _parents(rel: str) -> list[str]:
    """``a``, ``a/b`` for ``a/b/c``: the proper parents of a relative path."""
    parts = rel.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _under(rel: str, outputs: Collection[str]) -> bool:
    """``rel`` lies inside one of ``outputs`` (a set look-up per parent, not a scan)."""
    return any(parent in outputs for parent in _parents(rel))


@frozen(kw_only=True)
class _Step:
    pub: Publication
    record: dict[str, Entry]
    entries: dict[str, Entry]
    stale_files: list[str]
    stale_dirs: list[str]
    carried: dict[str, Entry]  # recorded before, not written now, kept in the record


def _plan(pub: Publication, tool: str, force: bool, owns: Owns) -> _Step:
    refuse_symlinked(pub.dest)
    outputs = _checked_names(pub.outputs, pub.dest)
    record = _checked_names([pub.record], pub.dest)[0] if pub.record else None
    check_outputs(pub.dest, outputs, record=record, tool=tool, force=force, owns=owns)
    trusting = force or owns == "named"
    recorded = read_record(pub.dest / record, tool, force=trusting) if record else {}
    entries = staged_entries(pub.staged, outputs)
    for rel in outputs:  # the parents of an output the tool made are its own directories
        entries.update((parent, Entry(kind="dir")) for parent in _parents(rel))
    files, dirs = ([], []) if owns == "named" else _stale(pub.dest, recorded, outputs)
    carried: dict[str, Entry] = {}
    if owns == "named":  # what it recorded before and does not write now stays recorded
        written = set(outputs)
        carried = {r: e for r, e in recorded.items() if r not in entries and not _under(r, written)}
    return _Step(
        pub=pub,
        record=recorded,
        entries=entries,
        stale_files=files,
        stale_dirs=dirs,
        carried=carried,
    )


def _place(journal: _Journal, step: _Step, rel: str) -> None:
    dest = step.pub.dest
    sub = blocked_parent(dest, rel)
    if sub is not None:  # only with force or ownership by name: checked before
        journal.discard(dest / sub)
    journal.make_dirs(dest, str(PurePosixPath(rel).parent) if "/" in rel else "")
    if os.path.lexists(dest / rel):
        journal.discard(dest / rel)
    journal.move(step.pub.staged / rel, dest / rel)


def _write_record(journal: _Journal, step: _Step, tool: str) -> None:
    dest, rel = step.pub.dest, step.pub.record
    if rel is None:
        return
    sub = blocked_parent(dest, rel)
    if sub is not None:
        raise PackagingError("exists and is not a directory, where records go", path=dest / sub)
    journal.make_dirs(dest, str(PurePosixPath(rel).parent) if "/" in rel else "")
    placed = {
        rel: replace(entry, inode=os.lstat(dest / rel).st_ino) if entry.kind != "dir" else entry
        for rel, entry in step.entries.items()
        if rel not in step.carried
    }
    new = journal.trash.path / "record.json"
    write_record_file(new, record_bytes(tool, {**step.carried, **placed}))
    final = dest / rel
    if os.path.lexists(final):
        if os.path.isdir(final) and not os.path.islink(final):
            raise PackagingError("is a directory, where the record of outputs goes", path=final)
        journal.discard(final)
    journal.move(new, final)


def _apply(journal: _Journal, step: _Step, tool: str) -> None:
    outputs = _checked_names(step.pub.outputs, step.pub.dest)
    for rel in outputs:
        _place(journal, step, rel)
    for rel in step.stale_files:
        journal.discard(step.pub.dest / rel)
    _write_record(journal, step, tool)


def _remove_empty(dest: Path, dirs: Sequence[str]) -> None:
    """Stale recorded directories, deepest first, each only if empty and still a real
    directory whose parents are real directories."""
    for rel in dirs:
        if blocked_parent(dest, rel) is not None:
            continue
        with suppress(OSError):
            st = os.lstat(dest / rel)
            if stat.S_ISDIR(st.st_mode) and not is_link(st):
                os.rmdir(dest / rel)


def publish_all(
    publications: Sequence[Publication], *, tool: str, force: bool, owns: Owns = "recorded"
) -> None:
    """Publish into several destinations as one step: every destination is checked (and
    every record read) before anything moves, and a failure in one takes back those
    published before it."""
    if owns not in OWNS:
        raise ValueError(f"owns must be one of {OWNS}, not {owns!r}")
    steps = [_plan(pub, tool, force, owns) for pub in publications]
    done: list[_Journal] = []
    dest = publications[0].dest if publications else Path()
    try:
        for step in steps:
            dest = step.pub.dest
            made = [d for d in (dest, *dest.parents) if not os.path.lexists(d)][::-1]
            dest.mkdir(parents=True, exist_ok=True)
            try:
                with signals_held():  # made and journaled as one step: no signal between
                    done.append(_Journal(Staging.make(dest, tool, purpose="replaced"), made=made))
            except BaseException:
                for directory in reversed(made):
                    with suppress(OSError):
                        directory.rmdir()
                raise
            _apply(done[-1], step, tool)
    except BaseException as exc:
        with signals_held():
            for journal in reversed(done):
                journal.undo()
        if isinstance(exc, OSError):
            raise PackagingError(f"cannot publish the outputs: {exc.strerror}", path=dest) from exc
        raise
    for journal, step in zip(done, steps, strict=True):
        journal.trash.remove()
        _remove_empty(step.pub.dest, step.stale_dirs)
        for rel in step.stale_files:
            log.info("removed %s (written by the last run, not by this one)", rel)


def publish(
    dest: Path,
    staged: Path,
    outputs: Sequence[str],
    *,
    record: str | None,
    tool: str,
    force: bool,
    owns: Owns = "recorded",
) -> None:
    """:func:`publish_all` into one destination."""
    pub = Publication(dest=dest, staged=staged, outputs=tuple(outputs), record=record)
    publish_all([pub], tool=tool, force=force, owns=owns)
