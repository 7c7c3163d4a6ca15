"""Scan a TheRock artifact tree once into a frozen catalog.

Layout (``artifact-tree.md``): ``<root>/{name}_{component}_{target}/artifact_manifest.txt``
lists stage directories; everything below a stage directory is addressed by its install
relpath. The scan validates the tree and refuses anything that would escape it. Each
artifact is walked by :mod:`kpack.artifact.tree`, the walker and entry model that
``kpack split-artifacts`` uses too; the split of a fat artifact classifies these same
entries instead of walking the artifact again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kpack.artifact.facts import FactsTable
from kpack.artifact.names import COMPONENTS, ArtifactId, Component, check_manifest_line
from kpack.artifact.tree import Artifact, Entry, EntryKind, read_stages, walk_stages
from kpack.common.jsonfile import load_json_object
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


@dataclass(frozen=True, kw_only=True)
class Catalog:
    """The scanned tree. ``facts`` holds each file's header facts (ELF dynamic facts,
    device code), read once per file for the whole build by whoever asks first."""

    root: Path
    manifest_path: Path
    manifest: Mapping[str, Any]
    kpack_split: bool
    artifacts: tuple[Artifact, ...]
    notices: tuple[str, ...] = ()
    facts: FactsTable = field(default_factory=FactsTable, compare=False, repr=False)

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


def _load_therock_manifest(root: Path) -> tuple[Path, Mapping[str, Any], bool]:
    path = root / THEROCK_MANIFEST_RELPATH
    if not path.is_file():
        raise ArtifactError(
            f"therock_manifest.json is missing; expected it at {THEROCK_MANIFEST_RELPATH}",
            path=root,
        )
    data = load_json_object(path, error=ArtifactError)
    flags = data.get("flags", {})
    if not isinstance(flags, dict):
        raise ArtifactError("'flags' must be a JSON object", path=path)
    value = flags.get("KPACK_SPLIT_ARTIFACTS", False)
    if not isinstance(value, bool):
        raise ArtifactError(
            f"flags.KPACK_SPLIT_ARTIFACTS must be JSON true or false, got {value!r}", path=path
        )
    return path, data, value


def scan_artifact(path: Path) -> Artifact:
    """One artifact directory (its name must parse: see :func:`scan_artifacts`)."""
    art_id = ArtifactId.parse(path.name)
    if art_id is None:
        raise ArtifactError(
            "name does not parse as {name}_{component}_{target} "
            f"(component one of {', '.join(COMPONENTS)})",
            path=path,
        )
    stages = read_stages(path)
    return Artifact(art_id, path, stages, walk_stages(path, stages, art_id))


def _triage(root: Path) -> tuple[list[Path], list[str], list[str]]:
    """Artifact dirs to scan and archive names; everything else is an error or a notice.

    TheRock's reader drops anything whose name does not parse, without a word. Here:
    a *directory* whose name does not parse (``rand_lib-gfx90a``), and an artifact dir that
    is a symlink, are errors — TheRock never writes either, so it is a mistake that would
    silently lose packages. Regular files (checksums, logs, copied manifests) and hidden
    entries (``.git``) are legitimately not artifacts: skipped with a notice.
    """
    dirs: list[Path] = []
    archives: list[str] = []
    problems: list[str] = []
    notices: list[str] = []
    for child in sorted(root.iterdir(), key=lambda p: p.name):
        if child.name.endswith(_ARCHIVE_SUFFIXES):
            archives.append(child.name)
        elif child.is_symlink():
            problems.append(f"{child.name}: is a symlink (artifact dirs are never followed)")
        elif child.name.startswith(".") or not child.is_dir():
            notices.append(f"skipping {child}: not an artifact directory")
        elif ArtifactId.parse(child.name) is None:
            problems.append(
                f"{child.name}: directory name does not parse as {{name}}_{{component}}_{{target}}"
            )
        else:
            dirs.append(child)
    if problems:
        raise ArtifactError("not artifact directories", path=root, problems=problems)
    return dirs, archives, notices


def scan_artifacts(root: Path) -> Catalog:
    """Scan and validate the whole tree; raises :class:`ArtifactError` on bad input."""
    if not root.is_dir():
        raise ArtifactError("artifact directory does not exist or is not a directory", path=root)
    dirs, archives, notices = _triage(root)
    artifacts = [scan_artifact(child) for child in dirs]
    if not artifacts and archives:
        raise ArtifactError(
            f"found only artifact archives ({', '.join(archives[:3])}...); extract them first "
            "(each holds one artifact directory)",
            path=root,
        )
    manifest_path, manifest, kpack_split = _load_therock_manifest(root)
    return Catalog(
        root=root,
        manifest_path=manifest_path,
        manifest=manifest,
        kpack_split=kpack_split,
        artifacts=tuple(artifacts),
        notices=tuple(notices),
    )
