"""The pages of a simple index: PEP 503 HTML (with the PEP 658/714 metadata attributes) and
PEP 691 JSON (api-version 1.1), sorted and byte-reproducible."""

from __future__ import annotations

import html
import json
from urllib.parse import quote

from ._scan import IndexFile, Project, SimpleIndex

__all__ = [
    "API_VERSION",
    "JSON_CONTENT_TYPE",
    "render_project",
    "render_project_json",
    "render_root",
    "render_root_json",
]

API_VERSION = "1.1"
JSON_CONTENT_TYPE = "application/vnd.pypi.simple.v1+json"


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
