"""Mirror per-ISA device files into the expanded devel tree.

Each ``rocm-sdk-device-<gfx>`` wheel overlays the libraries platform package and
ships ``.devel_links/<gfx>.json``: ``{"version": ..., "links": [{"relpath",
"target"}, ...]}``, where ``relpath`` is relative to the devel tree and
``target`` climbs from there to the device file. Each file is reached from the devel
tree through a relative symlink to ``target`` (one file identity, also once a container
layer would have turned a hard link into a copy; Windows, where symlinks need privileges,
gets hard links) and recorded in the device wheel's RECORD, so uninstalling that wheel
removes the links too. The reconcile runs on every ``get_devel_root()``;
when every link is in place it takes a lock-free fast path.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import posixpath
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ._jsonfile import read_json
from ._layout import dist_info_dirs, dist_info_name, read_metadata_headers, without_post_release
from ._record import exclusive_lock, read_record_paths, rewrite_record_deduplicated

logger = logging.getLogger(__name__)

RECONCILE_LOCK_NAME = ".devel_reconcile.lock"
DEVICE_DIST_PREFIX = "rocm_sdk_device"


@dataclass(frozen=True)
class DeviceLink:
    relpath: str
    target: str


@dataclass(frozen=True)
class DeviceLinkPlan:
    dist_name: str
    record: Path
    links: tuple[DeviceLink, ...]


def _valid_link(entry: object) -> DeviceLink | None:
    if not isinstance(entry, dict):
        return None
    relpath, target = entry.get("relpath"), entry.get("target")
    if not isinstance(relpath, str) or not isinstance(target, str) or not relpath:
        return None
    rel = PurePosixPath(relpath)
    if rel.is_absolute() or ".." in rel.parts or "\\" in relpath:
        return None
    if posixpath.isabs(target) or "\\" in target:
        return None
    return DeviceLink(relpath=rel.as_posix(), target=target)


def _read_manifest(path: Path) -> list[DeviceLink]:
    try:
        data = read_json(path)
    except (OSError, ValueError) as exc:
        logger.warning("ignoring unreadable device link manifest %s: %s", path, exc)
        return []
    entries = data.get("links", []) if isinstance(data, dict) else []
    if not isinstance(entries, list):
        logger.warning("ignoring device link manifest %s: its links are not a list", path)
        return []
    links = [_valid_link(e) for e in entries]
    if None in links:
        logger.warning("ignoring invalid entries of device link manifest %s", path)
    return [link for link in links if link is not None]


def _plan_for(site: Path, dist_info: Path, version: str) -> DeviceLinkPlan | None:
    headers = read_metadata_headers(dist_info)
    name, dist_version = headers.get("Name", dist_info.name), headers.get("Version", "")
    if without_post_release(dist_version) != without_post_release(version):
        logger.warning("skipping %s %s: it does not match rocm %s", name, dist_version, version)
        return None
    record = dist_info / "RECORD"
    if not record.is_file():
        return None
    links: list[DeviceLink] = []
    for row in read_record_paths(record):
        row_path = PurePosixPath(row)
        if row_path.parent.name == ".devel_links" and row_path.suffix == ".json":
            links.extend(_read_manifest(site / row_path))
    return DeviceLinkPlan(name, record, tuple(links)) if links else None


def discover_device_link_plans(site: Path, version: str) -> list[DeviceLinkPlan]:
    """Plans of every installed device wheel in ``site`` whose version matches."""
    importlib.invalidate_caches()
    plans: list[DeviceLinkPlan] = []
    for dist_info in dist_info_dirs(site):
        if dist_info_name(dist_info).startswith(DEVICE_DIST_PREFIX):
            plan = _plan_for(site, dist_info, version)
            if plan is not None:
                plans.append(plan)
    return plans


def link_source(devel_root: Path, link: DeviceLink) -> Path:
    parent = posixpath.dirname(link.relpath)
    return Path(os.path.normpath(devel_root / parent / link.target))


def _symlinks() -> bool:
    return os.name != "nt"


def _is_linked(devel_root: Path, link: DeviceLink) -> bool:
    dest = devel_root / link.relpath
    try:
        source = link_source(devel_root, link)
        if _symlinks():
            return dest.is_symlink() and os.readlink(dest) == link.target and source.is_file()
        return not dest.is_symlink() and dest.is_file() and dest.samefile(source)
    except OSError:
        return False


def _record_name(devel_root: Path, link: DeviceLink) -> str:
    return f"{devel_root.name}/{link.relpath}"


def _record_lists_once(plan: DeviceLinkPlan, devel_root: Path) -> bool:
    rows = read_record_paths(plan.record)
    if len(rows) != len(set(rows)):
        return False
    present = set(rows)
    return all(_record_name(devel_root, link) in present for link in plan.links)


def _source_allowed(site: Path, devel_root: Path, source: Path) -> bool:
    real = os.path.realpath(source)
    real_site = os.path.realpath(site)
    real_devel = os.path.realpath(devel_root)
    in_site = real.startswith(real_site + os.sep)
    return in_site and not (real == real_devel or real.startswith(real_devel + os.sep))


def _link_one(site: Path, devel_root: Path, link: DeviceLink) -> bool:
    source = link_source(devel_root, link)
    if not _source_allowed(site, devel_root, source) or not source.is_file():
        logger.warning("device file %s for %s is missing or outside site-packages",
                       source, link.relpath)
        return False
    dest = devel_root / link.relpath
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f"{dest.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):  # a leftover of a crashed run
        os.unlink(tmp)
    if _symlinks():
        os.symlink(link.target, tmp)
        if os.path.realpath(tmp) != os.path.realpath(source):  # a linked dir on the way
            os.unlink(tmp)
            logger.warning("device file %s: %s does not resolve to it", source, link.relpath)
            return False
    else:
        os.link(source, tmp)
    os.replace(tmp, dest)
    return True


def unlinked_plans(devel_root: Path, plans: list[DeviceLinkPlan]) -> list[DeviceLinkPlan]:
    """The plans some of whose links are not in place in ``devel_root``; reads only."""
    return [plan for plan in plans if not all(_is_linked(devel_root, k) for k in plan.links)]


def reconcile_device_links(
    site: Path, devel_root: Path, version: str, plans: list[DeviceLinkPlan] | None = None
) -> int:
    """Link every installed device wheel's files into ``devel_root`` (relative symlinks;
    hard links on Windows).

    ``plans`` defaults to :func:`discover_device_link_plans` (a caller reads them first to
    fail on a damaged device package before changing anything). Returns the number of
    links created. Idempotent; safe to run concurrently.
    """
    if plans is None:
        plans = discover_device_link_plans(site, version)
    if all(
        _record_lists_once(plan, devel_root) and all(_is_linked(devel_root, k) for k in plan.links)
        for plan in plans
    ):
        return 0
    created = 0
    with exclusive_lock(devel_root / RECONCILE_LOCK_NAME):
        for plan in plans:
            names: list[str] = []
            for link in plan.links:
                if _is_linked(devel_root, link):
                    names.append(_record_name(devel_root, link))
                elif _link_one(site, devel_root, link):
                    names.append(_record_name(devel_root, link))
                    created += 1
            rewrite_record_deduplicated(plan.record, names)
    return created
