"""The index model (:class:`SimpleIndex` of :class:`Project` of :class:`IndexFile`) and the
scan of a dist directory into it: archives grouped by project, hashed, their core metadata
read."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from kpack.common.threadpool import ThreadPool
from kpack.errors import PackagingError

from ._metadata import NO_METADATA, CoreMetadata, read_core_metadata

__all__ = [
    "ARCHIVE_SUFFIXES",
    "IndexFile",
    "Project",
    "SimpleIndex",
    "file_sha256",
    "project_of",
    "scan_dist_dir",
    "scan_dist_dirs",
]

ARCHIVE_SUFFIXES = (".whl", ".tar.gz", ".zip")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class IndexFile:
    """One file of a project page: its name, sha256 (hex), size, where it comes from, and
    its core metadata."""

    filename: str
    sha256: str
    source: Path
    size: int = 0
    metadata: CoreMetadata = NO_METADATA

    @property
    def metadata_sha256(self) -> str | None:
        data = self.metadata.data
        return None if data is None else hashlib.sha256(data).hexdigest()

    @property
    def version(self) -> Version:
        if self.filename.endswith(".whl"):
            return parse_wheel_filename(self.filename)[1]
        return parse_sdist_filename(self.filename)[1]


@dataclass(frozen=True)
class Project:
    """A project (PEP 503 normalized name) and its files, sorted by file name."""

    name: str
    files: tuple[IndexFile, ...]


@dataclass(frozen=True)
class SimpleIndex:
    """Every project of the repository, sorted by name."""

    projects: tuple[Project, ...]


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def project_of(filename: str) -> str:
    """The PEP 503 normalized project name of a wheel or sdist file name."""
    try:
        if filename.endswith(".whl"):
            return str(parse_wheel_filename(filename)[0])
        return str(parse_sdist_filename(filename)[0])
    except (InvalidWheelFilename, InvalidSdistFilename) as exc:
        raise PackagingError(f"not a wheel or sdist file name: {exc}", path=filename) from exc


def _describe(path: Path, sha256: str | None) -> IndexFile:
    return IndexFile(
        path.name,
        sha256 or file_sha256(path),
        path,
        path.stat().st_size,
        read_core_metadata(path),
    )


def _listed(dist_dir: Path) -> list[Path]:
    try:
        return sorted(p for p in Path(dist_dir).iterdir() if p.name.endswith(ARCHIVE_SUFFIXES))
    except OSError as exc:
        raise PackagingError(f"cannot list the dist directory: {exc}", path=dist_dir) from exc


def _group(dirs: Sequence[Path]) -> tuple[list[Path], dict[str, list[Path]]]:
    entries = sorted((p for d in dirs for p in _listed(d)), key=lambda p: p.name)
    problems: list[str] = []
    grouped: dict[str, list[Path]] = {}
    seen: dict[str, Path] = {}
    for path in entries:
        if seen.setdefault(path.name, path) != path:
            problems.append(f"{path.name}: in both {seen[path.name].parent} and {path.parent}")
            continue
        if not path.is_file():
            problems.append(f"{path.name}: not a regular file")
            continue
        try:
            grouped.setdefault(project_of(path.name), []).append(path)
        except PackagingError as exc:
            problems.append(str(exc))
    if problems:
        raise PackagingError("cannot index", path=dirs[0], problems=problems)
    return entries, grouped


def scan_dist_dir(
    dist_dir: Path, *, digests: Mapping[str, str] | None = None, jobs: int | None = None
) -> SimpleIndex:
    """Group the archives of ``dist_dir`` by project, read each one's core metadata, and
    hash those not in ``digests``."""
    return scan_dist_dirs([Path(dist_dir)], digests=digests, jobs=jobs)


def scan_dist_dirs(
    dirs: Sequence[Path], *, digests: Mapping[str, str] | None = None, jobs: int | None = None
) -> SimpleIndex:
    """:func:`scan_dist_dir` over the top level of several directories as one repository
    (a file name in two of them is a problem)."""
    entries, grouped = _group([Path(d) for d in dirs])
    known = dict(digests or {})
    described: dict[str, IndexFile] = {}
    problems: list[str] = []

    def describe(path: Path) -> None:
        try:
            described[path.name] = _describe(path, known.get(path.name))
        except PackagingError as exc:
            problems.append(str(exc))
        except OSError as exc:
            problems.append(f"{path.name}: cannot hash: {exc}")

    with ThreadPool(max_workers=jobs or min(4, os.cpu_count() or 1)) as pool:
        list(pool.map(describe, entries))
    if problems:
        raise PackagingError("cannot index", path=dirs[0], problems=sorted(problems))
    projects = tuple(
        Project(name, tuple(described[p.name] for p in grouped[name])) for name in sorted(grouped)
    )
    return SimpleIndex(projects)
