"""Scan a TheRock artifact tree once into a frozen catalog.

Layout (``artifact-tree.md``): ``<root>/{name}_{component}_{target}/artifact_manifest.txt``
lists stage directories; everything below a stage directory is addressed by its install
relpath. The scan validates the tree and refuses anything that would escape it.
"""

from __future__ import annotations

import enum
import json
import logging
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from kpack.artifact_names import (
    COMPONENTS,
    ArtifactId,
    Component,
    check_manifest_line,
    is_isa_target,
)
from kpack.errors import ArtifactError

__all__ = [
    "COMPONENTS",
    "THEROCK_MANIFEST_RELPATH",
    "Artifact",
    "ArtifactId",
    "Catalog",
    "Component",
    "Entry",
    "EntryKind",
    "check_manifest_line",
    "scan_artifact",
    "scan_artifacts",
]

log = logging.getLogger(__name__)

THEROCK_MANIFEST_RELPATH = (
    "base_lib_generic/base/aux-overlay/stage/share/therock/therock_manifest.json"
)
DIST_INFO_RELPATH = "share/therock/dist_info.json"
_ARCHIVE_SUFFIXES = (".tar.zst", ".tar.xz")


class EntryKind(enum.Enum):
    FILE = "file"
    DIR = "dir"
    SYMLINK = "symlink"


@dataclass(frozen=True)
class Entry:
    """One path below a stage directory."""

    relpath: str
    kind: EntryKind
    source: Path = field(compare=False)
    artifact: ArtifactId
    stage: str
    link: str | None = None
    size: int = 0
    mode: int = 0o644


@dataclass(frozen=True)
class Artifact:
    id: ArtifactId
    path: Path
    stages: tuple[str, ...]
    entries: tuple[Entry, ...]


@dataclass(frozen=True)
class Catalog:
    root: Path
    manifest_path: Path
    manifest: Mapping[str, Any]
    kpack_split: bool
    artifacts: tuple[Artifact, ...]

    def select(
        self, names: Iterable[str], components: Iterable[str], targets: Iterable[str]
    ) -> tuple[Artifact, ...]:
        n, c, t = set(names), set(components), set(targets)
        return tuple(
            a for a in self.artifacts if a.id.name in n and a.id.component in c and a.id.target in t
        )

    @property
    def targets(self) -> tuple[str, ...]:
        """Non-generic targets found on disk, sorted."""
        return tuple(sorted({a.id.target for a in self.artifacts} - {"generic"}))


def _read_stage_list(artifact_dir: Path) -> tuple[str, ...]:
    manifest = artifact_dir / "artifact_manifest.txt"
    try:
        text = manifest.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ArtifactError(f"not UTF-8 text: {exc}", path=manifest) from exc
    stages: list[str] = []
    for line in (raw.strip() for raw in text.splitlines()):
        if not line:
            continue
        stage = check_manifest_line(line, manifest)
        stage_dir = artifact_dir / stage
        if not stage_dir.is_dir() or stage_dir.is_symlink():
            raise ArtifactError(f"stage directory {stage!r} does not exist", path=manifest)
        if not stage_dir.resolve().is_relative_to(artifact_dir.resolve()):
            raise ArtifactError(f"stage directory {stage!r} leads outside the tree", path=manifest)
        stages.append(stage)
    return tuple(sorted(dict.fromkeys(stages)))


def _link_entry(path: Path, relpath: str, common: dict[str, Any]) -> Entry:
    target = os.readlink(path)
    resolved = PurePosixPath(os.path.normpath(os.path.join(os.path.dirname(relpath), target)))
    if os.path.isabs(target) or resolved.parts[:1] == ("..",):
        raise ArtifactError(f"symlink -> {target!r} leads outside the artifact tree", path=path)
    return Entry(relpath=relpath, kind=EntryKind.SYMLINK, link=target, **common)


def _walk_stage(artifact: ArtifactId, stage: str, stage_dir: Path) -> list[Entry]:
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
            common: dict[str, Any] = {"source": path, "artifact": artifact, "stage": stage}
            if stat.S_ISLNK(st.st_mode):
                entries.append(_link_entry(path, relpath, common))
            elif stat.S_ISDIR(st.st_mode):
                entries.append(Entry(relpath=relpath, kind=EntryKind.DIR, **common))
                pending.append((path, relpath + "/"))
            elif stat.S_ISREG(st.st_mode):
                mode = stat.S_IMODE(st.st_mode)
                entries.append(
                    Entry(
                        relpath=relpath, kind=EntryKind.FILE, size=st.st_size, mode=mode, **common
                    )
                )
            else:
                raise ArtifactError("not a regular file, directory or symlink", path=path)
    return sorted(entries, key=lambda e: e.relpath)


def _load_therock_manifest(root: Path) -> tuple[Path, Mapping[str, Any], bool]:
    path = root / THEROCK_MANIFEST_RELPATH
    if not path.is_file():
        raise ArtifactError(
            f"therock_manifest.json is missing; expected it at {THEROCK_MANIFEST_RELPATH}",
            path=root,
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArtifactError(f"malformed JSON: {exc}", path=path) from exc
    if not isinstance(data, dict):
        raise ArtifactError("top level must be a JSON object", path=path)
    flags = data.get("flags", {})
    if not isinstance(flags, dict):
        raise ArtifactError("'flags' must be a JSON object", path=path)
    value = flags.get("KPACK_SPLIT_ARTIFACTS", False)
    if not isinstance(value, bool):
        raise ArtifactError(
            f"flags.KPACK_SPLIT_ARTIFACTS must be JSON true or false, got {value!r}", path=path
        )
    return path, data, value


def _check_targets(artifacts: list[Artifact], kpack_split: bool) -> None:
    if not kpack_split:
        return
    bad = sorted(
        {
            a.id.dirname
            for a in artifacts
            if a.id.target != "generic" and not is_isa_target(a.id.target)
        }
    )
    if bad:
        raise ArtifactError(
            "kpack-split mode needs ISA targets (gfx<hex>[:feature±]) or 'generic'; found: "
            + ", ".join(bad)
        )


def scan_artifact(path: Path) -> Artifact | None:
    """One artifact directory; None (logged) if its name does not parse as an artifact."""
    art_id = ArtifactId.parse(path.name)
    if art_id is None or not path.is_dir() or path.is_symlink():
        log.debug("skipping %s: not an artifact directory", path)
        return None
    if not (path / "artifact_manifest.txt").is_file():
        raise ArtifactError("artifact directory has no artifact_manifest.txt", path=path)
    stages = _read_stage_list(path)
    entries = [e for s in stages for e in _walk_stage(art_id, s, path / s)]
    return Artifact(art_id, path, stages, tuple(entries))


def scan_artifacts(root: Path) -> Catalog:
    """Scan and validate the whole tree; raises :class:`ArtifactError` on bad input."""
    if not root.is_dir():
        raise ArtifactError("artifact directory does not exist or is not a directory", path=root)
    artifacts: list[Artifact] = []
    archives: list[str] = []
    for child in sorted(root.iterdir(), key=lambda p: p.name):
        if child.name.endswith(_ARCHIVE_SUFFIXES):
            archives.append(child.name)
            continue
        artifact = scan_artifact(child)
        if artifact is not None:
            artifacts.append(artifact)
    if not artifacts and archives:
        raise ArtifactError(
            f"found only artifact archives ({', '.join(archives[:3])}...); extract them first "
            "(each holds one artifact directory)",
            path=root,
        )
    manifest_path, manifest, kpack_split = _load_therock_manifest(root)
    _check_targets(artifacts, kpack_split)
    return Catalog(root, manifest_path, manifest, kpack_split, tuple(artifacts))
