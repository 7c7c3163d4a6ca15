"""The links of the devel tarball, made once its files are written (passes 2 and 3 of
:func:`rocm_sdk._tar_expand.extract_tree`), and the pending links made later.

Pass 2 creates the links the stream only remembered (symlinks, then hardlinks to regular
file members) and checks that every symlink resolves inside site-packages; a symlink into a
package that is not installed is set aside, listed in ``PENDING_LINKS_NAME``, and made by
:func:`reconcile_pending` once that package is. Pass 3 turns some symlinks whose target is
a regular file into hardlinks (see :func:`keeps_symlink`), so the outcome never depends on
member order.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ._errors import UnsafeArchiveError
from ._jsonfile import read_json

__all__ = [
    "KEEP_AS_SYMLINK",
    "PENDING_LINKS_NAME",
    "Link",
    "check_symlink_targets",
    "create_links",
    "keeps_symlink",
    "pending_links",
    "reconcile_pending",
    "set_aside_dangling",
    "symlinks_to_hardlinks",
    "unreconciled_pending",
]

#: Written by :func:`~rocm_sdk._tar_expand.extract_tree` into the tree it expands; no member
#: may take this name.
PENDING_LINKS_NAME = ".devel_pending_links.json"
KEEP_AS_SYMLINK = frozenset(
    {"amdclang", "amdclang++", "amdclang-cl", "amdclang-cpp", "amdflang", "amdlld", "amdllvm"}
)
_SHARED_LIBRARY = re.compile(r"\.so(\.[0-9]+)*$")


@dataclass(frozen=True)
class Link:
    relpath: str
    target: str
    hard: bool


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _check_link_placement(link: Link, link_names: set[str], dest: Path, top: str) -> None:
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


def create_links(links: list[Link], dest: Path, top: str, hard: bool) -> None:
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


def check_symlink_targets(links: list[Link], dest: Path, site: Path, top: str) -> None:
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


def symlinks_to_hardlinks(links: list[Link], dest: Path) -> None:
    tree = os.path.realpath(dest)
    for link in sorted(links, key=lambda k: k.relpath):
        if link.hard:
            continue
        path = dest / link.relpath
        resolved = os.path.realpath(path)
        if os.path.isfile(resolved) and not keeps_symlink(link.relpath, resolved, tree):
            _replace_with_hardlink(resolved, path)


def set_aside_dangling(links: list[Link], dest: Path) -> tuple[list[Link], list[Link]]:
    """Split symlinks into kept ones and those into a package that is not installed (a
    devel link into ``_rocm_profiler`` without ``rocm[profiler]``): those are removed, not
    left dangling — a dangling link is also what ``pip uninstall`` leaves behind."""
    kept: list[Link] = []
    pending: list[Link] = []
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


def pending_links(dest: Path) -> list[tuple[str, str]]:
    """(relpath, target) of every pending link listed in ``dest``, made or not."""
    try:
        doc = read_json(dest / PENDING_LINKS_NAME)
    except (OSError, ValueError):
        return []
    entries = (_pending_entry(entry) for entry in (doc if isinstance(doc, list) else []))
    return [(relpath, target) for relpath, target in entries if relpath]


def _pending_change(link: Path, resolved: str) -> bool:
    """Whether :func:`reconcile_pending` would make ``link`` (its target is there now) or
    remove it (its target has gone)."""
    if os.path.lexists(link):
        return not os.path.exists(resolved) and (link.is_symlink() or link.is_file())
    return os.path.isfile(resolved) or os.path.isdir(resolved)


def unreconciled_pending(dest: Path) -> list[str]:
    """The relpaths of the pending links :func:`reconcile_pending` would make or remove
    now; reads only."""
    return [
        relpath for relpath, target in pending_links(dest)
        if _pending_change(dest / relpath, os.path.realpath((dest / relpath).parent / target))
    ]


def reconcile_pending(dest: Path) -> list[str]:
    """Create the pending links whose package is installed now (hardlinks or symlinks, as
    ``symlinks_to_hardlinks`` makes them); return their relpaths for the RECORD. Links
    whose package has gone since are removed again, so none ever dangles."""
    added: list[str] = []
    tree = os.path.realpath(dest)
    for relpath, target in pending_links(dest):
        link = dest / relpath
        resolved = os.path.realpath(link.parent / target)
        if not _pending_change(link, resolved):
            continue
        if os.path.lexists(link):
            link.unlink()
            continue
        if os.path.isfile(resolved):
            link.parent.mkdir(parents=True, exist_ok=True)
            if keeps_symlink(relpath, resolved, tree):
                os.symlink(target, link)
            else:
                _replace_with_hardlink(resolved, link)
            added.append(relpath)
        elif os.path.isdir(resolved):
            link.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target, link)
            added.append(relpath)
    return added
