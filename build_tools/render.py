"""Render package files from the jinja2 templates in ``templates/``.

Exactly one environment: ``StrictUndefined`` (a missing variable is an error), no
autoescaping, and the ``py`` filter, which writes any value as a Python literal — user
input reaches generated code only through it. Files ending in ``.j2`` are rendered (the
suffix is dropped); other files are copied verbatim.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2

from kpack.errors import PackagingError

from ._data import data_dir

__all__ = ["py_literal", "render_file", "render_tree"]


def py_literal(value: Any) -> str:
    """A Python literal for str/int/bool/None and lists, tuples, dicts of them."""
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        inner = ", ".join(py_literal(v) for v in value)
        return f"[{inner}]"
    if isinstance(value, dict):
        inner = ", ".join(f"{py_literal(k)}: {py_literal(v)}" for k, v in value.items())
        return "{" + inner + "}"
    raise PackagingError(f"cannot write a {type(value).__name__} into generated Python")


@functools.lru_cache(maxsize=4)
def _environment(root: Path) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(root)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["py"] = py_literal
    return env


def _root() -> Path:
    return data_dir("templates")


def render_file(name: str, variables: Mapping[str, Any]) -> bytes:
    """Render one template (path relative to ``templates/``)."""
    try:
        text = _environment(_root()).get_template(name).render(**variables)
    except jinja2.TemplateError as exc:
        raise PackagingError(f"rendering failed: {exc}", path=name) from exc
    return text.encode("utf-8")


def render_tree(subdir: str, variables: Mapping[str, Any]) -> dict[str, tuple[bytes, bool]]:
    """Render every file below ``templates/<subdir>``: relpath -> (bytes, executable)."""
    root = _root()
    base = root / subdir
    if not base.is_dir():
        raise PackagingError("template directory is missing", path=base)
    out: dict[str, tuple[bytes, bool]] = {}
    for path in sorted(p for p in base.rglob("*") if p.is_file()):
        if "__pycache__" in path.parts or path.suffix == ".pyc":
            continue
        rel = path.relative_to(base).as_posix()
        executable = bool(path.stat().st_mode & 0o111)
        if rel.endswith(".j2"):
            out[rel[:-3]] = (render_file(path.relative_to(root).as_posix(), variables), executable)
        else:
            out[rel] = (path.read_bytes(), executable)
    return out
