"""One complete package plan per kind: runtime, device, devel and the ``rocm`` sdist.

Each adds to what a runtime package ships the files rendered from the templates: the
pure package (``rocm_sdk_core/`` …, with ``_dist_info.py``), the platform package's
``__init__.py``, METADATA (or PKG-INFO), entry points, a device wheel's
``.devel_links/<T>.json`` and the devel tarball's members.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from kpack.generic_targets import generic_table

from ..launcher import LauncherTemplate
from ..manifests import PackageKind
from ..payload import PayloadFile, TarEntry, TarKind
from ..render import render_file, render_tree
from ._context import TemplateContext
from ._devel import devel_members, devel_namespace
from ._egg_info import default_requirements, egg_info_files
from ._model import (
    DistKind,
    PlanInputs,
    PlannedPackage,
    RuntimePackage,
    dist_name,
    platform_name,
    pure_name,
)
from ._payload import runtime_payload

__all__ = ["devel_plan", "device_plan", "meta_plan", "runtime_plan"]


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


def runtime_plan(
    pkg: RuntimePackage,
    ctx: TemplateContext,
    search: Sequence[RuntimePackage],
    launcher: LauncherTemplate | None,
    subdir: str,
) -> PlannedPackage:
    payload = runtime_payload(pkg, search, launcher)
    payload += _platform_init(pkg.platform)
    if pkg.pure is not None:
        payload += _pure_files(ctx, pkg.spec.kind.value, pkg.pure, pkg.spec.logical, pkg.family)
    scripts = tuple(
        (s.name, f"{pkg.pure}._cli:{s.func}") for s in ctx.scripts if s.package == pkg.spec.logical
    )
    return PlannedPackage(
        logical=pkg.spec.logical,
        kind=DistKind.of(pkg.spec.kind),
        dist_name=pkg.dist_name,
        family=pkg.family,
        subdir=subdir,
        payload=tuple(payload),
        entry_points=scripts,
        summary=pkg.spec.summary,
        metadata=_metadata(ctx, pkg.dist_name, pkg.spec.summary),
    )


def devel_plan(
    inputs: PlanInputs,
    ctx: TemplateContext,
    scope: Sequence[RuntimePackage],
    family: str | None,
    subdir: str,
) -> PlannedPackage | None:
    packages = inputs.manifests.packages.values()
    spec = next((s for s in packages if s.kind is PackageKind.DEVEL), None)
    if spec is None:
        return None
    options = inputs.options
    ns = devel_namespace(inputs.catalog, spec, family, scope)
    inputs.scan_elf(ns)
    dist = dist_name(spec, family)
    platform = platform_name(dist, options.nonce)
    members = devel_members(ns, scope, platform, inputs.elf)
    for init in _platform_init(platform):
        members.append(TarEntry(TarKind.FILE, file=init))
    pure = pure_name(spec, family) or "rocm_sdk_devel"
    suffix = ".tar.xz" if options.devel_tarball_compression else ".tar"
    payload = _pure_files(ctx, "devel", pure, spec.logical, family)
    return PlannedPackage(
        logical=spec.logical,
        kind=DistKind.DEVEL,
        dist_name=dist,
        family=family,
        subdir=subdir,
        payload=tuple(payload),
        devel_tar=tuple(sorted(members, key=lambda m: m.arcname)),
        devel_tar_name=f"{pure}/_devel{suffix}",
        summary=spec.summary,
        metadata=_metadata(ctx, dist, spec.summary),
    )


def meta_plan(ctx: TemplateContext, family: str | None, subdir: str) -> PlannedPackage:
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
    reqs = default_requirements(ctx)
    provides_extra, requires_dist = reqs.metadata_fields()
    pkg_info = render_file(
        "metadata/PKG-INFO.j2",
        {
            "name": "rocm",
            "version": ctx.version,
            "summary": summary,
            "description": summary + ".\n",
            "requires_dist": requires_dist,
            "provides_extra": provides_extra,
            "dynamic": ["Requires-Dist", "Provides-Extra"],
        },
    )
    egg_info = egg_info_files(pkg_info, reqs, [f.arcname for f in files])
    files += [PayloadFile.literal(name, data) for name, data in egg_info.items()]
    return PlannedPackage(
        logical="meta",
        kind=DistKind.SELECTOR,
        dist_name="rocm",
        family=family,
        subdir=subdir,
        payload=tuple(files),
        summary=summary,
        metadata=pkg_info,
    )


def _owner_keys(target: str | None, ctx: TemplateContext) -> list[str]:
    """The other device wheels of this set that hold ``target``'s code: its LLVM generic
    target's, when the set has one (``gfx1100`` -> ``gfx11-generic``). A device wheel
    requires them at its own version, so installing it alone is complete (rocm-systems#10685)."""
    if target is None:
        return []
    generic = generic_table().generic_of(target)
    return [generic] if generic in ctx.available_target_families else []


def device_plan(
    pkg: RuntimePackage,
    ctx: TemplateContext,
    search: Sequence[RuntimePackage],
    launcher: LauncherTemplate | None,
) -> PlannedPackage:
    """A device wheel: files overlaying the libraries platform package, no __init__.py,
    plus ``.devel_links/<T>.json`` for the devel tree (§10). It requires the libraries and
    the device wheels of its :func:`_owner_keys`."""
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
    requires += [f"{dist_name(pkg.spec, key)}=={version}" for key in _owner_keys(pkg.family, ctx)]
    return PlannedPackage(
        logical=pkg.spec.logical,
        kind=DistKind.DEVICE,
        dist_name=pkg.dist_name,
        family=pkg.family,
        subdir="",
        payload=tuple(payload),
        summary=f"{pkg.spec.summary} ({pkg.family})",
        metadata=_metadata(ctx, pkg.dist_name, f"{pkg.spec.summary} ({pkg.family})", requires),
    )
