"""Expansion of the rocm-sdk-devel package after installation.

The devel wheel ships its tree as ``rocm_sdk_devel/_devel.tar[.xz]``, because a
wheel cannot hold symlinks. On first use the tarball is expanded next to the
other platform packages as ``_rocm_sdk_devel<nonce>/``, every created path is
appended to the devel RECORD, and the tarball is deleted last.

Uninstalling leaves nothing: the devel RECORD also lists the tree's directory itself (and
its staging sibling), which pip and uv remove whole, whatever it holds then (links made
later, device links, bytecode, dangling links: pip skips a RECORD path that does not exist,
and a symlink whose target went first does not). Each link into another package is recorded
by that package too, so it goes with its target (:mod:`rocm_sdk._external_links`).

Bounded: the tarball may expand to 100 times its size (at least 256 MiB, at most
64 GiB) unless ``ROCM_SDK_MAX_DEVEL_SIZE`` sets another number of bytes; a bigger one is refused
before the member that crosses the limit is written, and nothing is left of it.

Crash safety: the tree is expanded into a staging sibling and renamed into
place, and the tarball is deleted after the rename. A tree counts as complete
only when its ``__init__.py`` exists and the tarball is gone, so an interrupted
expansion is always redone from scratch. Concurrent callers serialise on an
exclusive lock of the devel RECORD and re-check completeness once they hold it.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from . import _dist_info as di
from ._device_links import (
    RECONCILE_LOCK_NAME,
    discover_device_link_plans,
    reconcile_device_links,
)
from ._errors import DevelError
from ._external_links import STATE_NAME, is_current, read_manifest, reconcile, record_owners
from ._external_links import write_state as write_links_state
from ._layout import find_dist_info, package_dir
from ._limits import MAX_DEVEL_SIZE_ENV, ExpansionLimit
from ._record import LockedRecord, locked_record
from ._tar_expand import extract_tree

TARBALL_NAMES = ("_devel.tar.xz", "_devel.tar")


@dataclass(frozen=True)
class DevelLayout:
    """Where the installed devel package and its expanded tree live."""

    site: Path
    pure_dir: Path
    platform_dir: Path
    dist_name: str

    @property
    def staging_dir(self) -> Path:
        return self.site / f".{self.platform_dir.name}.partial"

    def tarball(self) -> Path | None:
        for name in TARBALL_NAMES:
            path = self.pure_dir / name
            if path.is_file():
                return path
        return None


def locate_devel() -> DevelLayout:
    """The devel layout; ModuleNotFoundError if rocm-sdk-devel is not installed."""
    entry = di.ALL_PACKAGES.get("devel")
    pure_name = entry.pure_package_name() if entry is not None else None
    pure_dir = package_dir(pure_name) if pure_name else None
    if entry is None or pure_dir is None:
        raise ModuleNotFoundError(
            "the ROCm devel package is not installed; install it with: pip install 'rocm[devel]'"
        )
    return DevelLayout(
        site=pure_dir.parent,
        pure_dir=pure_dir,
        platform_dir=pure_dir.parent / entry.platform_package_name(),
        dist_name=entry.dist_name(),
    )


def is_expanded(layout: DevelLayout) -> bool:
    """True once an expansion has completed (its last step deletes the tarball)."""
    return (layout.platform_dir / "__init__.py").is_file() and layout.tarball() is None


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def expansion_limit(tarball: Path) -> ExpansionLimit:
    """The limit ``ROCM_SDK_MAX_DEVEL_SIZE`` sets, else the default for ``tarball``'s size."""
    raw = os.environ.get(MAX_DEVEL_SIZE_ENV, "").strip()
    if not raw:
        return ExpansionLimit.default(tarball.stat().st_size)
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value <= 0:
        raise DevelError(
            f"{MAX_DEVEL_SIZE_ENV}={di.shown_value(raw)} is not a number of bytes "
            "(a whole number above 0, such as 68719476736 for 64 GiB)"
        )
    return ExpansionLimit(value, f"set by {MAX_DEVEL_SIZE_ENV}")


def _expand_locked(layout: DevelLayout, record: LockedRecord) -> None:
    tarball = layout.tarball()
    if tarball is None:
        raise DevelError(
            f"{layout.platform_dir} is incomplete and {layout.pure_dir} has no _devel.tar "
            "or _devel.tar.xz; reinstall rocm-sdk-devel"
        )
    limit = expansion_limit(tarball)
    staging = layout.staging_dir
    top = layout.platform_dir.name
    _remove(staging)
    _remove(layout.platform_dir)
    end = record.end()
    try:
        # the directories as a whole, before anything is in them: uninstalling removes them
        record.append([top, staging.name])
        created = extract_tree(tarball, top, staging, layout.site, limit)
        if "__init__.py" not in created:
            raise DevelError(f"{tarball} has no {top}/__init__.py")
        (staging / RECONCILE_LOCK_NAME).touch()
        created.append(RECONCILE_LOCK_NAME)
        record.append(f"{top}/{rel}" for rel in created)
        os.rename(staging, layout.platform_dir)
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)
        record.truncate(end)  # a failed expansion leaves the RECORD as it was
        if isinstance(exc, OSError):  # a full disk, say: one line naming the file
            where = exc.filename if exc.filename is not None else staging
            raise DevelError(
                f"cannot expand {tarball}: {where}: {exc.strerror or exc}"
            ) from exc
        raise
    tarball.unlink()


def expand(layout: DevelLayout) -> bool:
    """Expand the devel tarball unless done; True if this call expanded it."""
    dist_info = find_dist_info(layout.site, layout.dist_name)
    record = dist_info / "RECORD" if dist_info is not None else None
    if record is None or not record.is_file():
        raise DevelError(
            f"{layout.dist_name} has no RECORD in {layout.site}: it was not installed by a "
            "Python package installer, so it cannot be expanded. Install 'rocm[devel]' "
            "into a virtual environment."
        )
    with locked_record(record) as locked:
        if is_expanded(layout):
            return False
        _expand_locked(layout, locked)
        return True


def _devel_record(layout: DevelLayout) -> Path | None:
    dist_info = find_dist_info(layout.site, layout.dist_name)
    record = dist_info / "RECORD" if dist_info is not None else None
    return record if record is not None and record.is_file() else None


def _reconcile_external(layout: DevelLayout, *, force: bool) -> None:
    """Links into other packages: made once their package is there (``rocm[profiler]``
    installed later, a package reinstalled) and recorded in the devel RECORD and that
    package's; removed once their target has gone. Skipped while the packages are as the
    last run saw them, unless ``force``."""
    tree, site = layout.platform_dir, layout.site
    record = _devel_record(layout)
    if record is None or (not force and is_current(site, tree)):
        return
    with locked_record(record) as locked:
        links = read_manifest(tree)
        made = reconcile(site, tree, links)
        locked.append(f"{tree.name}/{link.relpath}" for link in made)
        record_owners(site, tree, links)
        locked.append([f"{tree.name}/{STATE_NAME}"])
        write_links_state(site, tree, links)


def get_devel_root(*, verify: bool = False) -> Path:
    """The expanded devel tree, expanding it and reconciling its links first (every link
    into another package checked when ``verify``, else when a package changed)."""
    layout = locate_devel()
    # the device packages are read first: a damaged one fails before anything is changed
    plans = discover_device_link_plans(layout.site, di.__version__)
    expanded = not is_expanded(layout) and expand(layout)
    _reconcile_external(layout, force=verify or expanded)
    reconcile_device_links(layout.site, layout.platform_dir, di.__version__, plans)
    return layout.platform_dir
