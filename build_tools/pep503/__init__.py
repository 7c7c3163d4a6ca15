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
with other outputs; :func:`stage_dist_index` does so for a builder's dist dir as its layout
asks (a multi-family legacy set: one repository per family, ``index_dir/<family>/``).

Use it with ``pip install --index-url file:///…/index_dir rocm`` (pip reads
``<project>/index.html`` of a ``file:`` index directly), or serve ``index_dir`` over HTTP:
any static server serves the HTML pages, which installers read; to serve the JSON pages too,
answer ``Accept: application/vnd.pypi.simple.v1+json`` with ``index.json`` (Content-Type
``application/vnd.pypi.simple.v1+json``) instead of ``index.html`` (README.md, "Serving the
index", shows an nginx block).
"""

from __future__ import annotations

from ._metadata import CoreMetadata, read_core_metadata
from ._pages import (
    API_VERSION,
    JSON_CONTENT_TYPE,
    render_project,
    render_project_json,
    render_root,
    render_root_json,
)
from ._scan import (
    ARCHIVE_SUFFIXES,
    IndexFile,
    Project,
    SimpleIndex,
    file_sha256,
    project_of,
    scan_dist_dir,
    scan_dist_dirs,
)
from ._write import (
    TOOL,
    family_dirs,
    stage_dist_index,
    stage_simple_index,
    write_simple_index,
)

__all__ = [
    "API_VERSION",
    "ARCHIVE_SUFFIXES",
    "JSON_CONTENT_TYPE",
    "TOOL",
    "CoreMetadata",
    "IndexFile",
    "Project",
    "SimpleIndex",
    "family_dirs",
    "file_sha256",
    "project_of",
    "read_core_metadata",
    "render_project",
    "render_project_json",
    "render_root",
    "render_root_json",
    "scan_dist_dir",
    "scan_dist_dirs",
    "stage_dist_index",
    "stage_simple_index",
    "write_simple_index",
]
