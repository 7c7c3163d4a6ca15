"""Write a PEP 503 "simple" repository for a directory of wheels and sdists.

``write_simple_index(dist_dir, index_dir)`` gives::

    index_dir/index.html                      one link per project (normalized name)
    index_dir/<project>/index.html            one link per file, ``href="<file>#sha256=<hex>"``
    index_dir/<project>/<file>                hard link to (or copy of) the dist file

Only the top level of ``dist_dir`` is indexed, and only ``.whl``, ``.tar.gz`` and ``.zip``
files; other entries (``report.json``, subdirectories) are skipped. The pages are HTML5,
sorted and byte-reproducible. ``index_dir`` is written into a temporary sibling and renamed
into place, so a failure leaves nothing behind; it must not exist or be empty.

Use it with ``pip install --index-url file:///…/index_dir rocm`` (pip reads
``<project>/index.html`` of a ``file:`` index directly).
"""

from __future__ import annotations

import hashlib
import html
import logging
import os
import shutil
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    parse_sdist_filename,
    parse_wheel_filename,
)

from kpack.common.tempdirs import make_temp_dir, temp_dir_name
from kpack.errors import PackagingError

__all__ = [
    "ARCHIVE_SUFFIXES",
    "IndexFile",
    "Project",
    "SimpleIndex",
    "file_sha256",
    "project_of",
    "render_project",
    "render_root",
    "scan_dist_dir",
    "write_simple_index",
]

log = logging.getLogger(__name__)

ARCHIVE_SUFFIXES = (".whl", ".tar.gz", ".zip")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class IndexFile:
    """One file of a project page: its name, sha256 (hex) and where it comes from."""

    filename: str
    sha256: str
    source: Path


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


def scan_dist_dir(
    dist_dir: Path, *, digests: Mapping[str, str] | None = None, jobs: int | None = None
) -> SimpleIndex:
    """Group the archives of ``dist_dir`` by project; hash those not in ``digests``."""
    try:
        entries = sorted(p for p in Path(dist_dir).iterdir() if p.name.endswith(ARCHIVE_SUFFIXES))
    except OSError as exc:
        raise PackagingError(f"cannot list the dist directory: {exc}", path=dist_dir) from exc
    problems: list[str] = []
    grouped: dict[str, list[Path]] = {}
    for path in entries:
        if not path.is_file():
            problems.append(f"{path.name}: not a regular file")
            continue
        try:
            grouped.setdefault(project_of(path.name), []).append(path)
        except PackagingError as exc:
            problems.append(str(exc))
    if problems:
        raise PackagingError("cannot index", path=dist_dir, problems=problems)
    known = dict(digests or {})
    todo = [p for p in entries if p.name not in known]
    try:
        with ThreadPoolExecutor(max_workers=jobs or min(4, os.cpu_count() or 1)) as pool:
            known.update(zip((p.name for p in todo), pool.map(file_sha256, todo), strict=True))
    except OSError as exc:
        raise PackagingError(f"cannot hash: {exc}", path=dist_dir) from exc
    projects = tuple(
        Project(name, tuple(IndexFile(p.name, known[p.name], p) for p in grouped[name]))
        for name in sorted(grouped)
    )
    return SimpleIndex(projects)


def _page(title: str, links: list[tuple[str, str]]) -> str:
    anchors = "".join(
        f'<a href="{html.escape(href)}">{html.escape(text)}</a><br>\n' for href, text in links
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n'
        "<head>\n"
        '<meta charset="utf-8">\n'
        '<meta name="pypi:repository-version" content="1.0">\n'
        f"<title>{html.escape(title)}</title>\n"
        "</head>\n"
        "<body>\n"
        f"<h1>{html.escape(title)}</h1>\n"
        f"{anchors}"
        "</body>\n"
        "</html>\n"
    )


def render_root(index: SimpleIndex) -> str:
    """The root page: one ``<a href="<project>/">`` per project."""
    return _page("Simple index", [(f"{quote(p.name)}/", p.name) for p in index.projects])


def render_project(project: Project) -> str:
    """A project page: one ``<a href="<file>#sha256=<hex>">`` per file."""
    links = [(f"{quote(f.filename)}#sha256={f.sha256}", f.filename) for f in project.files]
    return _page(f"Links for {project.name}", links)


def _link_or_copy(source: Path, dest: Path) -> None:
    try:
        os.link(source, dest)
    except OSError:
        shutil.copyfile(source, dest)


def _check_free(index_dir: Path) -> None:
    if index_dir.is_symlink() or (index_dir.exists() and not index_dir.is_dir()):
        raise PackagingError("exists and is not a directory", path=index_dir)
    if index_dir.is_dir() and any(index_dir.iterdir()):
        raise PackagingError("exists and is not empty; remove it first", path=index_dir)


def _populate(index: SimpleIndex, into: Path) -> None:
    (into / "index.html").write_text(render_root(index), encoding="utf-8")
    for project in index.projects:
        directory = into / project.name
        directory.mkdir()
        for item in project.files:
            _link_or_copy(item.source, directory / item.filename)
        (directory / "index.html").write_text(render_project(project), encoding="utf-8")


def write_simple_index(
    dist_dir: Path, index_dir: Path, *, digests: Mapping[str, str] | None = None
) -> SimpleIndex:
    """Write the PEP 503 repository of ``dist_dir`` to ``index_dir`` atomically.

    ``digests`` (file name -> sha256 hex) saves hashing files the caller already hashed.
    """
    index_dir = Path(index_dir)
    _check_free(index_dir)
    index = scan_dist_dir(Path(dist_dir), digests=digests)
    index_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_dir_name(index_dir.parent, f".{index_dir.name}.", ".tmp")
    try:
        _populate(index, make_temp_dir(tmp))
        tmp.chmod(0o755)
        with suppress(FileNotFoundError):
            index_dir.rmdir()  # empty, checked above
        tmp.rename(index_dir)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise PackagingError(f"cannot write the index: {exc}", path=index_dir) from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("wrote simple index %s: %d projects", index_dir, len(index.projects))
    return index
