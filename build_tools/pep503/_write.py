"""The simple index written: its pages, the dist files (hard-linked or copied) and their
metadata files staged in a new directory, then published all or nothing
(:mod:`kpack.common.outputs`).

A builder's dist directory is indexed as its layout asks (:func:`stage_dist_index`): flat (a
kpack set, a one-family legacy set) as one repository; a multi-family legacy set (the shared
wheels at the top, each family's ``rocm`` sdist and devel wheel in ``dist/<family>/``, as
TheRock lays it out) as one repository per family, ``<index>/<family>/``, holding the shared
files and that family's, as TheRock's per-family indexes do."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from kpack.common.outputs import publish, record_beside, staging
from kpack.errors import PackagingError

from ._metadata import METADATA_SUFFIX
from ._pages import render_project, render_project_json, render_root, render_root_json
from ._scan import SimpleIndex, scan_dist_dirs

__all__ = ["TOOL", "family_dirs", "stage_dist_index", "stage_simple_index", "write_simple_index"]

log = logging.getLogger(__name__)

#: The tool whose record of an index's files a re-run reads (the one program writing one).
TOOL = "assemble-shards"


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
    dist_dir: Path | Sequence[Path], into: Path, *, digests: Mapping[str, str] | None = None
) -> tuple[SimpleIndex, tuple[str, ...]]:
    """Write the simple repository of ``dist_dir`` (or of several directories' top levels
    together) into the new directory ``into`` (it must not exist); returns the index and its
    files, relative to ``into``, for publishing.

    ``digests`` (file name -> sha256 hex) saves hashing files the caller already hashed.
    """
    dirs = [Path(dist_dir)] if isinstance(dist_dir, (str, Path)) else [Path(d) for d in dist_dir]
    index = scan_dist_dirs(dirs, digests=digests)
    into.mkdir()
    return index, tuple(_populate(index, into))


def family_dirs(dist_dir: Path) -> tuple[str, ...]:
    """The family subdirectories of a multi-family legacy dist dir (none for a flat one);
    hidden entries are not families."""
    try:
        return tuple(
            sorted(p.name for p in Path(dist_dir).iterdir() if p.is_dir() and p.name[:1] != ".")
        )
    except OSError as exc:
        raise PackagingError(f"cannot list the dist directory: {exc}", path=dist_dir) from exc


def stage_dist_index(
    dist_dir: Path, into: Path, *, digests: Mapping[str, str] | None = None
) -> tuple[str, ...]:
    """The index of a builder's dist dir staged in the new directory ``into``, flat or one
    repository per family (see the module doc); its files, relative to ``into``.
    ``digests`` serve the flat layout only: by name, the families' ``rocm`` sdists are
    alike."""
    families = family_dirs(dist_dir)
    if not families:
        return stage_simple_index(dist_dir, into, digests=digests)[1]
    into.mkdir()
    files: list[str] = []
    for family in families:
        _index, staged = stage_simple_index([dist_dir, dist_dir / family], into / family)
        files += [f"{family}/{rel}" for rel in staged]
    return tuple(files)


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
    try:
        with staging(parent, tool) as tmp:
            index, files = stage_simple_index(dist_dir, tmp / name, digests=digests)
            outputs = [f"{name}/{rel}" for rel in files]
            record = record_beside(index_dir, tool)
            publish(parent, tmp, outputs, record=record, tool=tool, force=force)
    except OSError as exc:
        raise PackagingError(f"cannot write the index: {exc}", path=index_dir) from exc
    log.info("wrote simple index %s: %d projects", index_dir, len(index.projects))
    return index
