"""Safe, order-independent expansion of the devel tarball into a directory.

The archive is streamed once. Pass 1 writes directories and regular files and
only remembers links. Pass 2 creates the links, then checks that every symlink
resolves inside site-packages. Pass 3 turns each symlink whose target is a
regular file into a hardlink, so the outcome never depends on member order.
Compiler-driver links directly under ``bin/`` and directory links stay symlinks.
"""

from __future__ import annotations

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

from ._errors import DevelError, UnsafeArchiveError

KEEP_AS_SYMLINK = frozenset(
    {"amdclang", "amdclang++", "amdclang-cl", "amdclang-cpp", "amdflang", "amdlld", "amdllvm"}
)
_CHUNK = 1 << 20


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
    if name.startswith(("/", "\\")) or "\\" in name or re.match(r"^[A-Za-z]:", name):
        raise UnsafeArchiveError(f"member {name!r} is absolute or not a POSIX path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafeArchiveError(f"member {name!r} contains '..'")
    if not parts or parts[0] != top:
        raise UnsafeArchiveError(f"member {name!r} is outside {top}/")
    return "/".join(parts[1:])


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
    with os.fdopen(fd, "wb") as out:
        if source is not None:
            shutil.copyfileobj(source, out, _CHUNK)
    os.chmod(path, (member.mode & 0o777) | 0o600)


def _stream_pass(tarball: Path, top: str, dest: Path) -> tuple[list[str], list[_Link]]:
    try:
        return _stream_members(tarball, top, dest)
    except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError) as exc:
        raise DevelError(
            f"{tarball} is damaged ({type(exc).__name__}: {exc}); reinstall the devel package"
        ) from None


def _stream_members(tarball: Path, top: str, dest: Path) -> tuple[list[str], list[_Link]]:
    files: list[str] = []
    links: list[_Link] = []
    with tarfile.open(tarball, "r|*") as archive:
        for member in archive:
            rel = member_relpath(member.name, top)
            if member.isdir():
                (dest / rel).mkdir(parents=True, exist_ok=True)
            elif not rel:
                raise UnsafeArchiveError(f"member {member.name!r} must be a directory")
            elif member.isreg():
                _write_file(archive, member, dest / rel)
                files.append(rel)
            elif member.issym():
                links.append(_Link(rel, member.linkname, hard=False))
            elif member.islnk():
                links.append(_Link(rel, member_relpath(member.linkname, top), hard=True))
            else:
                raise UnsafeArchiveError(f"member {member.name!r} has an unsupported type")
        _check_end(archive, tarball)
    return files, links


def _check_end(archive: tarfile.TarFile, tarball: Path) -> None:
    """The archive really ended: ``tarfile`` stops without a word at a damaged header or a
    truncation after the first member, so what follows must be the end-of-archive zero
    blocks (at least one more 512-byte block; the first one ended the iteration)."""
    seen = 0
    while True:
        chunk = archive.fileobj.read(_CHUNK)  # type: ignore[union-attr]
        if not chunk:
            break
        if chunk.count(0) != len(chunk):
            raise DevelError(f"{tarball} is damaged (data after a broken member header)")
        seen += len(chunk)
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
    try:
        os.link(source, tmp)
    except OSError:
        shutil.copy2(source, tmp)
    os.replace(tmp, path)


def _symlinks_to_hardlinks(links: list[_Link], dest: Path) -> None:
    for link in sorted(links, key=lambda k: k.relpath):
        parent, _, name = link.relpath.rpartition("/")
        if link.hard or (os.name != "nt" and parent == "bin" and name in KEEP_AS_SYMLINK):
            continue
        path = dest / link.relpath
        resolved = os.path.realpath(path)
        if os.path.isfile(resolved):
            _replace_with_hardlink(resolved, path)


PENDING_LINKS_NAME = ".devel_pending_links.json"


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


def extract_tree(tarball: Path, top: str, dest: Path, site: Path) -> list[str]:
    """Expand the members under ``top/`` of ``tarball`` into the new dir ``dest``.

    ``dest`` must be a direct child of ``site`` (like the final ``site/top``), so
    relative links resolve the same. Returns the POSIX relpaths (relative to
    ``dest``) of every file and link created, sorted. Links into packages that are not
    installed are listed in ``PENDING_LINKS_NAME`` instead (see :func:`reconcile_pending`).
    """
    dest.mkdir()
    files, links = _stream_pass(tarball, top, dest)
    _create_links(links, dest, top, hard=False)
    _check_symlink_targets(links, dest, site, top)
    links, pending = _set_aside_dangling(links, dest)
    _create_links(links, dest, top, hard=True)
    _symlinks_to_hardlinks(links, dest)
    created = files + [link.relpath for link in links]
    doc = [{"relpath": link.relpath, "target": link.target} for link in pending]
    (dest / PENDING_LINKS_NAME).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return sorted([*created, PENDING_LINKS_NAME])


def reconcile_pending(dest: Path) -> list[str]:
    """Create the pending links whose package is installed now (as hardlinks to files, as
    ``_symlinks_to_hardlinks`` makes them); return their relpaths for the RECORD. Links
    whose package has gone since are removed again, so none ever dangles."""
    path = dest / PENDING_LINKS_NAME
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    added: list[str] = []
    for entry in doc if isinstance(doc, list) else []:
        relpath, target = str(entry.get("relpath", "")), str(entry.get("target", ""))
        link = dest / relpath
        resolved = os.path.realpath(link.parent / target) if relpath else ""
        if not relpath or ".." in PurePosixPath(relpath).parts:
            continue
        if os.path.lexists(link):
            if not os.path.exists(resolved) and (link.is_symlink() or link.is_file()):
                link.unlink()
            continue
        if os.path.isfile(resolved):
            link.parent.mkdir(parents=True, exist_ok=True)
            _replace_with_hardlink(resolved, link)
            added.append(relpath)
        elif os.path.isdir(resolved):
            link.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target, link)
            added.append(relpath)
    return added
