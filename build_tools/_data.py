"""Locate the data directories the builder reads: ``templates/`` (its own) and
``manifests/`` (owned by :mod:`kpack`, see :mod:`kpack.common.data`)."""

from __future__ import annotations

from pathlib import Path

from kpack.common.data import manifests_dir
from kpack.errors import ManifestError

__all__ = ["data_dir"]

_HERE = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """``manifests`` or ``templates``, wherever this copy keeps them."""
    if name == "manifests":
        return manifests_dir()
    for candidate in (_HERE / name, _HERE.parent / name):
        if candidate.is_dir():
            return candidate
    raise ManifestError(f"data directory {name!r} not found", path=_HERE)
