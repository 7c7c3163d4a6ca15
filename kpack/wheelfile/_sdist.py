"""Write a source distribution ourselves, deterministically.

``<name>-<version>.tar.gz`` (name and version normalized) holds one top directory
``<name>-<version>/`` with ``PKG-INFO`` first, then the members sorted by name, each
directory entry just before its first child. Every entry has uid/gid 0, empty user and
group names, one fixed mtime and mode 0644 (0755 for executables and directories); the
tar format is PAX; the gzip header has a fixed mtime and no file name. Text members
(``PKG-INFO`` and ``.py .md .toml .cfg .txt .rst .in``) are rewritten from CRLF to LF,
so builds on Linux and Windows give the same archive.
"""

from __future__ import annotations

import gzip
import io
import logging
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import BinaryIO, cast

from kpack.errors import PackagingError
from kpack.wheelfile._member import Member, open_regular, open_source, read_all
from kpack.wheelfile._names import normalize_dist_name, normalize_version
from kpack.wheelfile._output import atomic_output, resolve_epoch

__all__ = ["TEXT_SUFFIXES", "sdist_filename", "write_sdist"]

log = logging.getLogger(__name__)

TEXT_SUFFIXES = frozenset({".py", ".md", ".toml", ".cfg", ".txt", ".rst", ".in"})
_SPOOL_LIMIT = 16 << 20
_PKG_INFO = "PKG-INFO"


def sdist_filename(dist_name: str, version: str) -> str:
    """``<normalized name>-<normalized version>.tar.gz``."""
    return f"{normalize_dist_name(dist_name)}-{normalize_version(version)}.tar.gz"


def write_sdist(
    dest_dir: Path,
    *,
    dist_name: str,
    version: str,
    files: Sequence[Member],
    pkg_info: bytes,
    epoch: int | None = None,
    level: int = 9,
) -> Path:
    """Write the sdist atomically into ``dest_dir`` and return its path."""
    if not 0 <= level <= 9:
        raise PackagingError(f"gzip level must be 0..9, not {level}")
    top = f"{normalize_dist_name(dist_name)}-{normalize_version(version)}"
    members = _ordered(files)
    mtime = resolve_epoch(epoch)
    final = Path(dest_dir) / f"{top}.tar.gz"
    with (
        atomic_output(final) as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=level, mtime=mtime) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        _add_dir(tar, top, mtime)
        _add_bytes(tar, f"{top}/{_PKG_INFO}", _to_lf(pkg_info), mtime, executable=False)
        made = {top}
        for member in members:
            _add_parents(tar, top, member.arcname, made, mtime)
            _add_member(tar, f"{top}/{member.arcname}", member, mtime)
    log.info("wrote %s: %d files", final.name, len(members) + 1)
    return final


def _ordered(files: Sequence[Member]) -> list[Member]:
    problems: list[str] = []
    seen: set[str] = set()
    for member in files:
        if member.arcname in seen:
            problems.append(f"{member.arcname}: duplicate member")
        if member.arcname == _PKG_INFO:
            problems.append(f"{_PKG_INFO}: written from pkg_info, not a member")
        seen.add(member.arcname)
    directories = {name.rsplit("/", i)[0] for name in seen for i in range(1, name.count("/") + 1)}
    problems += [f"{name}: is also a directory" for name in sorted(seen & directories)]
    if problems:
        raise PackagingError("invalid sdist members", problems=problems)
    return sorted(files, key=lambda m: m.arcname)


def _is_text(arcname: str) -> bool:
    return PurePosixPath(arcname).suffix.lower() in TEXT_SUFFIXES


def _to_lf(data: bytes) -> bytes:
    return data.replace(b"\r\n", b"\n")


def _info(name: str, mtime: int, mode: int, kind: bytes, size: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.size = size
    info.mtime = mtime
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _add_dir(tar: tarfile.TarFile, name: str, mtime: int) -> None:
    tar.addfile(_info(name, mtime, 0o755, tarfile.DIRTYPE))


def _add_parents(tar: tarfile.TarFile, top: str, arcname: str, made: set[str], mtime: int) -> None:
    parts = arcname.split("/")[:-1]
    for depth in range(1, len(parts) + 1):
        directory = "/".join([top, *parts[:depth]])
        if directory not in made:
            made.add(directory)
            _add_dir(tar, directory, mtime)


def _add_bytes(
    tar: tarfile.TarFile, name: str, data: bytes, mtime: int, *, executable: bool
) -> None:
    info = _info(name, mtime, 0o755 if executable else 0o644, tarfile.REGTYPE, len(data))
    tar.addfile(info, io.BytesIO(data))


def _add_member(tar: tarfile.TarFile, name: str, member: Member, mtime: int) -> None:
    if _is_text(member.arcname) or isinstance(member.source, bytes):
        data = read_all(member)
        if _is_text(member.arcname):
            data = _to_lf(data)
        _add_bytes(tar, name, data, mtime, executable=member.executable)
        return
    with _sized_stream(member) as (size, stream):
        info = _info(name, mtime, 0o755 if member.executable else 0o644, tarfile.REGTYPE, size)
        try:
            tar.addfile(info, stream)
        except OSError as exc:
            raise PackagingError(f"cannot add {member.arcname}: {exc}", path=name) from exc


@contextmanager
def _sized_stream(member: Member) -> Iterator[tuple[int, BinaryIO]]:
    """A readable stream of the content and its size (a generated one is spooled first)."""
    source = member.source
    if isinstance(source, Path):
        with open_regular(member, source) as opened:
            yield opened
        return
    with tempfile.SpooledTemporaryFile(max_size=_SPOOL_LIMIT) as spool:
        with open_source(member, 1 << 20) as stream:
            for chunk, _ in stream.chunks:
                spool.write(chunk)
        size = spool.tell()
        spool.seek(0)
        yield size, cast(BinaryIO, spool)
