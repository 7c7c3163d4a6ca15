"""Links from the expanded devel tree into the other packages of the set.

The devel tarball reaches every file core, libraries and profiler ship through a relative
symlink (``lib/libamdhip64.so.7 -> ../../_rocm_sdk_core/lib/libamdhip64.so.7``); some become
hard links (programs, see :func:`~rocm_sdk._tar_links.keeps_symlink`). Each such *external
link* is listed in the tree's manifest ``EXTERNAL_LINKS_NAME`` with the package its target
belongs to, and once made it is recorded twice: in the devel RECORD, and in the RECORD of
that package. ``pip uninstall`` of the package then removes the link with its target, so
no link outlives its target: pip skips a RECORD path that does not exist, and a dangling
symlink does not, so a link recorded by devel alone would be left behind once its target
went first (pip's own order puts rocm-sdk-core before rocm-sdk-devel).

A link whose package is not installed is not made; :func:`reconcile` makes it once the
package is there and removes a made link whose target has gone (a package removed by other
means, or reinstalled: pip removes the links with the old files and the new RECORD has no
rows for them). It runs on every ``get_devel_root()``; a fast path skips it while the
installed packages' dist-info directories are the ones the last reconcile saw (``STATE_NAME``).
"""

from __future__ import annotations

import bisect
import json
import logging
import os
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ._jsonfile import read_json
from ._layout import dist_info_dirs, dist_info_name, normalize_dist_name
from ._record import _write_new, locked_record, read_record_paths
from ._tar_links import keeps_symlink, replace_with_hardlink

__all__ = [
    "EXTERNAL_LINKS_NAME",
    "STATE_NAME",
    "ExternalLink",
    "external_links",
    "fingerprint",
    "is_current",
    "made_in",
    "read_manifest",
    "reconcile",
    "record_owners",
    "stale_links",
    "target_there",
    "write_manifest",
    "write_state",
]

logger = logging.getLogger(__name__)

#: Written into the tree at expansion: every external link, made or not.
EXTERNAL_LINKS_NAME = ".devel_external_links.json"
#: What the last reconcile saw of the owning packages (the fast path's key).
STATE_NAME = ".devel_links_state.json"
#: The most symlinks followed resolving one member name (the kernel's limit).
_MAX_HOPS = 40


@dataclass(frozen=True, kw_only=True)
class ExternalLink:
    """``relpath`` (in the tree) links to ``target`` (as the archive wrote it), which
    resolves to ``path`` (relative to site-packages) in the platform package ``package``."""

    relpath: str
    target: str
    package: str
    path: str


def resolve_in_archive(relpath: str, links: Mapping[str, str]) -> str | None:
    """Where ``relpath`` leads through the archive's symlinks ``links`` (relpath -> target),
    as a normalised path relative to the tree ('../' when it leaves it); None for a loop."""
    parts = relpath.split("/")
    hops, i = 0, 1
    while i <= len(parts):
        prefix = "/".join(parts[:i])
        target = links.get(prefix)
        if target is None:
            i += 1
            continue
        hops += 1
        if hops > _MAX_HOPS:
            return None
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(prefix), target))
        parts = [*joined.split("/"), *parts[i:]]
        if parts[0] == "..":
            break
        i = 1
    return posixpath.normpath("/".join(parts))


def external_links(links: Mapping[str, str], files: Iterable[str] = ()) -> list[ExternalLink]:
    """The symlinks of the archive (relpath -> target) that lead into a sibling package, and
    those that lead to a directory of the archive holding nothing but links into one package
    (``include/hip/hcc_detail -> amd_detail``): once that package goes, so does the
    directory (pip removes a directory whose files it all removes, uv an emptied one), and
    the link with it. ``files`` are the other members that are not directories."""
    out: dict[str, ExternalLink] = {}
    inside: dict[str, str] = {}
    for relpath in sorted(links):
        resolved = resolve_in_archive(relpath, links)
        if resolved is None or resolved.startswith("../../"):
            continue
        if not resolved.startswith("../"):
            inside[relpath] = resolved
            continue
        path = resolved[3:]
        package = path.split("/", 1)[0]
        out[relpath] = ExternalLink(
            relpath=relpath, target=links[relpath], package=package, path=path
        )
    entries = sorted({*files, *links})
    for relpath, resolved in inside.items():
        start = bisect.bisect_left(entries, f"{resolved}/")
        end = bisect.bisect_left(entries, f"{resolved}0")  # '0' follows '/'
        under = entries[start:end]
        owners = {out[e].package for e in under if e in out}
        if not under or len(owners) != 1 or not all(e in out for e in under):
            continue
        where = posixpath.commonpath([posixpath.dirname(out[e].path) for e in under])
        package = owners.pop()
        if where.split("/", 1)[0] == package:
            out[relpath] = ExternalLink(
                relpath=relpath, target=links[relpath], package=package, path=where
            )
    return [out[relpath] for relpath in sorted(out)]


def write_manifest(tree: Path, links: Iterable[ExternalLink]) -> None:
    rows = [
        json.dumps(
            {"relpath": k.relpath, "target": k.target, "package": k.package, "path": k.path},
            separators=(",", ":"),
            sort_keys=True,
        )
        for k in links
    ]
    _write_new(tree / EXTERNAL_LINKS_NAME, "[\n" + ",\n".join(rows) + "\n]\n")


def _entry(entry: object) -> ExternalLink | None:
    """An entry of the manifest, or None unless every field is a non-empty string and the
    paths stay inside the tree and site-packages."""
    if not isinstance(entry, dict):
        return None
    fields = [entry.get(key) for key in ("relpath", "target", "package", "path")]
    if not all(isinstance(f, str) and f and "\0" not in f for f in fields):
        return None
    relpath, target, package, path = (str(f) for f in fields)
    for value in (relpath, path):  # strings, not PurePosixPath: a manifest has thousands
        if value.startswith("/") or "\\" in value or ".." in value.split("/"):
            return None
    if path.split("/", 1)[0] != package:
        return None
    return ExternalLink(relpath=relpath, target=target, package=package, path=path)


def read_manifest(tree: Path) -> list[ExternalLink]:
    """The external links of ``tree``; [] when its manifest is missing or unreadable (then
    nothing is made or removed), its bad entries skipped."""
    try:
        doc = read_json(tree / EXTERNAL_LINKS_NAME)
    except (OSError, ValueError):
        return []
    entries = (_entry(e) for e in (doc if isinstance(doc, list) else []))
    return [link for link in entries if link is not None]


def made_in(tree: Path, link: ExternalLink) -> bool:
    return os.path.lexists(os.path.join(tree, link.relpath))


def target_there(site: Path, link: ExternalLink) -> bool:
    path = os.path.join(site, link.path)
    return os.path.isfile(path) or os.path.isdir(path)


def stale_links(site: Path, tree: Path, links: Iterable[ExternalLink]) -> list[ExternalLink]:
    """The links :func:`reconcile` would make (target there, link not) or remove (link
    there, target gone) now; reads only (two ``stat`` calls a link: plain strings, as
    ``get_devel_root()`` may check thousands)."""
    return [k for k in links if made_in(tree, k) != target_there(site, k)]


def _make(site: Path, tree: Path, link: ExternalLink) -> None:
    path = tree / link.relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    resolved = os.path.realpath(site / link.path)
    if os.path.isdir(resolved) or keeps_symlink(link.relpath, resolved, os.path.realpath(tree)):
        os.symlink(link.target, path)
    else:
        replace_with_hardlink(resolved, path)


def reconcile(site: Path, tree: Path, links: Iterable[ExternalLink]) -> list[ExternalLink]:
    """Make the links whose target is there, remove those whose target has gone; return the
    links made now (for the RECORDs)."""
    made: list[ExternalLink] = []
    for link in stale_links(site, tree, links):
        if made_in(tree, link):
            (tree / link.relpath).unlink()
        else:
            _make(site, tree, link)
            made.append(link)
    return made


def _owner_name(package: str) -> str:
    """The distribution whose platform package ``package`` is (the set's naming rule)."""
    from . import _dist_info as di  # generated at build time; imported where it is used

    nonce = di.PY_PACKAGE_SUFFIX_NONCE
    name = package.removeprefix("_")
    if nonce and name.endswith(nonce):
        name = name[: -len(nonce)]
    return normalize_dist_name(name)


def _owner_dist_infos(site: Path) -> dict[str, Path]:
    return {dist_info_name(d): d for d in dist_info_dirs(site)}


def _listed(rows: list[str]) -> set[str]:
    """Every RECORD path and every directory above one."""
    out = set(rows)
    for row in rows:
        parent = posixpath.dirname(row)
        while parent and parent not in out:
            out.add(parent)
            parent = posixpath.dirname(parent)
    return out


def record_owners(site: Path, tree: Path, links: Iterable[ExternalLink]) -> None:
    """Record every made link in the RECORD of the package that lists its target, so
    uninstalling that package removes the link with it (rows already there are kept)."""
    by_package: dict[str, list[ExternalLink]] = {}
    for link in links:
        if made_in(tree, link):
            by_package.setdefault(link.package, []).append(link)
    dist_infos = _owner_dist_infos(site)
    for package, group in sorted(by_package.items()):
        dist_info = dist_infos.get(_owner_name(package))
        record = dist_info / "RECORD" if dist_info is not None else None
        if record is None or not record.is_file():
            continue
        try:
            owned = _listed(read_record_paths(record))
            rows = [f"{tree.name}/{k.relpath}" for k in group if k.path in owned]
            if rows:
                with locked_record(record) as locked:
                    locked.append(rows)
        except OSError as exc:  # a read-only RECORD: the devel RECORD still lists them
            logger.warning("cannot record the devel links into %s in %s: %s", package, record, exc)


def fingerprint(site: Path, packages: Iterable[str]) -> dict[str, list[object] | None]:
    """Each package's dist-info directory as (name, inode, mtime), None when not installed:
    an install, reinstall or uninstall changes it."""
    dist_infos = _owner_dist_infos(site)
    out: dict[str, list[object] | None] = {}
    for package in sorted(set(packages)):
        dist_info = dist_infos.get(_owner_name(package))
        try:
            st = os.stat(dist_info) if dist_info is not None else None
        except OSError:
            st = None
        out[package] = (
            None if st is None or dist_info is None else [dist_info.name, st.st_ino, st.st_mtime_ns]
        )
    return out


def read_state(tree: Path) -> dict[str, object] | None:
    try:
        doc = read_json(tree / STATE_NAME)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def is_current(site: Path, tree: Path) -> bool:
    """Whether the owning packages are as the last reconcile left them (the fast path)."""
    state = read_state(tree)
    if state is None:
        return False
    seen = state.get("packages")
    if not isinstance(seen, dict):
        return False
    return _as_json(fingerprint(site, seen)) == seen


def _as_json(value: object) -> object:
    """``value`` as JSON gives it back: tuples become lists (the state file holds lists)."""
    if isinstance(value, (list, tuple)):
        return [_as_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_json(v) for k, v in value.items()}
    return value


def write_state(site: Path, tree: Path, links: Iterable[ExternalLink]) -> None:
    """Remember the owning packages' dist-info directories (written aside, then renamed)."""
    doc = {"packages": fingerprint(site, (k.package for k in links))}
    tmp = tree / f"{STATE_NAME}.{os.getpid()}.tmp"
    _write_new(tmp, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, tree / STATE_NAME)
