"""AMDGPU target ids as LLVM writes them: ``gfx90a``, ``gfx942:sramecc+:xnack-``,
``gfx9-4-generic``.

A target id read from input bytes (a bundle triple, a ``.kpack`` TOC) becomes part of archive,
file and directory names, so only this grammar is accepted: a lower-case processor or generic
target starting with ``gfx``, then ``:feature+`` / ``:feature-`` parts — never ``/``, ``..``,
``\\``, spaces or control characters.
"""

from __future__ import annotations

import re

__all__ = ["MAX_TARGET_ID", "is_target_id"]

MAX_TARGET_ID = 64
_TARGET_ID_RE = re.compile(r"gfx[0-9a-z]+(?:-[0-9a-z]+)*(?::[A-Za-z0-9_]+[+-])*")


def is_target_id(value: str) -> bool:
    """True for ``gfx90a``, ``gfx942:sramecc+:xnack-``, ``gfx9-4-generic``; False otherwise."""
    return len(value) <= MAX_TARGET_ID and _TARGET_ID_RE.fullmatch(value) is not None
