"""Read and check every archive of a shard before assemble-shards publishes it.

A wheel is read in full through the project's wheel reader
(:func:`kpack.wheelfile._source.open_wheel`: a zip, one ``.dist-info`` with WHEEL,
METADATA and RECORD, every member listed in RECORD with its hash and size, allowed hash
names only, safe UTF-8 member names, no two differing only in case in a Windows wheel,
:data:`~kpack.wheelfile._source.DEFAULT_LIMITS` on the expansion), extracted into a
scratch directory under ``TMPDIR`` that is removed right after; its ``.dist-info`` name
and METADATA's Name/Version must match the file name. The ``rocm`` sdist is streamed
through gzip and tar (the gzip trailer checked, the expansion bounded by the same limits):
every member under ``<name>-<version>/``, no absolute path, ``..``, link leaving that
directory or special file, and ``<name>-<version>/PKG-INFO`` whose Name/Version match.

:func:`archive_problems` returns every problem of one archive, each naming the file.
"""

from __future__ import annotations

import gzip
import posixpath
import shutil
import tarfile
import tempfile
import zlib
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from kpack.common.safepath import is_utf8, safe_relpath, shown_name
from kpack.common.tempdirs import temp_dir_name
from kpack.errors import PackagingError, UnsafePathError
from kpack.wheelfile import DEFAULT_LIMITS, open_wheel
from kpack.wheelsplit import name_and_version

__all__ = ["archive_problems"]

_CHUNK = 1 << 20
_PKG_INFO_MAX = 1 << 20  # a PKG-INFO larger than this is not read
_TAR_ERRORS = (tarfile.TarError, EOFError, zlib.error, OSError, UnicodeError, ValueError)


def archive_problems(path: Path, project: str, version: str) -> list[str]:
    """Every problem of the wheel or sdist ``path``, whose file name says ``project``
    (PEP 503 normalized) and ``version`` (PEP 440 normalized); empty when it is sound."""
    try:
        if path.name.endswith(".whl"):
            _check_wheel(path, project, version)
        else:
            _check_sdist(path, project, version)
    except PackagingError as exc:
        return _lines(exc, path)
    return []


def _lines(exc: PackagingError, path: Path) -> list[str]:
    """One problem line per finding, each starting with the file."""
    head = f"{exc.path or path}: {exc.message}"
    return [f"{head}: {p}" for p in exc.problems] if exc.problems else [head]


def _same(project: str, version: str, name: str, found: str) -> bool:
    try:
        return canonicalize_name(name) == project and str(Version(found)) == version
    except (InvalidVersion, ValueError):
        return False


def _check_metadata(path: Path, what: str, text: bytes, project: str, version: str) -> None:
    name, found = name_and_version(text, f"{path}: {what}")
    if not _same(project, version, name, found):
        raise PackagingError(
            f"{what} names {shown_name(name)[:80]!r} {shown_name(found)[:80]!r}, "
            f"the file name {project} {version}",
            path=path,
        )


# --- wheels -------------------------------------------------------------------------------


def _check_wheel(path: Path, project: str, version: str) -> None:
    scratch = temp_dir_name(Path(tempfile.gettempdir()), ".assemble-shards-", ".tmp")
    try:
        wheel = open_wheel(path, scratch, DEFAULT_LIMITS)
        stem = wheel.dist_info[: -len(".dist-info")]
        name, _, found = stem.rpartition("-")
        if not _same(project, version, name, found):
            raise PackagingError(
                f"{wheel.dist_info[:120]!r} is not the .dist-info of {project} {version}",
                path=path,
            )
        _check_metadata(path, "METADATA", wheel.metadata, project, version)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# --- the sdist ----------------------------------------------------------------------------


class _Bounded:
    """A gzip stream that refuses to expand past ``limit`` bytes (a gzip bomb)."""

    def __init__(self, stream: gzip.GzipFile, limit: int, path: Path) -> None:
        self.stream, self.limit, self.path, self.read_bytes = stream, limit, path, 0

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size if size >= 0 else _CHUNK)
        self.read_bytes += len(data)
        if self.read_bytes > self.limit:
            raise PackagingError(
                f"sdist expands past {self.limit} bytes (limit {DEFAULT_LIMITS.max_ratio:.0f}:1)",
                path=self.path,
            )
        return data


def _limit(path: Path) -> int:
    size = path.stat().st_size
    ratio = int(size * DEFAULT_LIMITS.max_ratio)
    return min(max(ratio, DEFAULT_LIMITS.ratio_floor), DEFAULT_LIMITS.max_total)


def _check_sdist(path: Path, project: str, version: str) -> None:
    top = path.name[: -len(".tar.gz")]
    problems: list[str] = []
    pkg_info: bytes | None = None
    try:
        with gzip.open(path, "rb") as gz:
            stream = _Bounded(gz, _limit(path), path)
            with tarfile.open(fileobj=stream, mode="r|") as tar:  # type: ignore[call-overload]
                for member in tar:
                    problems += _member_problems(member, top)
                    if member.name == f"{top}/PKG-INFO" and member.isreg():
                        pkg_info = _read_pkg_info(tar, member)
            while stream.read(_CHUNK):  # to the end: the gzip trailer (CRC, size) is checked
                pass
    except PackagingError:
        raise
    except _TAR_ERRORS as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise PackagingError(f"not a valid gzip'd tar: {reason}", path=path) from None
    if pkg_info is None:
        problems.append(f"{top}/PKG-INFO is missing")
    if problems:
        raise PackagingError("invalid sdist", path=path, problems=problems)
    _check_metadata(path, "PKG-INFO", pkg_info or b"", project, version)


def _read_pkg_info(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    handle = tar.extractfile(member)
    if handle is None or member.size > _PKG_INFO_MAX:
        return b""
    return handle.read()


def _member_problems(member: tarfile.TarInfo, top: str) -> list[str]:
    name = member.name
    shown = repr(shown_name(name)[:200])
    if not is_utf8(name):
        return [f"member name {shown} is not valid UTF-8"]
    try:
        rel = safe_relpath(name, what="member name", allow_dir_suffix=True)
    except UnsafePathError as exc:
        return [f"unsafe member name: {exc.message}"]
    if rel.parts[0] != top:
        return [f"member {shown} is outside {top}/"]
    if member.issym() or member.islnk():
        return _link_problems(member, shown, top)
    if not (member.isreg() or member.isdir()):
        return [f"member {shown} is a special file (not a file, directory or link)"]
    return []


def _link_problems(member: tarfile.TarInfo, shown: str, top: str) -> list[str]:
    target = member.linkname
    if member.issym():
        target = posixpath.join(posixpath.dirname(member.name), target)
    resolved = posixpath.normpath(target)
    if member.linkname.startswith("/") or not (resolved + "/").startswith(f"{top}/"):
        kind = "symlink" if member.issym() else "hard link"
        return [f"member {shown} is a {kind} to {member.linkname[:200]!r}, outside {top}/"]
    return []
