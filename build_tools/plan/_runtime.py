"""The runtime packages of a build: artifacts selected, merged and laid out.

Core, profiler and libraries (one per family, or one arch-neutral package in kpack mode)
each take the artifacts their manifest entry selects, merged into one namespace and
re-layed out (§6); in kpack mode every device target's package owner (``kpack.owners``:
``gfx1250`` for ``gfx1250`` and ``gfx1250-strict``) gets a package overlaying the
libraries, which may not overwrite any of their files. The ELF facts the layout needs are
scanned on the way, once per input file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from kpack.errors import ArtifactError, PackagingError
from kpack.owners import owner_table
from kpack.targets import base_target

from ..artifacts import Artifact, Catalog, EntryKind
from ..manifests import PackageKind, PackageSpec
from ._globs import GlobSet
from ._layout import layout_device, layout_runtime
from ._model import PlanInputs, RuntimePackage, dist_name, platform_name, pure_name
from ._namespace import Namespace, merge

__all__ = ["device_targets", "plan_runtime", "selected_targets"]


def selected_targets(
    sel_targets: Sequence[str], family: str | None, isa: Sequence[str] = ()
) -> list[str]:
    """The artifact targets a selection's ``targets`` name for ``family``: ``generic``,
    the family's ISA targets ``isa``, or the family itself."""
    out = []
    for t in sel_targets:
        if t == "generic":
            out.append("generic")
        elif t == "isa":
            out.extend(isa)
        elif family is not None:
            out.append(family)
    return out


def _runtime_namespace(catalog: Catalog, spec: PackageSpec, family: str | None) -> Namespace:
    selected: list[Artifact] = []
    isa = list(owner_table().members(family, catalog.targets)) if family else []
    if spec.kind is PackageKind.DEVICE and len({base_target(t) for t in isa}) > 1:
        _check_shared_owner(catalog, spec, isa)
    for sel in spec.select:
        if sel.applies(catalog.kpack_split):
            targets = selected_targets(sel.targets, family, isa)
            selected.extend(catalog.select(sel.names, sel.components, targets))
    include = GlobSet.of(spec.include) if spec.include else None
    exclude = GlobSet.of(spec.exclude) if spec.exclude else None
    return merge(dict.fromkeys(selected), include=include, exclude=exclude)


def _check_shared_owner(catalog: Catalog, spec: PackageSpec, isa: Sequence[str]) -> None:
    """The targets of one owner (``gfx1250``, ``gfx1250-strict``) share its device wheel: a
    file that the artifacts of two of these processors ship is an error naming both
    (TheRock#8280). Feature variants (``gfx90a:xnack±``) merge as before."""
    seen: dict[str, Artifact] = {}
    problems: list[str] = []
    for sel in spec.select:
        if not sel.applies(catalog.kpack_split):
            continue
        for artifact in catalog.select(
            sel.names, sel.components, selected_targets(sel.targets, None, isa)
        ):
            for entry in artifact.entries:
                if entry.kind is EntryKind.DIR:
                    continue
                prior = seen.setdefault(entry.relpath, artifact)
                if base_target(prior.id.target) != base_target(artifact.id.target):
                    problems.append(
                        f"{entry.relpath}: {prior.id.dirname} and {artifact.id.dirname}"
                    )
    if problems:
        raise ArtifactError(
            f"the targets {', '.join(isa)} share one device package, but their artifacts ship "
            "the same files",
            path=catalog.root,
            problems=sorted(problems),
        )


def _runtime_package(
    inputs: PlanInputs, spec: PackageSpec, family: str | None, platform: str | None = None
) -> RuntimePackage:
    ns = _runtime_namespace(inputs.catalog, spec, family)
    inputs.scan_elf(ns)
    dist = dist_name(spec, family)
    layout = layout_device if spec.kind is PackageKind.DEVICE else layout_runtime
    return RuntimePackage(
        spec=spec,
        family=family,
        dist_name=dist,
        pure=pure_name(spec, family),
        platform=platform or platform_name(dist, inputs.options.nonce),
        namespace=ns,
        layout=layout(ns, inputs.elf),
    )


def _families(catalog: Catalog) -> tuple[str, ...]:
    return () if catalog.kpack_split else catalog.targets


def device_targets(catalog: Catalog) -> tuple[str, ...]:
    """The package owners of the ISA artifacts' targets on disk (kpack mode), sorted:
    ``gfx1250`` for ``P_gfx1250`` and ``P_gfx1250-strict`` alike."""
    table = owner_table()
    return tuple(sorted({table.owner(t) for t in catalog.targets}))


def _check_device_overlay(device: RuntimePackage, owners: dict[str, str]) -> None:
    """A device wheel may not own a path that the libraries or another device wheel owns."""
    for relpath, laid in sorted(device.layout.files.items()):
        owner = owners.get(relpath)
        if owner is not None:
            raise ArtifactError(
                f"device file {relpath} ({laid.origin}) of {device.dist_name} would overwrite "
                f"a file of {owner}"
            )
        owners[relpath] = device.dist_name


def _plan_devices(
    inputs: PlanInputs, spec: PackageSpec, libraries: RuntimePackage | None
) -> list[RuntimePackage]:
    if libraries is None:
        raise PackagingError("kpack-split mode: no rocm-sdk-libraries package to overlay")
    catalog, options = inputs.catalog, inputs.options
    owners = {r: libraries.dist_name for r in [*libraries.layout.files, *libraries.layout.aliases]}
    wanted = device_targets(catalog)
    if options.targets:
        shard = {owner_table().owner(t) for t in options.targets}
        unknown = sorted(shard - set(wanted))
        if unknown:
            raise ArtifactError(
                f"--targets names targets with no per-target artifacts: {', '.join(unknown)}"
                f" (found: {', '.join(wanted) or 'none'})",
                path=catalog.root,
            )
        wanted = tuple(t for t in wanted if t in shard)
    absent = device_targets(replace(catalog, artifacts=(), absent_targets=catalog.absent_targets))
    present = device_targets(replace(catalog, absent_targets=()))
    missing = sorted(t for t in wanted if t in absent and t not in present)
    if missing:
        raise ArtifactError(
            f"no per-target artifacts for {', '.join(missing)} in this shard's input "
            "(the shard plan lists them among its inputs)",
            path=catalog.root,
        )
    devices = []
    for target in wanted:
        device = _runtime_package(inputs, spec, target, platform=libraries.platform)
        _check_device_overlay(device, owners)
        devices.append(device)
    return devices


def plan_runtime(inputs: PlanInputs) -> tuple[list[RuntimePackage], list[str]]:
    """Lay out core, profiler, libraries (one per family, or one arch-neutral) and devices."""
    catalog = inputs.catalog
    notices: list[str] = []
    shared: list[RuntimePackage] = []
    per_family: list[RuntimePackage] = []
    specs = inputs.manifests.for_mode(catalog.kpack_split)
    for spec in specs.values():
        if spec.kind in (PackageKind.CORE, PackageKind.PROFILER) or (
            spec.kind is PackageKind.LIBRARIES and catalog.kpack_split
        ):
            pkg = _runtime_package(inputs, spec, None)
            if not pkg.layout.files and spec.kind is not PackageKind.LIBRARIES:
                if spec.required and inputs.options.only != "device":  # a device shard reads
                    raise PackagingError(f"refusing to build an empty {pkg.dist_name} package")
                notices.append(f"{pkg.dist_name}: no matching artifacts; not built")
                continue
            shared.append(pkg)
        elif spec.kind is PackageKind.LIBRARIES:
            for family in _families(catalog):
                pkg = _runtime_package(inputs, spec, family)
                if pkg.layout.files:
                    per_family.append(pkg)
                else:
                    notices.append(f"{pkg.dist_name}: no matching artifacts; not built")
    if catalog.kpack_split and "device" in specs and inputs.options.only != "common":
        libraries = next((p for p in shared if p.spec.kind is PackageKind.LIBRARIES), None)
        per_family += _plan_devices(inputs, specs["device"], libraries)
    return shared + per_family, notices
