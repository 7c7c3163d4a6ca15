"""Load and validate ``manifests/packages.yaml`` and ``manifests/libraries.yaml``.

Package contents are data. This module turns the YAML into frozen specs and reports
every problem at once, each naming the file and the key (``packages.core.select[0].names``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kpack.common.yamlfile import read_yaml
from kpack.errors import ManifestError

from ._data import data_dir
from .artifacts import COMPONENTS, Component

__all__ = [
    "ConsoleScript",
    "LibraryEntry",
    "Manifests",
    "PackageKind",
    "PackageSpec",
    "RpathDep",
    "Selection",
    "load_manifests",
]

TargetSel = Literal["generic", "family", "isa"]
Mode = Literal["legacy", "kpack", "both"]
MODES: tuple[Mode, ...] = ("legacy", "kpack", "both")


class PackageKind(enum.Enum):
    CORE = "core"
    PROFILER = "profiler"
    LIBRARIES = "libraries"
    DEVICE = "device"
    DEVEL = "devel"


@dataclass(frozen=True, kw_only=True)
class Selection:
    """Which artifacts a package takes: by name, or every name a runtime package took."""

    names: tuple[str, ...]
    from_runtime_packages: bool
    except_names: tuple[str, ...]
    components: tuple[Component, ...]
    targets: tuple[TargetSel, ...]
    mode: Mode = "both"

    def applies(self, kpack_split: bool) -> bool:
        return self.mode == "both" or self.mode == ("kpack" if kpack_split else "legacy")


@dataclass(frozen=True)
class RpathDep:
    package: str
    subdir: str


@dataclass(frozen=True, kw_only=True)
class ConsoleScript:
    name: str
    package: str
    relpath: str
    probe: tuple[str, ...] | None
    expect: str | None
    expand_devel: bool

    @property
    def func(self) -> str:
        """A Python identifier for the trampoline (``amdclang++`` -> ``amdclang_pp``)."""
        text = self.name.replace("++", "_pp").replace("+", "_p")
        return "".join(c if c.isalnum() else "_" for c in text)


@dataclass(frozen=True, kw_only=True)
class PackageSpec:
    key: str  # its key in packages.yaml
    logical: str  # its logical name at run time (libraries, device, ...)
    kind: PackageKind
    mode: Mode
    dist: str
    pure: str | None
    summary: str
    required: bool
    required_on_linux: bool
    target_specific: bool
    select: tuple[Selection, ...]
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    rpath_deps: tuple[RpathDep, ...]
    console_scripts: tuple[ConsoleScript, ...]
    overlay: str | None = None  # logical package whose platform dir receives the files
    split_databases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def applies(self, kpack_split: bool) -> bool:
        return self.mode == "both" or self.mode == ("kpack" if kpack_split else "legacy")


@dataclass(frozen=True, kw_only=True)
class LibraryEntry:
    shortname: str
    package: str
    so_pattern: str
    dll_pattern: str | None
    posix_relpath: str
    optional: bool


@dataclass(frozen=True)
class Manifests:
    packages: Mapping[str, PackageSpec]  # by key in packages.yaml
    libraries: tuple[LibraryEntry, ...]

    def for_mode(self, kpack_split: bool) -> dict[str, PackageSpec]:
        """The packages of one build mode, by logical name."""
        return {s.logical: s for s in self.packages.values() if s.applies(kpack_split)}


class _Checker:
    """Collects problems while reading one YAML document."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.problems: list[str] = []

    def fail(self, key: str, message: str) -> None:
        self.problems.append(f"{key}: {message}")

    def mapping(
        self, value: Any, key: str, allowed: set[str], required: set[str]
    ) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(key, f"expected a mapping, got {type(value).__name__}")
            return {}
        for name in sorted(set(value) - allowed, key=str):
            self.fail(f"{key}.{name}", "unknown key")
        for name in sorted(required - set(value)):
            self.fail(f"{key}.{name}", "required key is missing")
        return value

    def string(self, value: Any, key: str, *, optional: bool = False) -> str | None:
        if value is None and optional:
            return None
        if not isinstance(value, str) or not value:
            self.fail(key, f"expected a non-empty string, got {value!r}")
            return None
        return value

    def boolean(self, value: Any, key: str, default: bool) -> bool:
        if value is None:
            return default
        if not isinstance(value, bool):
            self.fail(key, f"expected true or false, got {value!r}")
            return default
        return value

    def strings(self, value: Any, key: str, *, choices: tuple[str, ...] = ()) -> tuple[str, ...]:
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.fail(key, f"expected a list of strings, got {value!r}")
            return ()
        for v in value:
            if choices and v not in choices:
                self.fail(key, f"{v!r} is not one of {', '.join(choices)}")
        return tuple(value)


def _read_yaml(path: Path) -> Any:
    return read_yaml(path, error=ManifestError)


_PKG_KEYS = {
    "split_databases",
    "kind",
    "mode",
    "logical",
    "overlay",
    "dist",
    "pure",
    "summary",
    "required",
    "required_on_linux",
    "target_specific",
    "select",
    "include",
    "exclude",
    "rpath_deps",
    "console_scripts",
}
_SEL_KEYS = {"names", "from_runtime_packages", "except_names", "components", "targets", "mode"}
_SCRIPT_KEYS = {"name", "relpath", "probe", "expect", "expand_devel"}


def _selection(c: _Checker, raw: Any, key: str) -> Selection:
    m = c.mapping(raw, key, _SEL_KEYS, {"components", "targets"})
    from_runtime = c.boolean(m.get("from_runtime_packages"), f"{key}.from_runtime_packages", False)
    names = c.strings(m.get("names"), f"{key}.names")
    if not names and not from_runtime:
        c.fail(key, "needs 'names' or 'from_runtime_packages: true'")
    comps = c.strings(m.get("components"), f"{key}.components", choices=COMPONENTS)
    targets = c.strings(m.get("targets"), f"{key}.targets", choices=("generic", "family", "isa"))
    return Selection(
        names=names,
        from_runtime_packages=from_runtime,
        except_names=c.strings(m.get("except_names"), f"{key}.except_names"),
        components=comps,  # type: ignore[arg-type]
        targets=targets,  # type: ignore[arg-type]
        mode=_mode(c, m.get("mode"), f"{key}.mode"),
    )


def _mode(c: _Checker, value: Any, key: str) -> Mode:
    if value is None:
        return "both"
    if value not in MODES:
        c.fail(key, f"{value!r} is not one of {', '.join(MODES)}")
        return "both"
    return value  # type: ignore[no-any-return]


def _console_script(c: _Checker, raw: Any, key: str, package: str) -> ConsoleScript:
    m = c.mapping(raw, key, _SCRIPT_KEYS, {"name", "relpath"})
    probe = m.get("probe")
    return ConsoleScript(
        name=c.string(m.get("name"), f"{key}.name") or "",
        package=package,
        relpath=c.string(m.get("relpath"), f"{key}.relpath") or "",
        probe=None if probe is None else c.strings(probe, f"{key}.probe"),
        expect=c.string(m.get("expect"), f"{key}.expect", optional=True),
        expand_devel=c.boolean(m.get("expand_devel"), f"{key}.expand_devel", True),
    )


def _package(c: _Checker, name: str, raw: Any) -> PackageSpec | None:
    key = f"packages.{name}"
    m = c.mapping(raw, key, _PKG_KEYS, {"kind", "dist", "summary", "select"})
    kind_text = m.get("kind")
    try:
        kind = PackageKind(kind_text)
    except ValueError:
        c.fail(f"{key}.kind", f"{kind_text!r} is not one of {[k.value for k in PackageKind]}")
        return None
    selects = m.get("select")
    if not isinstance(selects, list) or not selects:
        c.fail(f"{key}.select", "expected a non-empty list")
        selects = []
    deps = []
    for i, dep in enumerate(m.get("rpath_deps") or []):
        d = c.mapping(dep, f"{key}.rpath_deps[{i}]", {"package", "subdir"}, {"package", "subdir"})
        deps.append(RpathDep(str(d.get("package")), str(d.get("subdir"))))
    scripts = m.get("console_scripts") or []
    logical = c.string(m.get("logical", name), f"{key}.logical") or name
    split_raw = m.get("split_databases") or {}
    if not isinstance(split_raw, dict):
        c.fail(f"{key}.split_databases", "expected a mapping of artifact name -> handlers")
        split_raw = {}
    split = {
        str(k): c.strings(v, f"{key}.split_databases.{k}") for k, v in sorted(split_raw.items())
    }
    return PackageSpec(
        split_databases=split,
        key=name,
        logical=logical,
        kind=kind,
        mode=_mode(c, m.get("mode"), f"{key}.mode"),
        overlay=c.string(m.get("overlay"), f"{key}.overlay", optional=True),
        dist=c.string(m.get("dist"), f"{key}.dist") or "",
        pure=c.string(m.get("pure"), f"{key}.pure", optional=True),
        summary=c.string(m.get("summary"), f"{key}.summary") or "",
        required=c.boolean(m.get("required"), f"{key}.required", False),
        required_on_linux=c.boolean(m.get("required_on_linux"), f"{key}.required_on_linux", False),
        target_specific=c.boolean(m.get("target_specific"), f"{key}.target_specific", False),
        select=tuple(_selection(c, s, f"{key}.select[{i}]") for i, s in enumerate(selects)),
        include=c.strings(m.get("include"), f"{key}.include"),
        exclude=c.strings(m.get("exclude"), f"{key}.exclude"),
        rpath_deps=tuple(deps),
        console_scripts=tuple(
            _console_script(c, s, f"{key}.console_scripts[{i}]", logical)
            for i, s in enumerate(scripts if isinstance(scripts, list) else [])
        ),
    )


def _check_references(c: _Checker, packages: Mapping[str, PackageSpec]) -> None:
    logical = {s.logical for s in packages.values()}
    for spec in packages.values():
        for i, dep in enumerate(spec.rpath_deps):
            if dep.package not in logical:
                c.fail(f"packages.{spec.key}.rpath_deps[{i}].package", f"unknown {dep.package!r}")
        if spec.overlay is not None and spec.overlay not in logical:
            c.fail(f"packages.{spec.key}.overlay", f"unknown {spec.overlay!r}")
        if spec.target_specific != ("{target_family}" in spec.dist):
            c.fail(f"packages.{spec.key}.dist", "'{target_family}' iff target_specific")
    for kpack_split in (False, True):
        names = [s.logical for s in packages.values() if s.applies(kpack_split)]
        for dup in sorted({n for n in names if names.count(n) > 1}):
            mode = "kpack" if kpack_split else "legacy"
            c.fail("packages", f"logical name {dup!r} is used twice in {mode} mode")
    names = [s.name for p in packages.values() for s in p.console_scripts]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        c.fail("console_scripts", f"{dup!r} is declared twice")


def _libraries(
    c: _Checker, doc: Any, packages: Mapping[str, PackageSpec]
) -> tuple[LibraryEntry, ...]:
    root = c.mapping(doc, "<top>", {"libraries"}, {"libraries"})
    raw = root.get("libraries")
    if not isinstance(raw, list):
        c.fail("libraries", "expected a list")
        return ()
    out: list[LibraryEntry] = []
    allowed = {"shortname", "package", "so_pattern", "dll_pattern", "posix_relpath", "optional"}
    for i, item in enumerate(raw):
        key = f"libraries[{i}]"
        m = c.mapping(item, key, allowed, {"shortname", "package", "so_pattern"})
        package = c.string(m.get("package"), f"{key}.package") or ""
        if package and package not in {s.logical for s in packages.values()}:
            c.fail(f"{key}.package", f"unknown package {package!r}")
        out.append(
            LibraryEntry(
                shortname=c.string(m.get("shortname"), f"{key}.shortname") or "",
                package=package,
                so_pattern=c.string(m.get("so_pattern"), f"{key}.so_pattern") or "",
                dll_pattern=c.string(m.get("dll_pattern"), f"{key}.dll_pattern", optional=True),
                posix_relpath=c.string(m.get("posix_relpath") or "lib", f"{key}.posix_relpath")
                or "lib",
                optional=c.boolean(m.get("optional"), f"{key}.optional", False),
            )
        )
    shortnames = [e.shortname for e in out]
    for dup in sorted({n for n in shortnames if shortnames.count(n) > 1}):
        c.fail("libraries", f"shortname {dup!r} is declared twice")
    return tuple(out)


def load_manifests(directory: Path | None = None) -> Manifests:
    """Load both manifests from ``directory`` (default: the shipped ``manifests/``)."""
    directory = directory or data_dir("manifests")
    pkg_path = directory / "packages.yaml"
    c = _Checker(pkg_path)
    doc = c.mapping(_read_yaml(pkg_path), "<top>", {"packages"}, {"packages"})
    raw_packages = c.mapping(doc.get("packages"), "packages", set(doc.get("packages") or {}), set())
    packages: dict[str, PackageSpec] = {}
    for logical, raw in raw_packages.items():
        spec = _package(c, str(logical), raw)
        if spec is not None:
            packages[spec.key] = spec
    _check_references(c, packages)
    if c.problems:
        raise ManifestError("invalid package manifest", path=pkg_path, problems=c.problems)
    lib_path = directory / "libraries.yaml"
    c = _Checker(lib_path)
    libraries = _libraries(c, _read_yaml(lib_path), packages)
    if c.problems:
        raise ManifestError("invalid library manifest", path=lib_path, problems=c.problems)
    return Manifests(packages=packages, libraries=libraries)
