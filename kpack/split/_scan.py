"""Classify an artifact's entries for the split (private to :mod:`kpack.split`).

The entries are those of :mod:`kpack.artifact.tree`, the one walker and the one entry model
of an artifact (the package builder classifies the entries of its catalog; ``kpack
split-artifacts`` walks the directory first); the split only sorts them. Regular files are
classified in the order the spec demands: a database-handler match first (so per-arch
``.so`` files that are also fat binaries move whole), then an ELF or PE file with device
code (read from headers only), else a file kept as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kpack.artifact.names import ArtifactId
from kpack.artifact.tree import Entry, EntryKind, read_stages, walk_stages
from kpack.databases import DatabaseMatch, Handler, match_database
from kpack.transform import FatBinaryInfo, inspect_fat_binary

__all__ = ["ArtifactScan", "DatabaseFile", "classify_entries", "kernel_name", "scan_artifact"]


def kernel_name(entry: Entry) -> str:
    """The binary key of ``entry`` without ``#N``: ``<stage dir>/<relpath>``."""
    return f"{entry.stage}/{entry.relpath}"


@dataclass(frozen=True)
class DatabaseFile:
    """A file (or symlink) claimed by a database handler, moved to ``P_<base arch>``."""

    entry: Entry
    match: DatabaseMatch

    @property
    def kernel_name(self) -> str:
        return kernel_name(self.entry)

    @property
    def target(self) -> str:
        """The output it moves to: ``P_<target>``, the handler's base arch."""
        return self.match.base_arch


@dataclass(frozen=True, kw_only=True)
class ArtifactScan:
    """An artifact's entries, sorted for the split, each in walk order."""

    path: Path
    stages: tuple[str, ...]
    kept: tuple[Entry, ...]  # go to P_generic as they are (dirs, symlinks, other files)
    fat: tuple[Entry, ...]  # fat binaries with wrappers: transformed
    databases: tuple[DatabaseFile, ...]  # claimed by a handler, in scope or not
    notes: tuple[str, ...]  # device code left as it is, one line per file


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
    kept: list[Entry] = []
    fat: list[Entry] = []
    databases: list[DatabaseFile] = []
    notes: list[str] = []
    for entry in entries:
        match = None if entry.kind is EntryKind.DIR else match_database(entry.relpath, handlers)
        if match is not None:
            databases.append(DatabaseFile(entry, match))
            continue
        info = fat_of(entry.source) if entry.kind is EntryKind.FILE else None
        if info is not None and not info.already_transformed and info.wrapper_count > 0:
            fat.append(entry)
            continue
        kept.append(entry)
        if info is None:
            continue
        if info.already_transformed:
            notes.append(f"{kernel_name(entry)}: already transformed; passed through unchanged")
        else:
            notes.append(
                f"{kernel_name(entry)}: .hip_fatbin without .hipFatBinSegment wrappers; "
                "left unchanged in the generic output"
            )
    return ArtifactScan(
        path=artifact_dir,
        stages=stages,
        kept=tuple(kept),
        fat=tuple(fat),
        databases=tuple(databases),
        notes=tuple(notes),
    )
