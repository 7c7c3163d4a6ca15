"""Temporary directories beside an output, named before they exist.

``tempfile.mkdtemp`` hands back the name only once the directory exists. SIGTERM and
SIGHUP unwind as an exception in the main thread (:mod:`kpack.common.boundary`); one arriving
between the two leaves a directory that nobody removes. Here the name comes first: the
caller holds it inside its ``try`` (or context manager) before the directory is made, so
its cleanup covers every point. Names carry the process id and 48 random bits.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

__all__ = ["make_temp_dir", "temp_dir_name"]


def temp_dir_name(parent: Path, prefix: str, suffix: str = "") -> Path:
    """A fresh, not yet existing name in ``parent``."""
    return Path(parent) / f"{prefix}{os.getpid()}-{secrets.token_hex(6)}{suffix}"


def make_temp_dir(path: Path) -> Path:
    """Create ``path`` (private to its owner); it must not exist yet."""
    path.mkdir(mode=0o700)
    return path
