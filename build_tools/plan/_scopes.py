"""Turn laid-out runtime packages into complete package plans: the whole build.

A kpack build has one scope: the shared packages, a device wheel per target, one devel
package and one ``rocm`` sdist, rendered from a context of the whole tree so that every
``--targets`` shard renders them alike. A legacy build has one scope per family, each
with its own devel package and sdist. Everything here is a function of the plan's values.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..artifacts import Catalog
from ..kpack_split import KpackSplitPlan
from ..manifests import Manifests, PackageKind
from ..options import BuildOptions
from ._context import template_context
from ._model import BuildPlan, PlanInputs, PlannedPackage, RuntimePackage
from ._packages import devel_plan, device_plan, meta_plan, runtime_plan
from ._payload import launcher_for
from ._runtime import device_targets, plan_runtime

__all__ = ["plan_build"]


def _plan_kpack(inputs: PlanInputs, runtime: Sequence[RuntimePackage]) -> list[PlannedPackage]:
    launcher = launcher_for(runtime)
    shared = [p for p in runtime if p.spec.kind is not PackageKind.DEVICE]
    devices = [p for p in runtime if p.spec.kind is PackageKind.DEVICE]
    targets = device_targets(inputs.catalog)
    declared = [p.spec for p in shared]
    mode_specs = inputs.manifests.for_mode(True)
    if targets and "device" in mode_specs:
        declared.append(mode_specs["device"])
    declared += [s for s in mode_specs.values() if s.kind is PackageKind.DEVEL]
    ctx = template_context(inputs, shared, targets, specs=declared)
    plans = [runtime_plan(p, ctx, shared, launcher, "") for p in shared]
    plans += [device_plan(d, ctx, shared, launcher) for d in devices]
    devel = devel_plan(inputs, ctx, shared, None, "")
    if devel is not None:
        plans.append(devel)
    plans.append(meta_plan(ctx, None, ""))
    return plans


def _plan_legacy(inputs: PlanInputs, runtime: Sequence[RuntimePackage]) -> list[PlannedPackage]:
    launcher = launcher_for(runtime)
    shared = [p for p in runtime if p.family is None]
    families = tuple(sorted({p.family for p in runtime if p.family is not None}))
    multi = len(families) > 1
    scopes: list[tuple[str | None, list[RuntimePackage]]] = (
        [(f, shared + [p for p in runtime if p.family == f]) for f in families]
        if families
        else [(None, shared)]
    )
    plans: list[PlannedPackage] = []
    base_ctx = template_context(inputs, runtime, families)
    for pkg in runtime:
        scope = shared + ([pkg] if pkg.family is not None else [])
        plans.append(runtime_plan(pkg, base_ctx, scope, launcher, ""))
    for family, scope in scopes:
        subdir = family if multi and family else ""
        ctx = template_context(inputs, scope, [family] if family else [])
        devel = devel_plan(inputs, ctx, scope, family, subdir)
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
    inputs = PlanInputs(catalog=catalog, manifests=manifests, options=options)
    runtime, notices = plan_runtime(inputs)
    if catalog.kpack_split:
        plans = _plan_kpack(inputs, runtime)
        families = device_targets(catalog)
    else:
        plans = _plan_legacy(inputs, runtime)
        families = tuple(sorted({p.family for p in runtime if p.family is not None}))
    return BuildPlan(
        options=options,
        catalog=catalog,
        families=families,
        runtime=tuple(runtime),
        packages=tuple(plans),
        notices=tuple(notices),
        split=split,
    )
