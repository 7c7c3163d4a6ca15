"""Checking the command line's values: input files and dirs, output dirs, target ids and
agent ISAs; each bad one is a :class:`~kpack.errors.UsageError` naming the flag.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from kpack.common.safepath import output_dir_problem
from kpack.errors import UsageError
from kpack.resolve import ISA_PREFIX
from kpack.targets import is_target_id

log = logging.getLogger(__name__)


def _follow(path: Path) -> Path:
    """``path`` with its final symlinks followed (directories along it left as they are)."""
    seen = 0
    while path.is_symlink() and seen < 40:
        path = path.parent / os.readlink(path)
        seen += 1
    return path


#: Features an agent ISA may carry (``gfx942:sramecc+:xnack-`` has two): lookups try every
#: subset of them, so their number is bounded.
_MAX_ISA_FEATURES = 4


def _input_file(path: Path, what: str = "the input") -> Path:
    """``path`` with its final symlinks followed; it must be a regular file (a directory,
    a FIFO or a socket is refused before anything opens it)."""
    real = _follow(path)
    try:
        mode = os.stat(real).st_mode
    except OSError as exc:
        raise UsageError(f"cannot read {what}: {exc.strerror}", path=path) from None
    if stat.S_ISDIR(mode):
        raise UsageError(f"{what} is a directory, not a file", path=path)
    if not stat.S_ISREG(mode):
        raise UsageError(f"{what} is not a regular file", path=path)
    return real


def _input_dir(path: Path, flag: str) -> Path:
    if not path.is_dir():
        raise UsageError(f"{flag} is not a directory", path=path)
    return path


def _output_dir(path: Path, flag: str) -> Path:
    problem = output_dir_problem(path)
    if problem is not None:
        raise UsageError(f"{flag} {problem}", path=path)
    return path


def _shown(value: str) -> str:
    return repr(value if len(value) <= 80 else value[:80] + "...")


def _target(value: str | None) -> str | None:
    """``--target``: a target id (a bare ``gfx90a`` selects its feature variants too)."""
    if value is not None and not is_target_id(value):
        raise UsageError(
            f"--target {_shown(value)} is not a target id (gfx942, gfx90a:xnack+, gfx9-4-generic)"
        )
    return value


def _agent_isa(value: str) -> str:
    """``--arch``: an agent ISA, ``[amdgcn-amd-amdhsa--]gfx942:sramecc+:xnack-``."""
    isa = value.removeprefix(ISA_PREFIX)
    if not is_target_id(isa) or isa.count(":") > _MAX_ISA_FEATURES:
        raise UsageError(
            f"--arch {_shown(value)} is not an agent ISA (gfx942:sramecc+:xnack-, gfx1100; at "
            f"most {_MAX_ISA_FEATURES} features)"
        )
    return value
