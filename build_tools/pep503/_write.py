"""The simple index written: its pages, the dist files (hard-linked or copied) and their
metadata files staged in a new directory, then published all or nothing
(:mod:`kpack.common.outputs`)."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from kpack.common.outputs import publish, record_beside, staging
from kpack.errors import PackagingError

from ._metadata import METADATA_SUFFIX
from ._pages import render_project, render_project_json, render_root, render_root_json
from ._scan import SimpleIndex, scan_dist_dir

__all__ = ["TOOL", "stage_simple_index", "write_simple_index"]

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
