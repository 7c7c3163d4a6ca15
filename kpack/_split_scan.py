"""Scan one artifact directory into frozen, classified entries (private to :mod:`kpack.split`).

Every path below every stage dir is visited once, without following symlinks. Regular
files are classified in the order the spec demands: a database-handler match first (so
per-arch ``.so`` files that are also fat binaries move whole), then an ELF file with a
``.hip_fatbin`` (read from headers only), else a plain file.
"""

from __future__ import annotations

import enum
import logging
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kpack.artifact_names import check_stage_dir, check_symlink, read_manifest
from kpack.databases import DatabaseMatch, Handler, match_database
from kpack.errors import ArtifactError
from kpack.transform import FatBinaryInfo, inspect_fat_binary

__all__ = ["ArtifactScan", "Kind", "StageEntry", "read_stages", "scan_artifact"]

log = logging.getLogger(__name__)


class Kind(enum.Enum):
    DIR = "dir"
    SYMLINK = "symlink"
    PLAIN = "plain"
    DATABASE = "database"  # claimed by a handler (file or symlink)
    FAT = "fat"  # .hip_fatbin with wrappers: transformed
    FAT_UNWRAPPED = "fat-unwrapped"  # .hip_fatbin without wrappers: left unchanged
    TRANSFORMED = "transformed"  # already has HIPK wrappers / a marker: passed through


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


@dataclass(frozen=True)
class ArtifactScan:
    path: Path
    stages: tuple[str, ...]
    entries: tuple[StageEntry, ...]

    def of_kind(self, *kinds: Kind) -> tuple[StageEntry, ...]:
        return tuple(e for e in self.entries if e.kind in kinds)


def read_stages(artifact_dir: Path) -> tuple[str, ...]:
    """The manifest's stage dirs, validated, sorted; missing ones are logged and skipped."""
    manifest, lines = read_manifest(artifact_dir)
    stages = []
    for stage in lines:
        if check_stage_dir(artifact_dir, stage, manifest):
            stages.append(stage)
        else:
            log.warning("%s: stage directory %r does not exist; skipped", manifest, stage)
    return tuple(stages)


def scan_artifact(artifact_dir: Path, handlers: Sequence[Handler]) -> ArtifactScan:
    """Walk and classify every stage dir of ``artifact_dir``."""
    stages = read_stages(artifact_dir)
    entries: list[StageEntry] = []
    for stage in stages:
        entries += _walk(artifact_dir / stage, stage, handlers)
    return ArtifactScan(artifact_dir, stages, tuple(entries))


def _walk(stage_dir: Path, stage: str, handlers: Sequence[Handler]) -> list[StageEntry]:
    out: list[StageEntry] = []
    pending = [(stage_dir, "")]
    while pending:
        directory, prefix = pending.pop()
        with os.scandir(directory) as it:
            children = sorted(it, key=lambda e: e.name)
        for child in children:
            relpath = prefix + child.name
            st = child.stat(follow_symlinks=False)
            entry = _classify(Path(child.path), stage_dir, stage, relpath, st, handlers)
            out.append(entry)
            if entry.kind is Kind.DIR:
                pending.append((Path(child.path), relpath + "/"))
    return sorted(out, key=lambda e: e.relpath)


def _classify(
    path: Path,
    stage_dir: Path,
    stage: str,
    relpath: str,
    st: os.stat_result,
    handlers: Sequence[Handler],
) -> StageEntry:
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISDIR(st.st_mode):
        return StageEntry(stage, relpath, Kind.DIR, path, mode)
    if not (stat.S_ISLNK(st.st_mode) or stat.S_ISREG(st.st_mode)):
        raise ArtifactError("not a regular file, directory or symlink", path=path)
    link = check_symlink(stage_dir, path) if stat.S_ISLNK(st.st_mode) else None
    database = match_database(relpath, handlers)
    if database is not None:
        return StageEntry(stage, relpath, Kind.DATABASE, path, mode, st.st_size, link, database)
    if stat.S_ISLNK(st.st_mode):
        return StageEntry(stage, relpath, Kind.SYMLINK, path, mode, link=link)
    fat = inspect_fat_binary(path)
    if fat is None:
        return StageEntry(stage, relpath, Kind.PLAIN, path, mode, st.st_size)
    if fat.already_transformed:
        kind = Kind.TRANSFORMED
    elif fat.wrapper_count == 0:
        kind = Kind.FAT_UNWRAPPED
    else:
        kind = Kind.FAT
    return StageEntry(stage, relpath, kind, path, mode, st.st_size, fat=fat)
