"""Safe, order-independent expansion of the devel tarball into a directory.

The archive is streamed once. Pass 1 writes directories and regular files and
only remembers links. Pass 2 creates the links, then checks that every symlink
resolves inside site-packages. Pass 3 turns some symlinks whose target is a regular
file into hardlinks, so the outcome never depends on member order (see
:func:`keeps_symlink`). Off Windows, the devel tree reaches the files of the other packages
(core, libraries) through relative symlinks: a file must have one identity, or once a
container layer turns hard links into copies two copies of a library load into one
process. Programs are the exception: they find their install prefix from
``/proc/self/exe``, which a symlink resolves to the other package, so they are hard links.

Bounded: the archive may expand to at most ``ExpansionLimit.limit`` bytes of tar stream
(every header, name and declared member size counted), checked at each member before any
of its bytes are written; no member writes more than its declared size; a pax or GNU
long-name header larger than any name needs is refused before ``tarfile`` reads it whole.
A failed write (a full disk) names the file.
"""

from __future__ import annotations

import contextlib
import json
import lzma
import os
import posixpath
import re
import shutil
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, TypeVar

from ._errors import DevelError, UnsafeArchiveError
from ._jsonfile import read_json
from ._limits import MAX_DEVEL_SIZE_ENV, ExpansionLimit
from ._record import _write_new

KEEP_AS_SYMLINK = frozenset(
    {"amdclang", "amdclang++", "amdclang-cl", "amdclang-cpp", "amdflang", "amdlld", "amdllvm"}
)
_SHARED_LIBRARY = re.compile(r"\.so(\.[0-9]+)*$")


def keeps_symlink(relpath: str, resolved: str, tree: str) -> bool:
    """Whether a devel link stays a (relative) symlink instead of becoming a hardlink.
    Windows: never (symlinks need privileges there). Elsewhere: the compiler drivers
    directly under ``bin/``, every link to a shared library, and every link out of the
    devel tree (real path ``tree``) to a file that is not a program (headers, CMake and
    data files, static libraries, device archives). A program (any execute bit) stays a
    hard link: it finds its install prefix (the devel tree, with the headers) from
    ``/proc/self/exe`` (clang, offload-arch) or its script's real path (hipconfig), which
    a symlink resolves to the package it points into, where no headers are."""
    if os.name == "nt":
        return False
    parent, _, name = relpath.rpartition("/")
    if (parent == "bin" and name in KEEP_AS_SYMLINK) or _SHARED_LIBRARY.search(
        os.path.basename(resolved)
    ):
        return True
    if resolved == tree or resolved.startswith(tree + os.sep):
        return False  # within the tree: one layer, one identity either way
    try:
        return not os.stat(resolved).st_mode & 0o111
    except OSError:
        return False
_CHUNK = 1 << 20
#: Written by :func:`extract_tree` into the tree it expands; no member may take this name.
PENDING_LINKS_NAME = ".devel_pending_links.json"
#: The most data a pax or GNU long-name header may hold (tarfile reads it whole).
MAX_EXTENDED_HEADER = 1 << 20
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


@dataclass(frozen=True)
class _Link:
    relpath: str
    target: str
    hard: bool


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


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


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
) -> tuple[list[str], list[_Link]]:
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
) -> tuple[list[str], list[_Link]]:
    files: list[str] = []
    links: list[_Link] = []
    with tarfile.open(tarball, "r|*", tarinfo=_CheckedTarInfo) as archive:
        for member in archive:
            _check_budget(archive, tarball, limit)
            rel = member_relpath(member.name, top)
            if rel == PENDING_LINKS_NAME:  # written by extract_tree: never a member's
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
                links.append(_Link(rel, member.linkname, hard=False))
            elif member.islnk():
                links.append(_Link(rel, member_relpath(member.linkname, top), hard=True))
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


def _check_link_placement(link: _Link, link_names: set[str], dest: Path, top: str) -> None:
    if _has_link_ancestor(link.relpath, link_names):
        raise UnsafeArchiveError(f"member {top}/{link.relpath} lies under a link")
    if os.path.lexists(dest / link.relpath):
        raise UnsafeArchiveError(f"member {top}/{link.relpath} appears twice")
    target = link.target
    absolute = posixpath.isabs(target) or "\\" in target or re.match(r"^[A-Za-z]:", target)
    if not link.hard and absolute:
        raise UnsafeArchiveError(f"symlink {top}/{link.relpath} has absolute target {target!r}")


def _has_link_ancestor(relpath: str, link_names: set[str]) -> bool:
    parts = relpath.split("/")
    return any("/".join(parts[:i]) in link_names for i in range(1, len(parts)))


def _create_links(links: list[_Link], dest: Path, top: str, hard: bool) -> None:
    link_names = {link.relpath for link in links}
    for link in sorted(links, key=lambda k: k.relpath):
        if link.hard != hard:
            continue
        _check_link_placement(link, link_names, dest, top)
        path = dest / link.relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        if not hard:
            os.symlink(link.target, path)
            continue
        source = dest / link.target
        if (
            link.target in link_names
            or _has_link_ancestor(link.target, link_names)
            or source.is_symlink()
            or not source.is_file()
        ):
            raise UnsafeArchiveError(
                f"hardlink {top}/{link.relpath} must name a regular file member, "
                f"not {link.target!r}"
            )
        os.link(source, path)


def _check_symlink_targets(links: list[_Link], dest: Path, site: Path, top: str) -> None:
    """Every symlink must resolve inside ``dest`` or elsewhere in site-packages."""
    real_dest = os.path.realpath(dest)
    real_site = os.path.realpath(site)
    final = os.path.join(real_site, top)
    for link in links:
        if link.hard:
            continue
        resolved = os.path.realpath(dest / link.relpath)
        inside = _within(resolved, real_dest) or (
            _within(resolved, real_site) and not _within(resolved, final)
        )
        if not inside:
            raise UnsafeArchiveError(
                f"symlink {top}/{link.relpath} -> {link.target!r} resolves outside site-packages"
            )


def _replace_with_hardlink(source: str, path: Path) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):  # a leftover is never written through
        os.unlink(tmp)
    try:
        os.link(source, tmp)
    except OSError:
        shutil.copy2(source, tmp)
    os.replace(tmp, path)


def _symlinks_to_hardlinks(links: list[_Link], dest: Path) -> None:
    for link in sorted(links, key=lambda k: k.relpath):
        if link.hard:
            continue
        path = dest / link.relpath
        resolved = os.path.realpath(path)
        tree = os.path.realpath(dest)
        if os.path.isfile(resolved) and not keeps_symlink(link.relpath, resolved, tree):
            _replace_with_hardlink(resolved, path)


def _set_aside_dangling(links: list[_Link], dest: Path) -> tuple[list[_Link], list[_Link]]:
    """Split symlinks into kept ones and those into a package that is not installed (a
    devel link into ``_rocm_profiler`` without ``rocm[profiler]``): those are removed, not
    left dangling — a dangling link is also what ``pip uninstall`` leaves behind."""
    kept: list[_Link] = []
    pending: list[_Link] = []
    real_dest = os.path.realpath(dest)
    for link in links:
        path = dest / link.relpath
        if link.hard or os.path.exists(path):
            kept.append(link)
        elif _within(os.path.realpath(path), real_dest):
            kept.append(link)  # dangling inside the tree itself: the archive's own choice
        else:
            path.unlink()
            pending.append(link)
    return kept, pending


def extract_tree(
    tarball: Path, top: str, dest: Path, site: Path, limit: ExpansionLimit | None = None
) -> list[str]:
    """Expand the members under ``top/`` of ``tarball`` into the new dir ``dest``.

    ``dest`` must be a direct child of ``site`` (like the final ``site/top``), so
    relative links resolve the same. Returns the POSIX relpaths (relative to
    ``dest``) of every file and link created, sorted. Links into packages that are not
    installed are listed in ``PENDING_LINKS_NAME`` instead (see :func:`reconcile_pending`).
    ``limit`` defaults to :meth:`ExpansionLimit.default` of the tarball's size.
    """
    if limit is None:
        limit = ExpansionLimit.default(tarball.stat().st_size)
    dest.mkdir()
    try:
        files, links = _stream_pass(tarball, top, dest, limit)
        _create_links(links, dest, top, hard=False)
        _check_symlink_targets(links, dest, site, top)
        links, pending = _set_aside_dangling(links, dest)
        _create_links(links, dest, top, hard=True)
    except UnsafeArchiveError as exc:  # the message names the member: add the tarball
        raise UnsafeArchiveError(f"{tarball}: {exc}") from None
    _symlinks_to_hardlinks(links, dest)
    created = files + [link.relpath for link in links]
    doc = [{"relpath": link.relpath, "target": link.target} for link in pending]
    # Created exclusively, never written through a link (a failed write names the file).
    _write_new(dest / PENDING_LINKS_NAME, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return sorted([*created, PENDING_LINKS_NAME])


def _pending_entry(entry: object) -> tuple[str, str]:
    """(relpath, target) of a pending-links entry, or ('', '') unless both are non-empty
    strings and the relpath stays inside the tree."""
    if not isinstance(entry, dict):
        return "", ""
    relpath, target = entry.get("relpath"), entry.get("target")
    if not isinstance(relpath, str) or not isinstance(target, str) or not relpath or not target:
        return "", ""
    rel = PurePosixPath(relpath)
    if rel.is_absolute() or ".." in rel.parts or "\0" in relpath + target:
        return "", ""
    return relpath, target


def reconcile_pending(dest: Path) -> list[str]:
    """Create the pending links whose package is installed now (hardlinks or symlinks, as
    ``_symlinks_to_hardlinks`` makes them); return their relpaths for the RECORD. Links
    whose package has gone since are removed again, so none ever dangles."""
    path = dest / PENDING_LINKS_NAME
    try:
        doc = read_json(path)
    except (OSError, ValueError):
        return []
    added: list[str] = []
    for entry in doc if isinstance(doc, list) else []:
        relpath, target = _pending_entry(entry)
        if not relpath:
            continue
        link = dest / relpath
        resolved = os.path.realpath(link.parent / target)
        if os.path.lexists(link):
            if not os.path.exists(resolved) and (link.is_symlink() or link.is_file()):
                link.unlink()
            continue
        if os.path.isfile(resolved):
            link.parent.mkdir(parents=True, exist_ok=True)
            if keeps_symlink(relpath, resolved, os.path.realpath(dest)):
                os.symlink(target, link)
            else:
                _replace_with_hardlink(resolved, link)
            added.append(relpath)
        elif os.path.isdir(resolved):
            link.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target, link)
            added.append(relpath)
    return added
