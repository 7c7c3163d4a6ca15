"""Safe, order-independent expansion of the devel tarball into a directory.

The archive is streamed once. Pass 1 writes directories and regular files and
only remembers links. Pass 2 creates the links, then checks that every symlink
resolves inside site-packages. Pass 3 turns some symlinks whose target is a regular
file into hardlinks, so the outcome never depends on member order (passes 2 and 3 live in
:mod:`rocm_sdk._tar_links`; see its :func:`~rocm_sdk._tar_links.keeps_symlink`). Off
Windows, the devel tree reaches the files of the other packages (core, libraries) through
relative symlinks: a file must have one identity, or once a container layer turns hard
links into copies two copies of a library load into one process. Programs are the
exception: they find their install prefix from ``/proc/self/exe``, which a symlink
resolves to the other package, so they are hard links.

Bounded: the archive may expand to at most ``ExpansionLimit.limit`` bytes of tar stream
(every header, name and declared member size counted), checked at each member before any
of its bytes are written; no member writes more than its declared size; a pax or GNU
long-name header larger than any name needs is refused before ``tarfile`` reads it whole.
A failed write (a full disk) names the file.
"""

from __future__ import annotations

import lzma
import os
import re
import tarfile
import zlib
from pathlib import Path
from typing import IO, TypeVar

from ._device_links import RECONCILE_LOCK_NAME
from ._errors import DevelError, UnsafeArchiveError
from ._external_links import (
    EXTERNAL_LINKS_NAME,
    STATE_NAME,
    external_links,
    target_there,
    write_manifest,
)
from ._limits import MAX_DEVEL_SIZE_ENV, ExpansionLimit
from ._tar_links import (
    Link,
    check_symlink_targets,
    create_links,
    set_aside,
    symlinks_to_hardlinks,
)

_CHUNK = 1 << 20
#: The most data a pax or GNU long-name header may hold (tarfile reads it whole).
MAX_EXTENDED_HEADER = 1 << 20
#: The names of the runtime's own records in the tree: never a member's.
RESERVED_NAMES = frozenset({EXTERNAL_LINKS_NAME, STATE_NAME, RECONCILE_LOCK_NAME})
_EXTENDED_TYPES = frozenset({tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE,
                             tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK})


class _ExtendedHeaderTooLarge(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


_Info = TypeVar("_Info", bound="_CheckedTarInfo")


class _CheckedTarInfo(tarfile.TarInfo):
    """A header whose extended-header data (pax records, GNU long names) is checked for
    size before ``tarfile`` reads that data into memory."""

    @classmethod
    def frombuf(cls: type[_Info], buf: bytes | bytearray, encoding: str, errors: str) -> _Info:
        info = super().frombuf(buf, encoding, errors)
        if info.type in _EXTENDED_TYPES and info.size > MAX_EXTENDED_HEADER:
            raise _ExtendedHeaderTooLarge(info.size)
        return info


def member_relpath(name: str, top: str) -> str:
    """A member name relative to the top directory ``top`` ('' for ``top`` itself).

    Raises UnsafeArchiveError for absolute names, '..' components and names
    outside ``top/``.
    """
    _check_name(name, "member")
    if name.startswith(("/", "\\")) or "\\" in name or re.match(r"^[A-Za-z]:", name):
        raise UnsafeArchiveError(f"member {name!r} is absolute or not a POSIX path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafeArchiveError(f"member {name!r} contains '..'")
    if not parts or parts[0] != top:
        raise UnsafeArchiveError(f"member {name!r} is outside {top}/")
    return "/".join(parts[1:])


def _check_name(name: str, what: str) -> None:
    """A name read from the archive must be valid UTF-8 (``tarfile`` keeps undecodable bytes
    as surrogates: the RECORD and every other platform need UTF-8) without NUL bytes (a pax
    record can hold them; no file system name can)."""
    if "\0" in name:
        raise UnsafeArchiveError(f"{what} {name!r} contains a NUL byte")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise UnsafeArchiveError(f"{what} {name!r} is not valid UTF-8") from None


def _write_file(archive: tarfile.TarFile, member: tarfile.TarInfo, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    flags |= getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        raise UnsafeArchiveError(f"member {member.name!r} appears twice") from None
    source = archive.extractfile(member)
    try:
        with os.fdopen(fd, "wb") as out:
            if source is not None:
                _copy_declared(source, out, member.size)
    except OSError as exc:
        if exc.filename is None:  # a failed write (full disk, quota) names no file
            exc.filename = str(path)
        raise
    os.chmod(path, (member.mode & 0o777) | 0o600)


def _copy_declared(source: IO[bytes], out: IO[bytes], size: int) -> None:
    """Copy exactly ``size`` bytes, never more (tarfile raises if the archive has fewer)."""
    remaining = size
    while remaining > 0:
        chunk = source.read(min(_CHUNK, remaining))
        if not chunk:
            raise tarfile.ReadError("unexpected end of data")
        out.write(chunk)
        remaining -= len(chunk)


def _stream_pass(
    tarball: Path, top: str, dest: Path, limit: ExpansionLimit
) -> tuple[list[str], list[Link]]:
    try:
        return _stream_members(tarball, top, dest, limit)
    except _ExtendedHeaderTooLarge as exc:
        raise DevelError(
            f"{tarball} is damaged (an extended header of {exc.size} bytes; no name needs "
            f"more than {MAX_EXTENDED_HEADER})"
        ) from None
    except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError) as exc:
        raise DevelError(
            f"{tarball} is damaged ({type(exc).__name__}: {exc}); reinstall the devel package"
        ) from None


def _check_budget(archive: tarfile.TarFile, tarball: Path, limit: ExpansionLimit) -> None:
    """The tar stream read so far, this member's declared data included, is within ``limit``
    (``archive.offset`` is already past the member's data when iteration yields it)."""
    if archive.offset > limit.limit:
        raise DevelError(
            f"{tarball} expands to more than {limit.limit} bytes, the limit ({limit.origin}); "
            f"if this tarball is genuine, set {MAX_DEVEL_SIZE_ENV} to a larger number of bytes"
        )


def _stream_members(
    tarball: Path, top: str, dest: Path, limit: ExpansionLimit
) -> tuple[list[str], list[Link]]:
    files: list[str] = []
    links: list[Link] = []
    with tarfile.open(tarball, "r|*", tarinfo=_CheckedTarInfo) as archive:
        for member in archive:
            _check_budget(archive, tarball, limit)
            rel = member_relpath(member.name, top)
            if rel in RESERVED_NAMES:
                raise UnsafeArchiveError(
                    f"member {member.name!r} has a name rocm-sdk reserves for its own records"
                )
            if member.isdir():
                (dest / rel).mkdir(parents=True, exist_ok=True)
            elif not rel:
                raise UnsafeArchiveError(f"member {member.name!r} must be a directory")
            elif member.issparse():
                raise UnsafeArchiveError(f"member {member.name!r} is a sparse file")
            elif member.isreg():
                _write_file(archive, member, dest / rel)
                files.append(rel)
            elif member.issym():
                _check_name(member.linkname, f"symlink {member.name!r} target")
                links.append(Link(rel, member.linkname, hard=False))
            elif member.islnk():
                links.append(Link(rel, member_relpath(member.linkname, top), hard=True))
            else:
                raise UnsafeArchiveError(f"member {member.name!r} has an unsupported type")
        _check_end(archive, tarball, limit)
    return files, links


def _check_end(archive: tarfile.TarFile, tarball: Path, limit: ExpansionLimit) -> None:
    """The archive really ended: ``tarfile`` stops without a word at a damaged header or a
    truncation after the first member, so what follows must be the end-of-archive zero
    blocks (at least one more 512-byte block; the first one ended the iteration), and no
    more of them than the limit allows."""
    seen = 0
    while True:
        chunk = archive.fileobj.read(_CHUNK)
        if not chunk:
            break
        if chunk.count(0) != len(chunk):
            raise DevelError(f"{tarball} is damaged (data after a broken member header)")
        seen += len(chunk)
        if archive.fileobj.tell() > limit.limit:
            raise DevelError(
                f"{tarball} expands to more than {limit.limit} bytes, the limit "
                f"({limit.origin}), in zero blocks after its end"
            )
    if seen < tarfile.BLOCKSIZE:
        raise DevelError(f"{tarball} is damaged (truncated: no end-of-archive marker)")


def extract_tree(
    tarball: Path, top: str, dest: Path, site: Path, limit: ExpansionLimit | None = None
) -> list[str]:
    """Expand the members under ``top/`` of ``tarball`` into the new dir ``dest``.

    ``dest`` must be a direct child of ``site`` (like the final ``site/top``), so
    relative links resolve the same. Returns the POSIX relpaths (relative to
    ``dest``) of every file and link created, sorted. Every link into another package is
    listed in ``EXTERNAL_LINKS_NAME`` (see :mod:`rocm_sdk._external_links`); one whose
    package is not installed is not made.
    ``limit`` defaults to :meth:`ExpansionLimit.default` of the tarball's size.
    """
    if limit is None:
        limit = ExpansionLimit.default(tarball.stat().st_size)
    dest.mkdir()
    try:
        files, links = _stream_pass(tarball, top, dest, limit)
        create_links(links, dest, top, hard=False)
        check_symlink_targets(links, dest, site, top)
        symlinks = {k.relpath: k.target for k in links if not k.hard}
        external = external_links(symlinks, [*files, *(k.relpath for k in links if k.hard)])
        absent = {k.relpath for k in external if not target_there(site, k)}
        links = set_aside(links, dest, absent)
        create_links(links, dest, top, hard=True)
    except UnsafeArchiveError as exc:  # the message names the member: add the tarball
        raise UnsafeArchiveError(f"{tarball}: {exc}") from None
    symlinks_to_hardlinks(links, dest)
    # Created exclusively, never written through a link (a failed write names the file).
    write_manifest(dest, external)
    return sorted([*files, *(link.relpath for link in links), EXTERNAL_LINKS_NAME])
