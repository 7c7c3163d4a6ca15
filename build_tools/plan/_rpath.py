"""Derive each ELF file's final RPATH (``packages.md`` §7, one edit per file).

Entries are ``$ORIGIN``-relative paths between platform packages, which all sit side by
side in site-packages. The result keeps the original entries first, then the entries
declared in the manifest (``rpath_deps``, only when that directory exists in the build),
then whatever is still needed so that every ``DT_NEEDED`` library that a package of the
set provides resolves to the installed copy.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["PackageFiles", "derive_rpath", "origin_entry"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PackageFiles:
    """What one platform package ships: its name and relpaths, indexed by file name."""

    platform: str
    relpaths: frozenset[str]
    by_name: Mapping[str, str]  # file name -> relpath (the first in sorted order)

    @classmethod
    def of(cls, platform: str, relpaths: Sequence[str]) -> PackageFiles:
        by_name: dict[str, str] = {}
        for relpath in sorted(relpaths):
            by_name.setdefault(posixpath.basename(relpath), relpath)
        return cls(platform, frozenset(relpaths), by_name)

    def has_dir(self, subdir: str) -> bool:
        prefix = subdir.rstrip("/") + "/"
        return any(r.startswith(prefix) for r in self.relpaths)


def origin_entry(from_dir: str, to_dir: str) -> str:
    """``$ORIGIN``-relative entry from one site-packages-relative directory to another."""
    rel = posixpath.relpath(to_dir, from_dir)
    return "$ORIGIN" if rel == "." else f"$ORIGIN/{rel}"


def _expand(entry: str, file_dir: str) -> str | None:
    """Site-packages-relative directory an entry denotes, or None if not $ORIGIN-based."""
    for token in ("$ORIGIN", "${ORIGIN}"):
        if entry == token or entry.startswith(token + "/"):
            return posixpath.normpath(file_dir + entry[len(token) :])
    return None


def derive_rpath(
    *,
    relpath: str,
    own: PackageFiles,
    original: Sequence[str],
    needed: Sequence[str],
    declared: Sequence[tuple[PackageFiles, str]],
    search: Sequence[PackageFiles],
) -> tuple[str, ...]:
    """Final RPATH entries for the file at ``own.platform/relpath``.

    ``declared`` holds (dependency package, subdir) pairs from the manifest; ``search``
    is every package that may provide a needed library, own package first.
    """
    file_dir = posixpath.dirname(f"{own.platform}/{relpath}")
    entries: list[str] = []
    covered: set[str] = set()

    def add(entry: str) -> None:
        target = _expand(entry, file_dir)
        if entry in entries or (target is not None and target in covered):
            return
        entries.append(entry)
        if target is not None:
            covered.add(target)

    for entry in original:
        if entry:
            add(entry)
    for dep, subdir in declared:
        if dep.has_dir(subdir):
            add(origin_entry(file_dir, f"{dep.platform}/{subdir}"))
    for name in needed:
        for package in search:
            provided = package.by_name.get(name)
            if provided is None:
                continue
            provider_dir = posixpath.dirname(f"{package.platform}/{provided}")
            if provider_dir not in covered:
                log.debug("%s/%s: adding RPATH for %s", own.platform, relpath, name)
            add(origin_entry(file_dir, provider_dir))
            break
    return tuple(entries)
