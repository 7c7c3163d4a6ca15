"""Classify an artifact's entries for the split (private to :mod:`kpack.split`).

The entries come from :mod:`kpack.artifact.tree`, the one walker of an artifact (the
package builder classifies the entries of its catalog; ``kpack split-artifacts`` walks
the directory first). Regular files are classified in the order the spec demands: a
database-handler match first (so per-arch ``.so`` files that are also fat binaries move
whole), then an ELF or PE file with device code (read from headers only), else a plain
file.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kpack.artifact.names import ArtifactId
from kpack.artifact.planned import PlannedContent
from kpack.artifact.tree import Entry, EntryKind, read_stages, walk_stages
from kpack.databases import DatabaseMatch, Handler, match_database
from kpack.transform import FatBinaryInfo, inspect_fat_binary

__all__ = ["ArtifactScan", "Kind", "StageEntry", "classify_entries", "scan_artifact"]


class Kind(enum.Enum):
    DIR = "dir"
    SYMLINK = "symlink"
    PLAIN = "plain"
    DATABASE = "database"  # claimed by a handler (file or symlink)
    FAT = "fat"  # .hip_fatbin with wrappers: transformed
    FAT_UNWRAPPED = "fat-unwrapped"  # .hip_fatbin without wrappers: left unchanged
    TRANSFORMED = "transformed"  # already has HIPK wrappers / a marker: passed through


_ENTRY_KINDS = {Kind.DIR: EntryKind.DIR, Kind.SYMLINK: EntryKind.SYMLINK}


@dataclass(frozen=True)
class StageEntry:
    """One path below a stage dir, classified."""

    stage: str
    relpath: str
    kind: Kind
    source: Path
    mode: int
    size: int = 0
    link: str | None = None
    database: DatabaseMatch | None = None
    fat: FatBinaryInfo | None = None

    @property
    def kernel_name(self) -> str:
        """The binary key without ``#N``: ``<stage dir>/<relpath>``."""
        return f"{self.stage}/{self.relpath}"

    @property
    def depth(self) -> int:
        """Directories between the stage root and this entry."""
        return self.relpath.count("/")

    def as_entry(
        self,
        artifact: ArtifactId,
        *,
        size: int | None = None,
        planned: PlannedContent | None = None,
    ) -> Entry:
        """This path as an entry of the output ``artifact`` (a directory, a symlink or a
        file), with the planned content that replaces its source, if any."""
        kind = _ENTRY_KINDS.get(self.kind, EntryKind.FILE)
        size = self.size if size is None else size
        return Entry(
            self.relpath,
            kind,
            self.source,
            artifact,
            self.stage,
            self.link,
            size,
            self.mode,
            planned,
        )


@dataclass(frozen=True)
class ArtifactScan:
    path: Path
    stages: tuple[str, ...]
    entries: tuple[StageEntry, ...]

    def of_kind(self, *kinds: Kind) -> tuple[StageEntry, ...]:
        return tuple(e for e in self.entries if e.kind in kinds)


def scan_artifact(artifact_dir: Path, handlers: Sequence[Handler]) -> ArtifactScan:
    """Walk ``artifact_dir`` (a missing stage dir is skipped with a warning) and classify."""
    stages = read_stages(artifact_dir, missing="skip")
    entries = walk_stages(artifact_dir, stages, ArtifactId.parse(artifact_dir.name))
    return classify_entries(artifact_dir, stages, entries, handlers)


def classify_entries(
    artifact_dir: Path,
    stages: tuple[str, ...],
    entries: Sequence[Entry],
    handlers: Sequence[Handler],
    *,
    fat_of: Callable[[Path], FatBinaryInfo | None] = inspect_fat_binary,
) -> ArtifactScan:
    """The split's view of walked entries: each file's device code read from its headers
    by ``fat_of`` (the builder passes its catalog's facts table, read once per file)."""
    classified = tuple(_classify(e, handlers, fat_of) for e in entries)
    return ArtifactScan(artifact_dir, stages, classified)


def _classify(
    entry: Entry, handlers: Sequence[Handler], fat_of: Callable[[Path], FatBinaryInfo | None]
) -> StageEntry:
    stage, relpath, path, mode = entry.stage, entry.relpath, entry.source, entry.mode
    if entry.kind is EntryKind.DIR:
        return StageEntry(stage, relpath, Kind.DIR, path, mode)
    database = match_database(relpath, handlers)
    if database is not None:
        return StageEntry(
            stage, relpath, Kind.DATABASE, path, mode, entry.size, entry.link, database
        )
    if entry.kind is EntryKind.SYMLINK:
        return StageEntry(stage, relpath, Kind.SYMLINK, path, mode, link=entry.link)
    fat = fat_of(path)
    if fat is None:
        return StageEntry(stage, relpath, Kind.PLAIN, path, mode, entry.size)
    if fat.already_transformed:
        kind = Kind.TRANSFORMED
    elif fat.wrapper_count == 0:
        kind = Kind.FAT_UNWRAPPED
    else:
        kind = Kind.FAT
    return StageEntry(stage, relpath, kind, path, mode, entry.size, fat=fat)
