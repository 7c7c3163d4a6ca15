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

:func:`archive_problems` returns every problem of one archive, each naming the file;
:func:`check_archive` also counts what a device wheel holds (:class:`Contents`, counted as the
builder's report counts it), so a shard's ``report.json`` is checked against the wheels.
"""

from __future__ import annotations

import gzip
import posixpath
import shutil
import tarfile
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from build_tools.report import count_contents
from kpack.archive import KpackArchive
from kpack.common.safepath import is_utf8, safe_relpath, shown_name
from kpack.common.tempdirs import temp_dir_name
from kpack.errors import PackagingError, RocmPackagingError, UnsafePathError
from kpack.wheelfile import DEFAULT_LIMITS, InputWheel, open_wheel
from kpack.wheelsplit import name_and_version

__all__ = ["Contents", "archive_problems", "check_archive"]

_CHUNK = 1 << 20
_PKG_INFO_MAX = 1 << 20  # a PKG-INFO larger than this is not read
_TAR_ERRORS = (tarfile.TarError, EOFError, zlib.error, OSError, UnicodeError, ValueError)


@dataclass(frozen=True)
class Contents:
    """What a device wheel holds: the kernels of its ``.kpack`` archives and its other
    (database) files, as its report row counts them."""

    kernels: int
    database_files: int


def archive_problems(path: Path, project: str, version: str) -> list[str]:
    """Every problem of the wheel or sdist ``path``, whose file name says ``project``
    (PEP 503 normalized) and ``version`` (PEP 440 normalized); empty when it is sound."""
    return check_archive(path, project, version)[1]


def check_archive(
    path: Path, project: str, version: str, *, count: bool = False
) -> tuple[Contents | None, list[str]]:
    """:func:`archive_problems`, and with ``count`` (a device wheel) what the wheel holds
    (None when it has problems, or without ``count``)."""
    try:
        if path.name.endswith(".whl"):
            return _check_wheel(path, project, version, count=count), []
        _check_sdist(path, project, version)
    except PackagingError as exc:
        return None, _lines(exc, path)
    return None, []


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


def _check_wheel(path: Path, project: str, version: str, *, count: bool) -> Contents | None:
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
        return _count(wheel) if count else None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _count(wheel: InputWheel) -> Contents:
    """The kernels and database files of an extracted device wheel; a ``.kpack`` member
    that does not read is a problem of the wheel."""

    def kernels_in(name: str) -> int:
        try:
            with KpackArchive.open(wheel.root / name) as archive:
                return len(archive.keys())
        except RocmPackagingError as exc:
            message = f"{name}: not a valid .kpack archive: {exc.message}"
            raise PackagingError(message, path=wheel.path) from None
        except OSError as exc:
            raise PackagingError(f"{name}: cannot read: {exc.strerror}", path=wheel.path) from None

    return Contents(*count_contents((e.arcname for e in wheel.entries), kernels_in))


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
