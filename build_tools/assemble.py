"""Turn laid-out runtime packages into complete package plans.

Adds the rendered pure package (``rocm_sdk_core/`` …, with ``_dist_info.py``), the
platform package's ``__init__.py``, entry points, the devel tarball's members and the
``rocm`` selector sdist. Everything here is a function of the plan's values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kpack.elf import ElfInfo
from kpack.generic_targets import generic_table
from kpack.targets import base_target

from .artifacts import Catalog
from .kpack_split import KpackSplitPlan
from .manifests import ConsoleScript, Manifests, PackageKind, PackageSpec
from .options import BuildOptions
from .payload import PayloadFile, TarEntry, TarKind
from .plan import (
    BuildPlan,
    PackagePlan,
    PlanKind,
    RuntimePackage,
    devel_members,
    devel_namespace,
    device_targets,
    dist_name,
    launcher_for,
    library_registry,
    needs_elf_scan,
    plan_runtime,
    platform_name,
    pure_name,
    runtime_payload,
)
from .render import render_file, render_tree

__all__ = ["plan_build"]

META = {
    "logical_name": "meta",
    "dist_template": "rocm",
    "pure_template": "rocm_sdk",
    "required": True,
    "target_specific": False,
}


def _package_entry(spec: PackageSpec) -> dict[str, Any]:
    return {
        "logical_name": spec.logical,
        "dist_template": spec.dist,
        "pure_template": spec.pure,
        "required": spec.required,
        "target_specific": spec.target_specific,
    }


def _built_scripts(runtime: Sequence[RuntimePackage], *, windows: bool) -> list[ConsoleScript]:
    """The console scripts whose executable ships: ``<relpath>``, or ``<relpath>.exe`` in a
    Windows package set (the trampoline adds the suffix on Windows, as TheRock's does)."""
    suffix = ".exe" if windows else ""
    scripts = [
        s
        for pkg in runtime
        for s in pkg.spec.console_scripts
        if s.relpath + suffix in pkg.layout.files
    ]
    return sorted(dict.fromkeys(scripts), key=lambda s: s.name)


@dataclass(frozen=True)
class TemplateContext:
    """The variables shared by every template of one scope (one family, or all); the
    names are the templates' (``templates/README.md``)."""

    version: str
    nonce: str
    kpack_mode: bool
    default_target_family: str | None
    available_target_families: tuple[str, ...]
    linux_target_families: tuple[str, ...]
    windows_target_families: tuple[str, ...]
    packages: tuple[Mapping[str, Any], ...]
    libraries: tuple[Mapping[str, object], ...]
    scripts: tuple[ConsoleScript, ...]
    generic_targets: Mapping[str, tuple[str, ...]]
    libraries_py_package_name: str | None = None

    def variables(self, entry: str, family: str | None) -> dict[str, Any]:
        """The variables of one package's templates (``entry``: its logical name)."""
        return {
            "version": self.version,
            "nonce": self.nonce,
            "kpack_mode": self.kpack_mode,
            "default_target_family": self.default_target_family,
            "available_target_families": list(self.available_target_families),
            "linux_target_families": list(self.linux_target_families),
            "windows_target_families": list(self.windows_target_families),
            "libraries_py_package_name": self.libraries_py_package_name,
            "generic_targets": {g: list(m) for g, m in self.generic_targets.items()},
            "packages": [dict(p) for p in self.packages],
            "libraries": [dict(lib) for lib in self.libraries],
            "console_scripts": [
                {
                    "name": s.name,
                    "package": s.package,
                    "relpath": s.relpath,
                    "func": s.func,
                    "probe_args": list(s.probe) if s.probe is not None else None,
                    "expect": s.expect,
                    "expand_devel": s.expand_devel,
                }
                for s in self.scripts
            ],
            "this_package_entry": entry,
            "this_target_family": family,
        }


def _context(
    options: BuildOptions,
    manifests: Manifests,
    runtime: Sequence[RuntimePackage],
    families: Sequence[str],
    default_family: str | None,
    *,
    kpack: bool = False,
    specs: Sequence[PackageSpec] = (),
) -> TemplateContext:
    """Template variables. ``specs`` are the packages this build declares (default: the
    runtime packages plus devel); in kpack mode they come from the whole tree, not from a
    ``--targets`` shard, so generic outputs are identical for every shard."""
    if not specs:
        devel = [s for s in manifests.for_mode(kpack).values() if s.kind is PackageKind.DEVEL]
        specs = [*{p.spec.logical: p.spec for p in runtime}.values(), *devel]
    entries = [_package_entry(s) for s in specs]
    scripts = _built_scripts(runtime, windows=options.windows)
    table = generic_table()
    if kpack:
        linux = _with_generics(list(options.linux_targets) or list(families), families)
        windows = _with_generics(list(options.windows_targets), families)
    else:
        linux = [f for f in options.linux_families if f in families] or list(families)
        windows = [f for f in options.windows_families if f in families]
    return TemplateContext(
        version=options.version,
        nonce=options.nonce,
        kpack_mode=kpack,
        default_target_family=default_family,
        available_target_families=tuple(sorted(families)),
        linux_target_families=tuple(sorted(linux)),
        windows_target_families=tuple(sorted(windows)),
        packages=tuple(sorted([*entries, META], key=lambda e: str(e["logical_name"]))),
        libraries=tuple(library_registry(manifests, runtime, windows=options.windows)),
        scripts=tuple(scripts),
        generic_targets=table.members,
    )


def _with_generics(targets: Sequence[str], families: Sequence[str]) -> list[str]:
    """``targets`` plus the generic target of each that this build has device code for:
    a platform's users need it (``gfx942`` -> ``gfx9-4-generic``)."""
    table = generic_table()
    generics = [table.generic_of(t) for t in targets]
    built = {base_target(f) for f in families}
    return list(dict.fromkeys([*targets, *(g for g in generics if g is not None and g in built)]))


def _metadata(ctx: TemplateContext, name: str, summary: str, requires: Sequence[str] = ()) -> bytes:
    """METADATA of a wheel."""
    return render_file(
        "metadata/METADATA.j2",
        {
            "name": name,
            "version": ctx.version,
            "summary": summary,
            "description": summary + ".\n",
            "requires_dist": list(requires),
            "provides_extra": [],
            "dynamic": [],
        },
    )


def _pure_files(
    ctx: TemplateContext, template: str, pure: str, entry: str, family: str | None
) -> list[PayloadFile]:
    variables = ctx.variables(entry, family)
    files = [
        PayloadFile.literal(f"{pure}/{rel}", data, executable=exe)
        for rel, (data, exe) in render_tree(template, variables).items()
    ]
    dist_info = render_file("common/_dist_info.py.j2", variables)
    files.append(PayloadFile.literal(f"{pure}/_dist_info.py", dist_info))
    return files


def _platform_init(platform: str) -> list[PayloadFile]:
    return [
        PayloadFile.literal(f"{platform}/{rel}", data, executable=exe)
        for rel, (data, exe) in render_tree("platform", {}).items()
    ]


def _runtime_plan(
    pkg: RuntimePackage,
    ctx: TemplateContext,
    search: Sequence[RuntimePackage],
    launcher: Any,
    subdir: str,
) -> PackagePlan:
    payload = runtime_payload(pkg, search, launcher)
    payload += _platform_init(pkg.platform)
    if pkg.pure is not None:
        payload += _pure_files(ctx, pkg.spec.kind.value, pkg.pure, pkg.spec.logical, pkg.family)
    scripts = tuple(
        (s.name, f"{pkg.pure}._cli:{s.func}") for s in ctx.scripts if s.package == pkg.spec.logical
    )
    return PackagePlan(
        logical=pkg.spec.logical,
        kind=PlanKind.of(pkg.spec.kind),
        dist_name=pkg.dist_name,
        family=pkg.family,
        subdir=subdir,
        payload=tuple(payload),
        entry_points=scripts,
        summary=pkg.spec.summary,
        metadata=_metadata(ctx, pkg.dist_name, pkg.spec.summary),
    )


def _devel_plan(
    catalog: Catalog,
    manifests: Manifests,
    options: BuildOptions,
    ctx: TemplateContext,
    scope: Sequence[RuntimePackage],
    family: str | None,
    subdir: str,
    elf: dict[Path, ElfInfo | None],
) -> PackagePlan | None:
    spec = next((s for s in manifests.packages.values() if s.kind is PackageKind.DEVEL), None)
    if spec is None:
        return None
    ns = devel_namespace(catalog, spec, family, scope)
    elf.update(
        catalog.facts.scan(
            (e.source for e in ns if needs_elf_scan(e) and e.source not in elf), jobs=options.jobs
        )
    )
    dist = dist_name(spec, family)
    platform = platform_name(dist, options.nonce)
    members = devel_members(ns, scope, platform, elf)
    for init in _platform_init(platform):
        members.append(TarEntry(TarKind.FILE, file=init))
    pure = pure_name(spec, family) or "rocm_sdk_devel"
    suffix = ".tar.xz" if options.devel_tarball_compression else ".tar"
    payload = _pure_files(ctx, "devel", pure, spec.logical, family)
    return PackagePlan(
        logical=spec.logical,
        kind=PlanKind.DEVEL,
        dist_name=dist,
        family=family,
        subdir=subdir,
        payload=tuple(payload),
        devel_tar=tuple(sorted(members, key=lambda m: m.arcname)),
        devel_tar_name=f"{pure}/_devel{suffix}",
        summary=spec.summary,
        metadata=_metadata(ctx, dist, spec.summary),
    )


def _meta_plan(ctx: TemplateContext, family: str | None, subdir: str) -> PackagePlan:
    variables = ctx.variables("meta", family)
    files = [
        PayloadFile.literal(rel, data, executable=exe)
        for rel, (data, exe) in render_tree("rocm", variables).items()
    ]
    files.append(
        PayloadFile.literal(
            "src/rocm_sdk/_dist_info.py", render_file("common/_dist_info.py.j2", variables)
        )
    )
    summary = "ROCm SDK: installs the ROCm packages for this machine's GPU"
    pkg_info = render_file(
        "metadata/PKG-INFO.j2",
        {
            "name": "rocm",
            "version": ctx.version,
            "summary": summary,
            "description": summary + ".\n",
            "requires_dist": [f"rocm-sdk-core=={ctx.version}"],
            "provides_extra": [],
            "dynamic": ["Requires-Dist", "Provides-Extra"],
        },
    )
    return PackagePlan(
        logical="meta",
        kind=PlanKind.SELECTOR,
        dist_name="rocm",
        family=family,
        subdir=subdir,
        payload=tuple(files),
        summary=summary,
        metadata=pkg_info,
    )


def _device_plan(
    pkg: RuntimePackage, ctx: TemplateContext, search: Sequence[RuntimePackage], launcher: Any
) -> PackagePlan:
    """A device wheel: files overlaying the libraries platform package, no __init__.py,
    plus ``.devel_links/<T>.json`` for the devel tree (§10)."""
    version = str(ctx.version)
    payload = runtime_payload(pkg, [pkg, *search], launcher)
    links = [
        {"relpath": rel, "target": "../" * len(rel.split("/")) + f"{pkg.platform}/{rel}"}
        for rel in sorted(pkg.layout.files)
    ]
    text = json.dumps({"version": version, "links": links}, indent=2, sort_keys=True) + "\n"
    payload.append(
        PayloadFile.literal(f"{pkg.platform}/.devel_links/{pkg.family}.json", text.encode())
    )
    requires = [f"rocm-sdk-libraries=={version}"]
    return PackagePlan(
        logical=pkg.spec.logical,
        kind=PlanKind.DEVICE,
        dist_name=pkg.dist_name,
        family=pkg.family,
        subdir="",
        payload=tuple(payload),
        summary=f"{pkg.spec.summary} ({pkg.family})",
        metadata=_metadata(ctx, pkg.dist_name, f"{pkg.spec.summary} ({pkg.family})", requires),
    )


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
    ctx = _context(
        options,
        manifests,
        shared,
        targets,
        targets[0] if targets else None,
        kpack=True,
        specs=declared,
    )
    plans = [_runtime_plan(p, ctx, shared, launcher, "") for p in shared]
    plans += [_device_plan(d, ctx, shared, launcher) for d in devices]
    devel = _devel_plan(catalog, manifests, options, ctx, shared, None, "", elf)
    if devel is not None:
        plans.append(devel)
    plans.append(_meta_plan(ctx, None, ""))
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
    base_ctx = _context(options, manifests, runtime, families, families[0] if families else None)
    for pkg in runtime:
        scope = shared + ([pkg] if pkg.family is not None else [])
        plans.append(_runtime_plan(pkg, base_ctx, scope, launcher, ""))
    for family, scope in scopes:
        subdir = family if multi and family else ""
        ctx = _context(options, manifests, scope, [family] if family else [], family)
        devel = _devel_plan(catalog, manifests, options, ctx, scope, family, subdir, elf)
        if devel is not None:
            plans.append(devel)
        plans.append(_meta_plan(ctx, family, subdir))
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
