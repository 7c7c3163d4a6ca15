"""An artifact directory's stage trees, walked once into frozen entries.

The one walker and the one entry model of an artifact, for the package builder (which
scans a whole tree into a catalog) and for ``kpack split-artifacts`` (which classifies the
entries further: database files, fat binaries). Layout (``artifact-tree.md``):
``artifact_manifest.txt`` lists stage directories; everything below a stage directory is
addressed by its install relpath. Nothing is followed out of the tree: symlinks are
recorded (and refused when they resolve outside their stage), never walked through.
"""

from __future__ import annotations

import enum
import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from kpack.artifact.names import ArtifactId, check_stage_dir, check_symlink, read_manifest
from kpack.errors import ArtifactError

if TYPE_CHECKING:
    from kpack.artifact.planned import PlannedContent

__all__ = ["Artifact", "Entry", "EntryKind", "read_stages", "walk_stages"]

log = logging.getLogger(__name__)


class EntryKind(enum.Enum):
    FILE = "file"
    DIR = "dir"
    SYMLINK = "symlink"


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One path below a stage directory. ``artifact`` is ``None`` only for a directory
    whose name does not parse, split with an explicit prefix; ``planned`` is content a
    plan produces in place of ``source`` (a transformed binary, an archive)."""

    relpath: str
    kind: EntryKind
    source: Path = field(compare=False)
    artifact: ArtifactId | None
    stage: str
    link: str | None = None
    size: int = 0
    mode: int = 0o644
    planned: PlannedContent | None = field(default=None, compare=False, repr=False)

    @property
    def origin(self) -> str:
        """``<artifact dir>:<relpath>`` (``<stage>/<relpath>`` without an artifact id), for
        messages and reports."""
        if self.artifact is None:
            return f"{self.stage}/{self.relpath}"
        return f"{self.artifact.dirname}:{self.relpath}"


@dataclass(frozen=True)
class Artifact:
    id: ArtifactId
    path: Path
    stages: tuple[str, ...]
    entries: tuple[Entry, ...]


def read_stages(
    artifact_dir: Path, *, missing: Literal["error", "skip"] = "error"
) -> tuple[str, ...]:
    """The manifest's stage dirs, validated and sorted. A listed stage dir that does not
    exist is an error (the builder), or skipped with a warning (``kpack split-artifacts``,
    as rocm-kpack's splitter does)."""
    manifest, lines = read_manifest(artifact_dir)
    stages = []
    for stage in lines:
        if check_stage_dir(artifact_dir, stage, manifest):
            stages.append(stage)
        elif missing == "error":
            raise ArtifactError(f"stage directory {stage!r} does not exist", path=manifest)
        else:
            log.warning("%s: stage directory %r does not exist; skipped", manifest, stage)
    return tuple(stages)


def walk_stages(
    artifact_dir: Path, stages: tuple[str, ...], artifact: ArtifactId | None
) -> tuple[Entry, ...]:
    """Every path below every stage dir, each visited once, in (stage, relpath) order."""
    return tuple(e for s in stages for e in _walk(artifact, s, artifact_dir / s))


def _walk(artifact: ArtifactId | None, stage: str, stage_dir: Path) -> list[Entry]:
    entries: list[Entry] = []
    pending = [(stage_dir, "")]
    while pending:
        directory, prefix = pending.pop()
        with os.scandir(directory) as it:
            children = sorted(it, key=lambda e: e.name)
        for child in children:
            relpath = f"{prefix}{child.name}"
            path = Path(child.path)
            st = child.stat(follow_symlinks=False)
            mode = stat.S_IMODE(st.st_mode)
            link: str | None = None
            size = 0
            if stat.S_ISLNK(st.st_mode):
                kind, link = EntryKind.SYMLINK, check_symlink(stage_dir, path)
            elif stat.S_ISDIR(st.st_mode):
                kind = EntryKind.DIR
                pending.append((path, relpath + "/"))
            elif stat.S_ISREG(st.st_mode):
                kind, size = EntryKind.FILE, st.st_size
            else:
                raise ArtifactError("not a regular file, directory or symlink", path=path)
            entry = Entry(
                relpath=relpath,
                kind=kind,
                source=path,
                artifact=artifact,
                stage=stage,
                link=link,
                size=size,
                mode=mode,
            )
            entries.append(entry)
    return sorted(entries, key=lambda e: e.relpath)
