"""Kpack-split mode from fat artifacts: split them in-process before packaging.

A kpack-split tree may arrive already split (``P_generic`` host files plus ``P_<isa>``
archives, as rocm-kpack's splitter writes them) or fat (``P_generic`` holding complete
fat binaries). The reference then packages every fat library into a device wheel and
leaves the libraries wheel empty, exiting 0. We split fat artifacts with the kpack engine
instead, and refuse a tree that mixes both forms for one artifact.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from kpack.databases import load_handlers
from kpack.elf import scan_elf
from kpack.errors import ArtifactError
from kpack.hipfmt import GFXARCH
from kpack.resolve import read_kpack_ref
from kpack.split import split_artifact
from kpack.transform import inspect_fat_binary

from .artifacts import Artifact, Catalog, EntryKind, scan_artifact

__all__ = ["check_archive_references", "fat_artifacts", "split_fat_artifacts"]

log = logging.getLogger(__name__)


def _is_splittable(path: Path) -> bool:
    info = scan_elf(path)
    if info is None or not info.has_hip_fatbin:
        return False
    fat = inspect_fat_binary(path)
    return fat is not None and fat.wrapper_count > 0 and not fat.already_transformed


def fat_artifacts(catalog: Catalog, names: Sequence[str]) -> list[Artifact]:
    """Generic artifacts of ``names`` that still hold untransformed fat binaries."""
    wanted = set(names)
    out = []
    for artifact in catalog.artifacts:
        if artifact.id.target != "generic" or artifact.id.name not in wanted:
            continue
        if any(e.kind is EntryKind.FILE and _is_splittable(e.source) for e in artifact.entries):
            out.append(artifact)
    return out


def split_fat_artifacts(
    catalog: Catalog,
    names: Sequence[str],
    split_databases: Mapping[str, Sequence[str]],
    work: Path,
    *,
    jobs: int,
) -> Catalog:
    """Return a catalog in which every fat artifact is replaced by its split form."""
    fat = fat_artifacts(catalog, names)
    if not fat:
        return catalog
    replaced: dict[str, list[Artifact]] = {}
    for artifact in fat:
        prefix = f"{artifact.id.name}_{artifact.id.component}"
        presplit = [
            a.id.dirname
            for a in catalog.artifacts
            if (a.id.name, a.id.component) == (artifact.id.name, artifact.id.component)
            and a.id.target != "generic"
        ]
        if presplit:
            raise ArtifactError(
                f"holds unsplit fat binaries, but per-target artifacts for {prefix} exist too "
                f"({', '.join(sorted(presplit))}): the tree mixes split and unsplit forms",
                path=artifact.path,
            )
        handlers = load_handlers(split_databases.get(artifact.id.name, ()))
        log.info("splitting fat artifact %s", artifact.id.dirname)
        result = split_artifact(artifact.path, work, prefix=prefix, handlers=handlers, jobs=jobs)
        for note in result.notes:
            log.info("%s: %s", artifact.id.dirname, note)
        scanned = [scan_artifact(p) for p in result.outputs]
        replaced[artifact.id.dirname] = [a for a in scanned if a is not None]
    artifacts: list[Artifact] = []
    for artifact in catalog.artifacts:
        artifacts.extend(replaced.get(artifact.id.dirname, [artifact]))
    return replace(catalog, artifacts=tuple(sorted(artifacts, key=lambda a: a.id.dirname)))


def check_archive_references(catalog: Catalog, names: Sequence[str]) -> None:
    """Every kpack search path of every transformed host binary must name archives that
    some per-target artifact of the tree provides (for at least one target)."""
    wanted = set(names)
    provided = {
        e.relpath
        for a in catalog.artifacts
        if a.id.target != "generic"
        for e in a.entries
        if e.kind is EntryKind.FILE
    }
    targets = catalog.targets
    problems: list[str] = []
    for artifact in catalog.artifacts:
        if artifact.id.target != "generic" or artifact.id.name not in wanted:
            continue
        for entry in artifact.entries:
            if entry.kind is not EntryKind.FILE:
                continue
            info = scan_elf(entry.source)
            if info is None or not info.has_hip_fatbin:
                continue
            ref = read_kpack_ref(entry.source)
            if ref is None:
                continue
            for search in ref.search_paths:
                pattern = posixpath.normpath(
                    posixpath.join(posixpath.dirname(entry.relpath), search)
                )
                if not any(pattern.replace(GFXARCH, t) in provided for t in targets):
                    problems.append(f"{entry.source}: no artifact provides {pattern}")
    if problems:
        raise ArtifactError(
            "host binaries reference kpack archives that no artifact provides",
            path=catalog.root,
            problems=problems,
        )
