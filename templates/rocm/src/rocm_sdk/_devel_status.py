"""Whether the devel tree is expanded and complete, read without changing anything.

The answer of :func:`rocm_sdk.devel_status` and ``rocm-sdk init --check``: a framework asks
it before deciding to call ``rocm-sdk init`` (or ``rocm_sdk`` APIs that expand). Nothing
is expanded, linked, locked or written here; every check is a ``stat`` or a read.

The tree is *expanded* once an expansion has completed (its ``__init__.py`` exists and
the tarball is gone, see :func:`rocm_sdk._devel.is_expanded`). It is *complete* when,
besides, every path the expansion recorded in the devel RECORD is still there, every link
into another package is made when that package is installed and gone when it is not (see
:mod:`rocm_sdk._external_links`), and every installed device package's files are linked
into it: what ``rocm-sdk init`` would change.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from . import _dist_info as di
from ._errors import RocmSdkError

__all__ = ["DevelState", "DevelStatus", "devel_status"]

#: ``expanded``: ready to use. ``not-expanded``: ``rocm-sdk init`` expands it.
#: ``incomplete``: expanded, but something ``rocm-sdk init`` makes (a link) is missing, or
#: files of the tree are gone (then only a reinstall brings them back).
#: ``not-installed``: rocm-sdk-devel is not installed.
DevelState = Literal["expanded", "not-expanded", "incomplete", "not-installed"]

INIT_COMMAND = "rocm-sdk init"
INSTALL_COMMAND = "pip install 'rocm[devel]'"
#: The most missing paths a status names (a damaged tree may miss thousands).
_SHOWN_MISSING = 3


@dataclass(frozen=True, kw_only=True)
class DevelStatus:
    """The state of the devel tree.

    ``root`` is where the tree is (or will be once expanded), None when rocm-sdk-devel is
    not installed. ``missing`` names a few recorded paths of the tree that are gone
    (relative to site-packages). ``reason`` is one line saying what is wrong (empty when
    ``ok``); ``fix`` the command that makes the tree complete (empty when ``ok``).
    """

    state: DevelState
    root: Path | None
    reason: str
    fix: str
    missing: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when the tree is expanded and complete (``rocm-sdk init`` has nothing to do)."""
        return self.state == "expanded"

    def describe(self) -> str:
        """One line: the state, and the command that fixes it unless ``ok``."""
        if self.ok:
            return f"the devel tree is expanded and complete at {self.root}"
        return f"{self.reason}; fix: {self.fix}"


def _reinstall_command() -> str:
    return f"pip install --force-reinstall --no-deps 'rocm-sdk-devel=={di.__version__}'"


def _missing_recorded(site: Path, dist_name: str, top: str, links: set[str]) -> list[str]:
    """Recorded paths of the tree that are gone, but the links into other packages
    (``links``: made and removed as their package comes and goes) and the links' state."""
    from ._external_links import STATE_NAME
    from ._layout import find_dist_info
    from ._record import read_record_paths

    dist_info = find_dist_info(site, dist_name)
    record = dist_info / "RECORD" if dist_info is not None else None
    if record is None or not record.is_file():
        return []
    prefix = f"{top}/"
    skipped = {f"{prefix}{relpath}" for relpath in links} | {f"{prefix}{STATE_NAME}"}
    return [
        row
        for row in read_record_paths(record)
        if row.startswith(prefix) and row not in skipped and not os.path.lexists(site / row)
    ]


def _unlinked_device_packages(site: Path, root: Path) -> list[str]:
    from ._device_links import discover_device_link_plans, unlinked_plans

    plans = discover_device_link_plans(site, di.__version__)
    return [plan.dist_name for plan in unlinked_plans(root, plans)]


def devel_status() -> DevelStatus:
    """The devel tree's state, without expanding, linking or writing anything."""
    # imported here: ``import rocm_sdk`` (every framework start) stays as light as it was
    from ._devel import is_expanded, locate_devel
    from ._external_links import read_manifest, stale_links

    try:
        layout = locate_devel()
    except ModuleNotFoundError:
        return DevelStatus(
            state="not-installed",
            root=None,
            fix=INSTALL_COMMAND,
            reason="rocm-sdk-devel is not installed",
        )
    root = layout.platform_dir
    if not is_expanded(layout):
        if layout.tarball() is None:
            return DevelStatus(
                state="incomplete",
                root=root,
                fix=_reinstall_command(),
                reason=f"the devel tree {root} is incomplete and its tarball is gone",
            )
        return DevelStatus(
            state="not-expanded",
            root=root,
            fix=INIT_COMMAND,
            reason=f"the devel tree is not expanded (it goes to {root})",
        )
    links = read_manifest(root)
    missing = _missing_recorded(
        layout.site, layout.dist_name, root.name, {k.relpath for k in links}
    )
    if missing:
        shown = ", ".join(missing[:_SHOWN_MISSING])
        more = f" and {len(missing) - _SHOWN_MISSING} more" if len(missing) > _SHOWN_MISSING else ""
        return DevelStatus(
            state="incomplete",
            root=root,
            fix=_reinstall_command(),
            missing=tuple(missing[:_SHOWN_MISSING]),
            reason=f"the devel tree {root} is expanded but {len(missing)} of its files are "
            f"gone ({shown}{more})",
        )
    stale = [k.relpath for k in stale_links(layout.site, root, links)]
    if stale:
        return DevelStatus(
            state="incomplete",
            root=root,
            fix=INIT_COMMAND,
            reason=f"the devel tree {root} is expanded but {len(stale)} of its links into "
            f"other packages are not up to date ({stale[0]}...)",
        )
    unlinked = _unlinked_device_packages(layout.site, root)
    if unlinked:
        return DevelStatus(
            state="incomplete",
            root=root,
            fix=INIT_COMMAND,
            reason=f"the devel tree {root} is expanded but the device files of "
            f"{', '.join(unlinked)} are not linked into it",
        )
    return DevelStatus(state="expanded", root=root, reason="", fix="")


def is_devel_expanded() -> bool:
    """True when rocm-sdk-devel is installed and its tree is expanded and complete: what a
    framework checks before using the devel tree without expanding it (see
    :func:`devel_status` for why not)."""
    try:
        return devel_status().ok
    except (RocmSdkError, OSError):
        return False
