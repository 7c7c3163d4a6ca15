"""The variables the package templates see, gathered once per scope of a build.

A :class:`TemplateContext` holds what every template of one scope (one family, or the
whole kpack build) shares: version and nonce, the target families per platform, the
declared packages, the library registry and the console scripts that ship;
:meth:`TemplateContext.variables` adds what one package's templates need to know of
themselves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kpack.generic_targets import generic_table
from kpack.owners import owner_table
from kpack.targets import base_target

from ..manifests import ConsoleScript, PackageKind, PackageSpec
from ._model import PlanInputs, RuntimePackage
from ._registry import library_registry

__all__ = ["TemplateContext", "template_context"]

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


@dataclass(frozen=True, kw_only=True)
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
    package_owners: Mapping[str, str] = field(default_factory=dict)  # kpack.owners' table

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
            "package_owners": dict(self.package_owners),
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


def template_context(
    inputs: PlanInputs,
    runtime: Sequence[RuntimePackage],
    families: Sequence[str],
    *,
    specs: Sequence[PackageSpec] = (),
) -> TemplateContext:
    """Template variables of a scope whose packages are ``runtime`` and whose families are
    ``families`` (the first is its default). ``specs`` are the packages this build declares
    (default: the runtime packages plus devel); in kpack mode they come from the whole tree,
    not from a ``--targets`` shard, so generic outputs are identical for every shard."""
    options, manifests = inputs.options, inputs.manifests
    kpack = inputs.catalog.kpack_split
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
        default_target_family=families[0] if families else None,
        available_target_families=tuple(sorted(families)),
        linux_target_families=tuple(sorted(linux)),
        windows_target_families=tuple(sorted(windows)),
        packages=tuple(sorted([*entries, META], key=lambda e: str(e["logical_name"]))),
        libraries=tuple(library_registry(manifests, runtime, windows=options.windows)),
        scripts=tuple(scripts),
        generic_targets=table.members,
        package_owners=owner_table().owners,
    )


def _with_generics(targets: Sequence[str], families: Sequence[str]) -> list[str]:
    """``targets`` plus the generic target of each that this build has device code for:
    a platform's users need it (``gfx942`` -> ``gfx9-4-generic``)."""
    table = generic_table()
    generics = [table.generic_of(t) for t in targets]
    built = {base_target(f) for f in families}
    return list(dict.fromkeys([*targets, *(g for g in generics if g is not None and g in built)]))
