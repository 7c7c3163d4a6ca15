"""A PE image told by its bytes: a DOS header whose ``e_lfanew`` leads to ``PE\\0\\0``.

Kept apart from the header reader (:mod:`kpack.pe.image`) so that a tool that only asks
whether a file is a PE image (every fat binary's transform does) does not load the reader.
"""

from __future__ import annotations

import os
import struct

__all__ = ["MZ", "PE_MAGIC", "is_pe", "is_pe_file"]

MZ = b"MZ"
PE_MAGIC = b"PE\0\0"


def is_pe(head: bytes) -> bool:
    """True when ``head`` (the first 64 bytes or more) starts a DOS/PE image."""
    return head[:2] == MZ


def is_pe_file(path: str | os.PathLike[str]) -> bool:
    """True for a file with a DOS header whose ``e_lfanew`` leads to a PE signature; a
    symlink is never followed. (An ``MZ`` file without one is a DOS program or data.)"""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        head = f.read(64)
        if len(head) < 64 or head[:2] != MZ:
            return False
        (pe_offset,) = struct.unpack_from("<I", head, 0x3C)
        f.seek(pe_offset)
        return f.read(4) == PE_MAGIC
