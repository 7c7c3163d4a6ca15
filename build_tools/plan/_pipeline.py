"""Plan a build, top to bottom, from its scanned tree: nothing is written.

(kpack-split mode) plan the split of fat artifacts, check archive references and targets →
plan every package → check member names, required packages and Windows names → (legacy
mode) check the GPU families. The result is the :class:`BuildPlan` that ``--dry-run``
prints and :func:`build_tools.build.apply_plan` writes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from kpack.errors import UsageError

from ..artifacts import Catalog
from ..kpack_split import KpackSplitPlan, check_archive_references, plan_fat_splits
from ..manifests import Manifests, load_manifests
from ..options import BuildOptions
from ..targets import FamilyTable
from ._checks import (
    check_member_names,
    check_no_symlinks,
    check_required_packages,
    check_targets_present,
    check_windows_names,
)
from ._families import check_families_in_tree, check_legacy_families
from ._model import BuildPlan, DistKind
from ._scopes import plan_build

__all__ = ["plan_packages"]

Say = Callable[[str], None]

log = logging.getLogger(__name__)


def plan_packages(
    catalog: Catalog, options: BuildOptions, table: FamilyTable, *, say: Say, notice: Say
) -> BuildPlan:
    """Split-plan and plan the scanned ``catalog``; every check runs before anything is
    written. ``say`` reports each phase, ``notice`` each notice of the split."""
    manifests = load_manifests()
    if options.targets and not catalog.kpack_split:
        raise UsageError("--targets applies to kpack-split trees only", path=catalog.manifest_path)
    if (options.only != "all" or options.tree_targets) and not catalog.kpack_split:
        raise UsageError(
            "--only and --tree-targets apply to kpack-split trees only",
            path=catalog.manifest_path,
        )
    if options.windows:
        check_no_symlinks(catalog)
    split = None
    if catalog.kpack_split:
        catalog, split = _plan_split(catalog, manifests, options, say)
        for line in split.notices:
            notice(line)
    say("planning")
    plan = plan_build(catalog, manifests, options, split)
    plan = _shard_share(plan)
    check_member_names(plan.packages, windows=options.windows)
    if catalog.kpack_split and options.only != "device":
        check_required_packages(catalog, options, plan.packages)
    if options.windows:
        check_windows_names(plan.packages)
    if not catalog.kpack_split:  # kpack-split mode checked its targets in _plan_split
        check_families_in_tree(
            options.linux_families, options.windows_families, plan.families, catalog.root
        )
        check_legacy_families(plan, catalog, table)
    return plan


def _shard_share(plan: BuildPlan) -> BuildPlan:
    """A shard of a ``--print-shards`` plan writes its share: ``--only common`` every
    package but the device wheels, ``--only device`` the device wheels alone (the shared
    packages are still planned: device files' RPATHs and overlay checks read them)."""
    only = plan.options.only
    if only == "all":
        return plan
    keep = [p for p in plan.packages if (p.kind is DistKind.DEVICE) == (only == "device")]
    return replace(plan, packages=tuple(keep))


def _plan_split(
    catalog: Catalog, manifests: Manifests, options: BuildOptions, say: Say
) -> tuple[Catalog, KpackSplitPlan]:
    """Plan the split of fat artifacts (nothing is written), then check archive references
    and targets."""
    device = manifests.for_mode(True)["device"]
    names = [n for sel in device.select for n in sel.names]
    catalog, split = plan_fat_splits(
        catalog, names, device.split_databases, families=options.families, jobs=options.jobs
    )
    if split.splits:
        fat = sum(len(s.transformed) for s in split.splits)
        say(
            f"planned the split of {len(split.splits)} fat artifacts ({fat} binaries, "
            f"{len(split.archives)} archives)"
        )
    if catalog.absent_targets:  # their archives are not read here: the one-machine build
        log.info("archive references not checked: this shard reads no per-target artifacts")
    else:
        check_archive_references(catalog, names)
    check_targets_present(catalog, options)
    return catalog, split
