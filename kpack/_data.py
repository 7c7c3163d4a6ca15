"""Locate the project's data directories (``manifests/``, ``templates/``).

In a source checkout they sit at the repository root, next to this package; an
installed copy carries them as package data of ``build_tools`` (``build_tools/<name>``).
"""

from __future__ import annotations

from pathlib import Path

from kpack.errors import ManifestError

__all__ = ["data_dir", "manifest_path"]

_ROOT = Path(__file__).resolve().parent.parent


def data_dir(name: str) -> Path:
    """``manifests`` or ``templates``, wherever this copy keeps them."""
    for candidate in (_ROOT / "build_tools" / name, _ROOT / name):
        if candidate.is_dir():
            return candidate
    raise ManifestError(f"data directory {name!r} not found", path=_ROOT)


def manifest_path(name: str) -> Path:
    """Path of ``manifests/<name>``."""
    path = data_dir("manifests") / name
    if not path.is_file():
        raise ManifestError(f"manifest {name!r} not found", path=path.parent)
    return path
