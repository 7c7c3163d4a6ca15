"""Locate the project's data directories (templates/, manifests/).

In a source checkout they sit at the repository root; an installed copy carries them
inside the ``build_tools`` package.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["data_dir"]

_HERE = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Return ``templates`` or ``manifests``, wherever this copy keeps them."""
    for candidate in (_HERE / name, _HERE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"data directory {name!r} not found next to {_HERE}")
