"""Merge the stage trees of selected artifacts into one install namespace.

Keyed by install relpath. Two artifacts providing the same relpath is fine when the
bytes (or link text) are identical; otherwise it is an error that names both sources.
Symlinks resolve inside the namespace (never on disk), so a link can only reach what
the same package ships.
"""

from __future__ import annotations

import filecmp
import os
import posixpath
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from kpack.errors import ArtifactError

from ..artifacts import Artifact, Entry, EntryKind
from ._globs import GlobSet

__all__ = ["Namespace", "merge"]

_MAX_LINK_HOPS = 40


def _same(a: Entry, b: Entry) -> bool:
    if a.kind is not b.kind:
        return False
    if a.kind is EntryKind.DIR:
        return True
    if a.kind is EntryKind.SYMLINK:
        return a.link == b.link
    return a.size == b.size and filecmp.cmp(a.source, b.source, shallow=False)


@dataclass(frozen=True)
class Namespace:
    """relpath -> Entry for one package selection."""

    entries: Mapping[str, Entry]

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries[k] for k in sorted(self.entries))

    def __contains__(self, relpath: object) -> bool:
        return relpath in self.entries

    def get(self, relpath: str) -> Entry | None:
        return self.entries.get(relpath)

    def resolve(self, relpath: str) -> Entry | None:
        """Follow symlinks (also in directory components) to a file or directory entry.

        Returns None for a dangling link, a loop, or a path that leaves the namespace.
        """
        parts = relpath.split("/")
        done: list[str] = []
        hops = 0
        while parts:
            current = "/".join([*done, parts[0]])
            entry = self.entries.get(current)
            if entry is None:
                return None
            if entry.kind is EntryKind.SYMLINK:
                hops += 1
                if hops > _MAX_LINK_HOPS or entry.link is None:
                    return None
                joined = posixpath.normpath(posixpath.join(posixpath.dirname(current), entry.link))
                if joined.startswith("../") or joined == ".." or os.path.isabs(joined):
                    return None
                parts = joined.split("/") + parts[1:]
                done = []
                continue
            done.append(parts.pop(0))
        return self.entries.get("/".join(done))


def merge(
    artifacts: Iterable[Artifact], *, include: GlobSet | None = None, exclude: GlobSet | None = None
) -> Namespace:
    """Merge entries in sorted artifact order, applying include/exclude filters."""
    merged: dict[str, Entry] = {}
    for artifact in sorted(artifacts, key=lambda a: a.id.dirname):
        for entry in artifact.entries:
            selected = include is None or include.matches(entry.relpath)
            if not selected and entry.kind is not EntryKind.DIR:
                continue
            if exclude is not None and exclude.matches(entry.relpath):
                continue
            prior = merged.get(entry.relpath)
            if prior is None:
                merged[entry.relpath] = entry
            elif not _same(prior, entry):
                raise ArtifactError(
                    f"{entry.relpath!r} is provided with different content by "
                    f"{prior.source} and {entry.source}"
                )
    if include is not None:
        merged = _drop_unused_dirs(merged)
    return Namespace(merged)


def _drop_unused_dirs(merged: dict[str, Entry]) -> dict[str, Entry]:
    """With an include filter, keep only directories that hold something selected."""
    used: set[str] = set()
    for relpath, entry in merged.items():
        if entry.kind is not EntryKind.DIR:
            parent = posixpath.dirname(relpath)
            while parent:
                used.add(parent)
                parent = posixpath.dirname(parent)
    return {k: v for k, v in merged.items() if v.kind is not EntryKind.DIR or k in used}
