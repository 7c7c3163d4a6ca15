"""Write the devel tarball (``packages.md`` §8) deterministically.

Members in a fixed order — directories, then regular files, then symlinks, each sorted —
with uid/gid 0, empty owner names and one fixed mtime, so the same plan always gives the
same bytes and expansion never depends on member order.
"""

from __future__ import annotations

import tarfile
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import BinaryIO

from kpack.common import cancel
from kpack.errors import PackagingError

from .payload import PayloadFile, TarEntry, TarKind

__all__ = ["write_devel_tar"]

_ORDER = {TarKind.DIR: 0, TarKind.FILE: 1, TarKind.SYMLINK: 2}


def _info(name: str, epoch: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.mtime = epoch
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _open(file: PayloadFile, stack: ExitStack) -> BinaryIO:
    return stack.enter_context(file.open())


def write_devel_tar(path: Path, members: Sequence[TarEntry], *, epoch: int, xz: bool) -> None:
    """Write ``members`` to ``path`` (``.tar`` or ``.tar.xz``)."""
    ordered = sorted(members, key=lambda m: (_ORDER[m.kind], m.arcname))
    names = [m.arcname for m in ordered]
    if len(set(names)) != len(names):
        raise PackagingError("duplicate devel tarball members", path=path)
    mode = "w:xz" if xz else "w"
    with tarfile.open(path, mode, format=tarfile.GNU_FORMAT) as tar:  # type: ignore[call-overload]
        for member in ordered:
            cancel.check()
            info = _info(member.arcname, epoch)
            if member.kind is TarKind.DIR:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            elif member.kind is TarKind.SYMLINK:
                info.type, info.mode, info.linkname = tarfile.SYMTYPE, 0o777, member.link
                tar.addfile(info)
            else:
                file = member.file
                if file is None:
                    raise PackagingError("file member without content", path=member.arcname)
                info.size, info.mode = file.size, 0o755 if file.executable else 0o644
                with ExitStack() as stack:
                    tar.addfile(info, _open(file, stack))
