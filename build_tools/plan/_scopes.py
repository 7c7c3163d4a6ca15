"""Turn laid-out runtime packages into complete package plans: the whole build.

A kpack build has one scope: the shared packages, a device wheel per target, one devel
package and one ``rocm`` sdist, rendered from a context of the whole tree so that every
``--targets`` shard renders them alike. A legacy build has one scope per family, each
with its own devel package and sdist. Everything here is a function of the plan's values.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kpack.elf import ElfInfo

from .artifacts import Catalog
from .kpack_split import KpackSplitPlan
from .manifests import Manifests, PackageKind
from .options import BuildOptions
from .package_plans import devel_plan, device_plan, meta_plan, runtime_plan
from .plan import BuildPlan, PackagePlan, RuntimePackage, device_targets, launcher_for, plan_runtime
from .template_context import TemplateContext, template_context

__all__ = ["TemplateContext", "plan_build"]


def _plan_kpack(
    catalog: Catalog,
    manifests: Manifests,
    options: BuildOptions,
    runtime: Sequence[RuntimePackage],
    elf: dict[Path, ElfInfo | None],
) -> list[PackagePlan]:
    launcher = launcher_for(runtime)
    shared = [p for p in runtime if p.spec.kind is not PackageKind.DEVICE]
    devices = [p for p in runtime if p.spec.kind is PackageKind.DEVICE]
    targets = device_targets(catalog)
    declared = [p.spec for p in shared]
    mode_specs = manifests.for_mode(True)
    if targets and "device" in mode_specs:
        declared.append(mode_specs["device"])
    declared += [s for s in mode_specs.values() if s.kind is PackageKind.DEVEL]
    ctx = template_context(
        options,
        manifests,
        shared,
        targets,
        targets[0] if targets else None,
        kpack=True,
        specs=declared,
    )
    plans = [runtime_plan(p, ctx, shared, launcher, "") for p in shared]
    plans += [device_plan(d, ctx, shared, launcher) for d in devices]
    devel = devel_plan(catalog, manifests, options, ctx, shared, None, "", elf)
    if devel is not None:
        plans.append(devel)
    plans.append(meta_plan(ctx, None, ""))
    return plans


def _plan_legacy(
    catalog: Catalog,
    manifests: Manifests,
    options: BuildOptions,
    runtime: Sequence[RuntimePackage],
    elf: dict[Path, ElfInfo | None],
) -> list[PackagePlan]:
    launcher = launcher_for(runtime)
    shared = [p for p in runtime if p.family is None]
    families = tuple(sorted({p.family for p in runtime if p.family is not None}))
    multi = len(families) > 1
    scopes: list[tuple[str | None, list[RuntimePackage]]] = (
        [(f, shared + [p for p in runtime if p.family == f]) for f in families]
        if families
        else [(None, shared)]
    )
    plans: list[PackagePlan] = []
    base_ctx = template_context(
        options, manifests, runtime, families, families[0] if families else None
    )
    for pkg in runtime:
        scope = shared + ([pkg] if pkg.family is not None else [])
        plans.append(runtime_plan(pkg, base_ctx, scope, launcher, ""))
    for family, scope in scopes:
        subdir = family if multi and family else ""
        ctx = template_context(options, manifests, scope, [family] if family else [], family)
        devel = devel_plan(catalog, manifests, options, ctx, scope, family, subdir, elf)
        if devel is not None:
            plans.append(devel)
        plans.append(meta_plan(ctx, family, subdir))
    return plans


def plan_build(
    catalog: Catalog,
    manifests: Manifests,
    options: BuildOptions,
    split: KpackSplitPlan | None = None,
) -> BuildPlan:
    """The whole build; ``split`` is the kpack split planned into ``catalog`` (if any),
    whose archives apply writes before the packages."""
    elf: dict[Path, ElfInfo | None] = {}
    runtime, notices = plan_runtime(catalog, manifests, options, elf)
    if catalog.kpack_split:
        plans = _plan_kpack(catalog, manifests, options, runtime, elf)
        families = device_targets(catalog)
    else:
        plans = _plan_legacy(catalog, manifests, options, runtime, elf)
        families = tuple(sorted({p.family for p in runtime if p.family is not None}))
    return BuildPlan(
        options, catalog, families, tuple(runtime), tuple(plans), tuple(notices), split
    )
