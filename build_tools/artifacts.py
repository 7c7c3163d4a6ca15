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
from kpack.artifact.inputs import find_inputs
from kpack.artifact.names import COMPONENTS, ArtifactId, Component, check_manifest_line
from kpack.artifact.packed import PackedArtifact, naming_archive, unpack_artifact
from kpack.artifact.tree import Artifact, Entry, EntryKind, read_stages, walk_stages
from kpack.common.jsonfile import load_json_object
from kpack.common.threadpool import ThreadPool
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
    "PackedArtifact",
    "check_manifest_line",
    "find_inputs",
    "scan_artifact",
    "scan_artifacts",
]

log = logging.getLogger(__name__)

THEROCK_MANIFEST_RELPATH = (
    "base_lib_generic/base/aux-overlay/stage/share/therock/therock_manifest.json"
)
DIST_INFO_RELPATH = "share/therock/dist_info.json"


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
    #: Targets of the whole tree whose artifacts this shard does not read (``--tree-targets``)
    absent_targets: tuple[str, ...] = ()
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
        """Non-generic targets found on disk (and those of the whole tree a shard does not
        read), sorted."""
        found = {a.id.target for a in self.artifacts} | set(self.absent_targets)
        return tuple(sorted(found - {"generic"}))


def _load_therock_manifest(
    root: Path, artifacts: Iterable[Artifact]
) -> tuple[Path, Mapping[str, Any], bool]:
    holder, _, inner = THEROCK_MANIFEST_RELPATH.partition("/")
    base = next((a.path for a in artifacts if a.id.dirname == holder), root / holder)
    path = base / inner
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


def _spooled(packed: PackedArtifact, spool: Path) -> Artifact:
    """An archive streamed into ``spool`` and scanned as its extracted directory."""
    directory = unpack_artifact(packed, spool)
    with naming_archive(packed, directory):
        return scan_artifact(directory)


def _read_all(
    dirs: list[Path], archives: list[PackedArtifact], spool: Path | None, jobs: int
) -> list[Artifact]:
    artifacts = [scan_artifact(child) for child in dirs]
    if archives:
        if spool is None:
            raise ArtifactError(
                "holds artifact archives, but no spool directory was given to read them into",
                path=archives[0].path.parent,
            )
        with ThreadPool(max_workers=max(1, min(jobs, len(archives)))) as pool:
            artifacts += pool.map(lambda p: _spooled(p, spool), archives)
    return sorted(artifacts, key=lambda a: a.id.dirname)


def scan_artifacts(root: Path, *, spool: Path | None = None, jobs: int = 1) -> Catalog:
    """Scan and validate the whole tree; raises :class:`ArtifactError` on bad input.

    ``root`` may hold artifact dirs, TheRock's artifact archives, or both (never one
    artifact both ways); each archive is streamed once into ``spool`` (a private directory
    the caller removes), ``jobs`` at a time, and scanned there as its extracted directory."""
    if not root.is_dir():
        raise ArtifactError("artifact directory does not exist or is not a directory", path=root)
    dirs, archives, notices = find_inputs(root)
    artifacts = _read_all(dirs, archives, spool, jobs)
    manifest_path, manifest, kpack_split = _load_therock_manifest(root, artifacts)
    return Catalog(
        root=root,
        manifest_path=manifest_path,
        manifest=manifest,
        kpack_split=kpack_split,
        artifacts=tuple(artifacts),
        notices=tuple(notices),
    )
