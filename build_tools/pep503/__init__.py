"""Write a "simple" repository (PEP 503, with PEP 658/714 metadata and PEP 691 JSON pages)
for a directory of wheels and sdists.

``write_simple_index(dist_dir, index_dir)`` gives::

    index_dir/index.html                   one link per project (normalized name)
    index_dir/index.json                   the same list, PEP 691 JSON
    index_dir/<project>/index.html         one link per file (see below)
    index_dir/<project>/index.json         the same files, PEP 691 JSON (api-version 1.1)
    index_dir/<project>/<file>             hard link to (or copy of) the dist file
    index_dir/<project>/<wheel>.metadata   the wheel's ``.dist-info/METADATA`` (PEP 658)

A file's link is ``href="<file>#sha256=<hex>"`` with ``data-requires-python`` (its
Requires-Python, HTML-escaped) and, for a wheel, ``data-core-metadata`` and
``data-dist-info-metadata`` (PEP 714 and the older PEP 658 name), both ``sha256=<hex>`` of the
``.metadata`` file. The JSON pages carry the same facts (``hashes``, ``requires-python``,
``core-metadata``, ``dist-info-metadata``, ``size``, ``versions``). An installer that reads
them (pip >= 22.3, uv) resolves from the metadata files and downloads only the wheels it
installs.

Only the top level of ``dist_dir`` is indexed, and only ``.whl``, ``.tar.gz`` and ``.zip``
files; other entries (``report.json``, subdirectories) are skipped. Pages are sorted and
byte-reproducible. ``index_dir`` follows the project's one output-directory rule
(:mod:`kpack.common.outputs`): the pages are written into a temporary sibling, then each
moves into place, all or nothing; a re-run replaces what an earlier one wrote there (listed
in a record beside ``index_dir``, ``.<tool>.<name>.json``) and leaves every other file
alone, and a file in the way that it did not write needs ``force``.
:func:`stage_simple_index` writes the pages only, for a caller that publishes them along
with other outputs.

Use it with ``pip install --index-url file:///…/index_dir rocm`` (pip reads
``<project>/index.html`` of a ``file:`` index directly), or serve ``index_dir`` over HTTP:
any static server serves the HTML pages, which installers read; to serve the JSON pages too,
answer ``Accept: application/vnd.pypi.simple.v1+json`` with ``index.json`` (Content-Type
``application/vnd.pypi.simple.v1+json``) instead of ``index.html`` (README.md, "Serving the
index", shows an nginx block).
"""

from __future__ import annotations

import hashlib
import html
import json
import logging
import os
import shutil
import tarfile
import zipfile
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from email.parser import BytesHeaderParser
from pathlib import Path
from urllib.parse import quote

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from kpack.common.outputs import publish, record_beside
from kpack.common.tempdirs import make_temp_dir, temp_dir_name
from kpack.errors import PackagingError

__all__ = [
    "API_VERSION",
    "ARCHIVE_SUFFIXES",
    "JSON_CONTENT_TYPE",
    "IndexFile",
    "Project",
    "SimpleIndex",
    "file_sha256",
    "project_of",
    "read_core_metadata",
    "render_project",
    "render_project_json",
    "render_root",
    "render_root_json",
    "scan_dist_dir",
    "stage_simple_index",
    "write_simple_index",
]

log = logging.getLogger(__name__)

ARCHIVE_SUFFIXES = (".whl", ".tar.gz", ".zip")
API_VERSION = "1.1"
JSON_CONTENT_TYPE = "application/vnd.pypi.simple.v1+json"
METADATA_SUFFIX = ".metadata"
#: The tool whose record of an index's files a re-run reads (the one program writing one).
TOOL = "assemble-shards"
_CHUNK = 1 << 20
_METADATA_LIMIT = 16 << 20  # a METADATA or PKG-INFO larger than this is no metadata


@dataclass(frozen=True)
class CoreMetadata:
    """What the index shows of a file's core metadata: a wheel's METADATA bytes (served as
    ``<wheel>.metadata``; None for an sdist) and its Requires-Python (None if absent)."""

    data: bytes | None
    requires_python: str | None


@dataclass(frozen=True)
class IndexFile:
    """One file of a project page: its name, sha256 (hex), size, where it comes from, and
    its core metadata."""

    filename: str
    sha256: str
    source: Path
    size: int = 0
    metadata: CoreMetadata = CoreMetadata(None, None)

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


def _wheel_metadata(path: Path) -> bytes:
    with zipfile.ZipFile(path) as archive:
        names = [
            n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")
        ]
        if len(names) != 1:
            found = ", ".join(names) or "none"
            raise PackagingError(f"wants one <name>.dist-info/METADATA, found {found}", path=path)
        info = archive.getinfo(names[0])
        if info.file_size > _METADATA_LIMIT:
            raise PackagingError(f"{names[0]} is {info.file_size} bytes", path=path)
        return archive.read(info)


def _sdist_pkg_info(path: Path) -> bytes:
    """``<top>/PKG-INFO`` of a ``.tar.gz`` or ``.zip`` sdist."""
    if path.name.endswith(".zip"):
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if n.count("/") == 1 and n.endswith("/PKG-INFO")]
            if names and archive.getinfo(names[0]).file_size <= _METADATA_LIMIT:
                return archive.read(names[0])
    else:
        with tarfile.open(path, "r:gz") as archive:
            for member in archive:
                if (
                    member.isfile()
                    and member.name.count("/") == 1
                    and (member.name.endswith("/PKG-INFO") and member.size <= _METADATA_LIMIT)
                ):
                    stream = archive.extractfile(member)
                    if stream is not None:
                        return stream.read()
    raise PackagingError("no <name>-<version>/PKG-INFO in the sdist", path=path)


def read_core_metadata(path: Path) -> CoreMetadata:
    """The core metadata the index shows for ``path``: a wheel's METADATA and the file's
    Requires-Python (validated as a PEP 440 specifier set)."""
    try:
        wheel = path.name.endswith(".whl")
        data = _wheel_metadata(path) if wheel else _sdist_pkg_info(path)
    except (OSError, zipfile.BadZipFile, tarfile.TarError, EOFError) as exc:
        raise PackagingError(f"cannot read its metadata: {exc}", path=path) from exc
    value = BytesHeaderParser().parsebytes(data).get("Requires-Python")
    requires = None if value is None else " ".join(str(value).split())
    if requires is not None:
        try:
            SpecifierSet(requires)
        except InvalidSpecifier as exc:
            raise PackagingError(f"bad Requires-Python: {exc}", path=path) from exc
    return CoreMetadata(data if wheel else None, requires)


def _describe(path: Path, sha256: str | None) -> IndexFile:
    return IndexFile(
        path.name,
        sha256 or file_sha256(path),
        path,
        path.stat().st_size,
        read_core_metadata(path),
    )


def _group(dist_dir: Path) -> tuple[list[Path], dict[str, list[Path]]]:
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
    return entries, grouped


def scan_dist_dir(
    dist_dir: Path, *, digests: Mapping[str, str] | None = None, jobs: int | None = None
) -> SimpleIndex:
    """Group the archives of ``dist_dir`` by project, read each one's core metadata, and
    hash those not in ``digests``."""
    entries, grouped = _group(dist_dir)
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

    with ThreadPoolExecutor(max_workers=jobs or min(4, os.cpu_count() or 1)) as pool:
        list(pool.map(describe, entries))
    if problems:
        raise PackagingError("cannot index", path=dist_dir, problems=sorted(problems))
    projects = tuple(
        Project(name, tuple(described[p.name] for p in grouped[name])) for name in sorted(grouped)
    )
    return SimpleIndex(projects)


def _page(title: str, links: list[tuple[str, str, dict[str, str]]]) -> str:
    anchors = "".join(
        f'<a href="{html.escape(href)}"'
        + "".join(f' {k}="{html.escape(v)}"' for k, v in attrs.items())
        + f">{html.escape(text)}</a><br>\n"
        for href, text, attrs in links
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n'
        "<head>\n"
        '<meta charset="utf-8">\n'
        f'<meta name="pypi:repository-version" content="{API_VERSION}">\n'
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
    return _page("Simple index", [(f"{quote(p.name)}/", p.name, {}) for p in index.projects])


def _attributes(item: IndexFile) -> dict[str, str]:
    attrs: dict[str, str] = {}
    if item.metadata.requires_python is not None:
        attrs["data-requires-python"] = item.metadata.requires_python
    digest = item.metadata_sha256
    if digest is not None:
        attrs["data-dist-info-metadata"] = f"sha256={digest}"
        attrs["data-core-metadata"] = f"sha256={digest}"
    return attrs


def render_project(project: Project) -> str:
    """A project page: one ``<a href="<file>#sha256=<hex>" data-…>`` per file."""
    links = [
        (f"{quote(f.filename)}#sha256={f.sha256}", f.filename, _attributes(f))
        for f in project.files
    ]
    return _page(f"Links for {project.name}", links)


def _json(value: object) -> str:
    return json.dumps(value, indent=2, sort_keys=True) + "\n"


def render_root_json(index: SimpleIndex) -> str:
    """The root page as PEP 691 JSON."""
    projects = [{"name": p.name} for p in index.projects]
    return _json({"meta": {"api-version": API_VERSION}, "projects": projects})


def _file_json(item: IndexFile) -> dict[str, object]:
    entry: dict[str, object] = {
        "filename": item.filename,
        "url": quote(item.filename),
        "hashes": {"sha256": item.sha256},
        "size": item.size,
    }
    if item.metadata.requires_python is not None:
        entry["requires-python"] = item.metadata.requires_python
    digest = item.metadata_sha256
    if digest is not None:
        entry["core-metadata"] = entry["dist-info-metadata"] = {"sha256": digest}
    return entry


def render_project_json(project: Project) -> str:
    """A project page as PEP 691 JSON (api-version 1.1: ``size`` and ``versions``)."""
    versions = sorted({f.version for f in project.files})
    return _json(
        {
            "meta": {"api-version": API_VERSION},
            "name": project.name,
            "files": [_file_json(f) for f in project.files],
            "versions": [str(v) for v in versions],
        }
    )


def _link_or_copy(source: Path, dest: Path) -> None:
    try:
        os.link(source, dest)
    except OSError:
        shutil.copyfile(source, dest)


def _populate(index: SimpleIndex, into: Path) -> list[str]:
    """Write the pages of ``index`` into ``into``; the files written, relative to it."""
    written = ["index.html", "index.json"]
    (into / "index.html").write_text(render_root(index), encoding="utf-8")
    (into / "index.json").write_text(render_root_json(index), encoding="utf-8")
    for project in index.projects:
        directory = into / project.name
        directory.mkdir()
        for item in project.files:
            _link_or_copy(item.source, directory / item.filename)
            written.append(f"{project.name}/{item.filename}")
            if item.metadata.data is not None:
                (directory / f"{item.filename}{METADATA_SUFFIX}").write_bytes(item.metadata.data)
                written.append(f"{project.name}/{item.filename}{METADATA_SUFFIX}")
        (directory / "index.html").write_text(render_project(project), encoding="utf-8")
        (directory / "index.json").write_text(render_project_json(project), encoding="utf-8")
        written += [f"{project.name}/index.html", f"{project.name}/index.json"]
    return written


def stage_simple_index(
    dist_dir: Path, into: Path, *, digests: Mapping[str, str] | None = None
) -> tuple[SimpleIndex, tuple[str, ...]]:
    """Write the simple repository of ``dist_dir`` into the new directory ``into`` (it must
    not exist); returns the index and its files, relative to ``into``, for publishing.

    ``digests`` (file name -> sha256 hex) saves hashing files the caller already hashed.
    """
    index = scan_dist_dir(Path(dist_dir), digests=digests)
    into.mkdir()
    return index, tuple(_populate(index, into))


def write_simple_index(
    dist_dir: Path,
    index_dir: Path,
    *,
    digests: Mapping[str, str] | None = None,
    force: bool = False,
    tool: str = TOOL,
) -> SimpleIndex:
    """Write the simple repository of ``dist_dir`` to ``index_dir``, all or nothing: what
    an earlier run wrote there is replaced, other files are left alone, and one in the way
    that ``tool`` did not write needs ``force`` (:mod:`kpack.common.outputs`)."""
    index_dir = Path(os.path.abspath(index_dir))
    parent, name = index_dir.parent, index_dir.name
    record = record_beside(index_dir, tool)
    made = [d for d in (parent, *parent.parents) if not os.path.lexists(d)]
    tmp = temp_dir_name(parent, f".{name}.", ".tmp")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        make_temp_dir(tmp)
        index, files = stage_simple_index(dist_dir, tmp / name, digests=digests)
        outputs = [f"{name}/{rel}" for rel in files]
        publish(parent, tmp, outputs, record_name=record, tool=tool, force=force)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        for directory in made:  # innermost first: the parents made for it go again
            with suppress(OSError):
                directory.rmdir()
        if isinstance(exc, OSError):
            raise PackagingError(f"cannot write the index: {exc}", path=index_dir) from exc
        raise
    shutil.rmtree(tmp, ignore_errors=True)
    log.info("wrote simple index %s: %d projects", index_dir, len(index.projects))
    return index
