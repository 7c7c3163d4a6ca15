"""The builder's pipeline, top to bottom: what ``build-python-packages`` does, without its
command line.

scan the artifact tree → (kpack-split mode) plan the split of fat artifacts, check archive
references and targets → plan every package → check member names, required packages and
Windows names → apply: write every package (:func:`build_tools.build.apply_plan`, the only
writer). Everything before apply is a value; ``--dry-run`` stops there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from build_tools.artifacts import Catalog, scan_artifacts
from build_tools.assemble import plan_build
from build_tools.guards import (
    check_member_names,
    check_no_symlinks,
    check_required_packages,
    check_targets_present,
    check_windows_names,
)
from build_tools.kpack_split import KpackSplitPlan, check_archive_references, plan_fat_splits
from build_tools.manifests import Manifests, load_manifests
from build_tools.options import BuildOptions
from build_tools.plan import BuildPlan
from kpack.errors import UsageError

__all__ = ["Planned", "plan_packages"]

Say = Callable[[str], None]


@dataclass(frozen=True)
class Planned:
    """Every package planned and checked, nothing written."""

    catalog: Catalog
    split: KpackSplitPlan | None  # the fat artifacts' split (kpack-split mode)
    plan: BuildPlan


def plan_packages(options: BuildOptions, *, say: Say, notice: Say) -> Planned:
    """Scan, split-plan and plan; every guard runs before anything is written. ``say``
    reports each phase, ``notice`` each notice of the scan."""
    say(f"scanning {options.artifact_dir}")
    catalog = scan_artifacts(options.artifact_dir)
    for line in catalog.notices:
        notice(line)
    mode = "kpack-split" if catalog.kpack_split else "legacy"
    say(f"{len(catalog.artifacts)} artifacts, {mode} mode")
    manifests = load_manifests()
    if options.targets and not catalog.kpack_split:
        raise UsageError("--targets applies to kpack-split trees only", path=catalog.manifest_path)
    if options.windows:
        check_no_symlinks(catalog)
    split = None
    if catalog.kpack_split:
        catalog, split = _plan_split(catalog, manifests, options, say)
        for line in split.notices:
            notice(line)
    say("planning")
    plan = plan_build(catalog, manifests, options, split)
    check_member_names(plan.packages, windows=options.windows)
    if catalog.kpack_split:
        check_required_packages(catalog, options, plan.packages)
    if options.windows:
        check_windows_names(plan.packages)
    return Planned(catalog, split, plan)


def _plan_split(
    catalog: Catalog, manifests: Manifests, options: BuildOptions, say: Say
) -> tuple[Catalog, KpackSplitPlan]:
    """Plan the split of fat artifacts (nothing is written), then check archive references
    and targets."""
    device = manifests.for_mode(True)["device"]
    names = [n for sel in device.select for n in sel.names]
    catalog, split = plan_fat_splits(
        catalog, names, device.split_databases, families=options.families
    )
    if split.splits:
        fat = sum(len(s.transformed) for s in split.splits)
        say(
            f"planned the split of {len(split.splits)} fat artifacts ({fat} binaries, "
            f"{len(split.archives)} archives): "
            + ", ".join(s.artifact.id.dirname for s in split.splits)
        )
    check_archive_references(catalog, names)
    check_targets_present(catalog, options)
    return catalog, split
