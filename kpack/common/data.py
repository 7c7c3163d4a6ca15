"""Locate the project's declarative data: ``manifests/`` (YAML).

kpack owns the manifests because its database handlers and wheel types are declared
there; :mod:`build_tools` reads them through this module (never the other way round).
In a source checkout the directory sits at the repository root; an installed copy
carries it as package data, ``kpack/manifests``.
"""

from __future__ import annotations

from pathlib import Path

from kpack.errors import ManifestError

__all__ = ["manifest_path", "manifests_dir"]

_KPACK = Path(__file__).resolve().parent.parent  # kpack/common -> kpack


def manifests_dir() -> Path:
    """The ``manifests`` directory of this copy."""
    for candidate in (_KPACK / "manifests", _KPACK.parent / "manifests"):
        if candidate.is_dir():
            return candidate
    raise ManifestError("data directory 'manifests' not found", path=_KPACK)


def manifest_path(name: str) -> Path:
    """Path of ``manifests/<name>``."""
    path = manifests_dir() / name
    if not path.is_file():
        raise ManifestError(f"manifest {name!r} not found", path=path.parent)
    return path
