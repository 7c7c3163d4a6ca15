"""The links of the devel tarball, made once its files are written (passes 2 and 3 of
:func:`rocm_sdk._tar_expand.extract_tree`).

Pass 2 creates the links the stream only remembered (symlinks, then hardlinks to regular
file members) and checks that every symlink resolves inside site-packages; a symlink into a
package that is not installed is set aside (:func:`set_aside`) and made by
:mod:`rocm_sdk._external_links` once that package is. Pass 3 turns some symlinks whose target is
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
from pathlib import Path

from ._errors import UnsafeArchiveError

__all__ = [
    "KEEP_AS_SYMLINK",
    "Link",
    "check_symlink_targets",
    "create_links",
    "keeps_symlink",
    "replace_with_hardlink",
    "set_aside",
    "symlinks_to_hardlinks",
]

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


def replace_with_hardlink(source: str, path: Path) -> None:
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
            replace_with_hardlink(resolved, path)


def set_aside(links: list[Link], dest: Path, names: set[str]) -> list[Link]:
    """The links but those named in ``names``, which are removed: links into a package that
    is not installed (a devel link into ``_rocm_profiler`` without ``rocm[profiler]``) are
    made once it is (:mod:`rocm_sdk._external_links`), never left dangling."""
    kept: list[Link] = []
    for link in links:
        if link.relpath in names:
            (dest / link.relpath).unlink()
        else:
            kept.append(link)
    return kept


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
