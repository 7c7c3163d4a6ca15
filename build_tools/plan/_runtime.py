"""Plan a whole build: which packages, which files, which edits — nothing is written.

Stages: select artifacts per package -> merge into a namespace -> re-layout (§6) ->
derive RPATHs and plan ELF edits (§7) -> devel members (§8) -> rendered files. The
result is a frozen :class:`BuildPlan` that ``--dry-run`` prints and ``apply`` writes.
"""

from __future__ import annotations

import enum
import fnmatch
import logging
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kpack.artifact.planned import PlannedArchive, PlannedContent, TransformedBinary
from kpack.elf import ElfEdit, ElfInfo, FileKind, check_rpath_edit, plan_rpath_edit
from kpack.errors import ArtifactError, ManifestError, PackagingError
from kpack.targets import base_target
from kpack.transform import PeTransformPlan

from ..artifacts import Artifact, Catalog, Entry, EntryKind
from ..globs import GlobSet
from ..kpack_split import KpackSplitPlan
from ..launcher import LauncherTemplate, compile_launcher
from ..layout import RuntimeLayout, layout_device, layout_runtime
from ..manifests import Manifests, PackageKind, PackageSpec
from ..namespace import Namespace, merge
from ..options import BuildOptions
from ..payload import PayloadFile, TarEntry, TarKind
from ..rpath import PackageFiles, derive_rpath

__all__ = [
    "BuildPlan",
    "PackagePlan",
    "PlanKind",
    "RuntimePackage",
    "devel_members",
    "devel_namespace",
    "device_targets",
    "dist_name",
    "launcher_for",
    "library_registry",
    "plan_runtime",
    "platform_name",
    "pure_name",
    "runtime_payload",
]

log = logging.getLogger(__name__)

_EDITABLE = (FileKind.EXECUTABLE, FileKind.SHARED_LIBRARY)


@dataclass(frozen=True)
class RuntimePackage:
    """A runtime package after re-layout: names, namespace and what ships."""

    spec: PackageSpec
    family: str | None
    dist_name: str
    pure: str | None
    platform: str
    namespace: Namespace
    layout: RuntimeLayout

    @property
    def files(self) -> PackageFiles:
        return PackageFiles.of(self.platform, list(self.layout.files))


class PlanKind(enum.Enum):
    """What a planned package is: a manifest package kind, or the ``rocm`` selector sdist."""

    CORE = "core"
    PROFILER = "profiler"
    LIBRARIES = "libraries"
    DEVICE = "device"
    DEVEL = "devel"
    SELECTOR = "meta"

    @classmethod
    def of(cls, kind: PackageKind) -> PlanKind:
        return cls(kind.value)


@dataclass(frozen=True)
class PackagePlan:
    """One wheel (or the sdist) to write."""

    logical: str
    kind: PlanKind
    dist_name: str
    family: str | None
    subdir: str  # '' or the family, for multi-family legacy dist/ layout
    payload: tuple[PayloadFile, ...]
    entry_points: tuple[tuple[str, str], ...] = ()  # (script name, module:func)
    devel_tar: tuple[TarEntry, ...] = ()
    devel_tar_name: str = ""  # arcname of the tarball inside the wheel
    summary: str = ""
    metadata: bytes = b""  # METADATA for wheels, PKG-INFO for the sdist
    notes: tuple[str, ...] = field(default=())

    @property
    def file_count(self) -> int:
        return len(self.payload) + len(self.devel_tar)

    @property
    def input_bytes(self) -> int:
        tar = sum(e.file.size for e in self.devel_tar if e.file is not None)
        return sum(p.size for p in self.payload) + tar


@dataclass(frozen=True)
class BuildPlan:
    options: BuildOptions
    catalog: Catalog
    families: tuple[str, ...]
    runtime: tuple[RuntimePackage, ...]
    packages: tuple[PackagePlan, ...]
    notices: tuple[str, ...]
    split: KpackSplitPlan | None = None  # written by apply before the packages


# ---------------------------------------------------------------- naming


def dist_name(spec: PackageSpec, family: str | None) -> str:
    return spec.dist.format(target_family=(family or "").split(":", 1)[0])


def pure_name(spec: PackageSpec, family: str | None) -> str | None:
    if spec.pure is None:
        return None
    return spec.pure.format(target_family=(family or "").split(":", 1)[0])


def platform_name(dist: str, nonce: str) -> str:
    return "_" + dist.replace("-", "_") + nonce


# ---------------------------------------------------------------- selection


def _targets(sel_targets: Sequence[str], family: str | None, isa: Sequence[str] = ()) -> list[str]:
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
    isa = [t for t in catalog.targets if base_target(t) == family] if family else []
    for sel in spec.select:
        if sel.applies(catalog.kpack_split):
            targets = _targets(sel.targets, family, isa)
            selected.extend(catalog.select(sel.names, sel.components, targets))
    include = GlobSet.of(spec.include) if spec.include else None
    exclude = GlobSet.of(spec.exclude) if spec.exclude else None
    return merge(dict.fromkeys(selected), include=include, exclude=exclude)


def _runtime_package(
    catalog: Catalog,
    spec: PackageSpec,
    family: str | None,
    options: BuildOptions,
    elf: dict[Path, ElfInfo | None],
    platform: str | None = None,
) -> RuntimePackage:
    ns = _runtime_namespace(catalog, spec, family)
    elf.update(
        catalog.facts.scan(
            (e.source for e in ns if needs_elf_scan(e) and e.source not in elf),
            jobs=options.jobs,
        )
    )
    dist = dist_name(spec, family)
    device = spec.kind is PackageKind.DEVICE
    return RuntimePackage(
        spec=spec,
        family=family,
        dist_name=dist,
        pure=pure_name(spec, family),
        platform=platform or platform_name(dist, options.nonce),
        namespace=ns,
        layout=layout_device(ns, elf) if device else layout_runtime(ns, elf),
    )


# ---------------------------------------------------------------- ELF edits


def _plan_elf(
    arcname: str, source: Path | ElfEdit, rpath: tuple[str, ...], executable: bool
) -> PayloadFile:
    edit = plan_rpath_edit(source, rpath)
    if edit is None:
        return _unedited(arcname, source, executable)
    for warning in check_rpath_edit(edit, rpath):
        log.info("%s (RPATH edit for %s): %s", source, arcname, warning)
    return PayloadFile.edited(arcname, edit, executable=executable)


def _unedited(
    arcname: str, source: Path | ElfEdit | PeTransformPlan, executable: bool
) -> PayloadFile:
    if isinstance(source, Path):
        return PayloadFile.copy(arcname, source, executable=executable)
    return PayloadFile.edited(arcname, source, executable=executable)


def _content(source: Path, planned: PlannedContent | None) -> Path | ElfEdit | PeTransformPlan:
    """What ships for a file: the input, or the planned transform of it."""
    if isinstance(planned, TransformedBinary):
        return planned.content
    return source


def needs_elf_scan(entry: Entry) -> bool:
    """A regular file whose ELF facts the plan needs (a planned archive is no ELF file;
    a planned transform keeps its input's dynamic section, so the input is scanned)."""
    return entry.kind is EntryKind.FILE and not isinstance(entry.planned, PlannedArchive)


def _original_rpath(info: ElfInfo) -> tuple[str, ...]:
    return info.rpath if info.rpath is not None else (info.runpath or ())


def runtime_payload(
    pkg: RuntimePackage,
    search: Sequence[RuntimePackage],
    launcher: LauncherTemplate | None,
) -> list[PayloadFile]:
    own = pkg.files
    by_logical = {p.spec.logical: p for p in search}
    declared = [
        (by_logical[d.package].files, d.subdir)
        for d in pkg.spec.rpath_deps
        if d.package in by_logical
    ]
    search_files = [own] + [p.files for p in search if p is not pkg]
    out: list[PayloadFile] = []
    for relpath, laid in sorted(pkg.layout.files.items()):
        arcname = f"{pkg.platform}/{relpath}"
        if laid.launcher_target is not None:
            if launcher is None:
                raise PackagingError("launcher stub template missing", path=laid.origin)
            data = launcher.render(laid.launcher_target, origin=laid.origin)
            out.append(PayloadFile.literal(arcname, data, executable=True))
            continue
        if laid.source is None:
            raise PackagingError("planned file has no source", path=laid.origin)
        if isinstance(laid.planned, PlannedArchive):
            out.append(
                PayloadFile.planned_archive(
                    arcname, laid.planned.key, size=laid.planned.original_bytes
                )
            )
            continue
        content = _content(laid.source, laid.planned)
        if laid.elf is not None and laid.elf.kind in _EDITABLE:
            rpath = derive_rpath(
                relpath=relpath,
                own=own,
                original=_original_rpath(laid.elf),
                needed=laid.elf.needed,
                declared=declared,
                search=search_files,
            )
            if isinstance(content, PeTransformPlan):
                raise PackagingError("a PE transform cannot take an RPATH edit", path=arcname)
            out.append(_plan_elf(arcname, content, rpath, laid.executable))
        else:
            out.append(_unedited(arcname, content, laid.executable))
    return out


def launcher_for(packages: Sequence[RuntimePackage]) -> LauncherTemplate | None:
    for pkg in packages:
        for laid in pkg.layout.files.values():
            if laid.launcher_target is not None:
                return compile_launcher(needed_by=laid.origin)
    return None


# ---------------------------------------------------------------- devel


def devel_namespace(
    catalog: Catalog, spec: PackageSpec, family: str | None, runtime: Sequence[RuntimePackage]
) -> Namespace:
    populated = {e.artifact.name for p in runtime for e in p.namespace if e.artifact is not None}
    selected: list[Artifact] = []
    for sel in spec.select:
        if not sel.applies(catalog.kpack_split):
            continue
        names = set(sel.names)
        if sel.from_runtime_packages:
            names |= populated
        names -= set(sel.except_names)
        selected.extend(catalog.select(names, sel.components, _targets(sel.targets, family)))
    return merge(dict.fromkeys(selected))


def devel_members(
    ns: Namespace,
    runtime: Sequence[RuntimePackage],
    platform: str,
    elf: Mapping[Path, ElfInfo | None],
) -> list[TarEntry]:
    aliases: dict[str, str] = {}
    owner: dict[str, str] = {}
    for pkg in runtime:
        for relpath, soname in pkg.layout.aliases.items():
            aliases.setdefault(relpath, soname)
        for relpath in pkg.layout.files:
            owner.setdefault(relpath, pkg.platform)
    relpaths = sorted(set(ns.entries) | set(owner))
    devel_files = PackageFiles.of(platform, relpaths)
    members: list[TarEntry] = []
    for relpath in relpaths:
        arcname = f"{platform}/{relpath}"
        entry = ns.get(relpath)
        if entry is not None and entry.kind is EntryKind.DIR:
            members.append(TarEntry(TarKind.DIR, arcname_=arcname))
        elif relpath in aliases:
            members.append(TarEntry(TarKind.SYMLINK, arcname_=arcname, link=aliases[relpath]))
        elif relpath in owner:
            up = "../" * len(relpath.split("/"))
            link = f"{up}{owner[relpath]}/{relpath}"
            members.append(TarEntry(TarKind.SYMLINK, arcname_=arcname, link=link))
        elif entry is not None and entry.kind is EntryKind.SYMLINK:
            members.append(TarEntry(TarKind.SYMLINK, arcname_=arcname, link=entry.link or ""))
        elif entry is not None:
            info = elf.get(entry.source)
            executable = bool(entry.mode & 0o111)
            if info is not None and info.kind in _EDITABLE:
                rpath = derive_rpath(
                    relpath=relpath,
                    own=devel_files,
                    original=_original_rpath(info),
                    needed=info.needed,
                    declared=(),
                    search=(devel_files,),
                )
                content = _content(entry.source, entry.planned)
                if isinstance(content, PeTransformPlan):
                    raise PackagingError("a PE transform cannot take an RPATH edit", path=arcname)
                file = _plan_elf(arcname, content, rpath, executable)
            elif isinstance(entry.planned, PlannedArchive):
                file = PayloadFile.planned_archive(
                    arcname, entry.planned.key, size=entry.planned.original_bytes
                )
            else:
                file = _unedited(arcname, _content(entry.source, entry.planned), executable)
            members.append(TarEntry(TarKind.FILE, file=file))
    return members


# ---------------------------------------------------------------- whole build


def _families(catalog: Catalog) -> tuple[str, ...]:
    return () if catalog.kpack_split else catalog.targets


def device_targets(catalog: Catalog) -> tuple[str, ...]:
    """Base targets of the ISA artifacts on disk (kpack mode), sorted."""
    return tuple(sorted({base_target(t) for t in catalog.targets}))


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
    catalog: Catalog,
    spec: PackageSpec,
    libraries: RuntimePackage | None,
    options: BuildOptions,
    elf: dict[Path, ElfInfo | None],
) -> list[RuntimePackage]:
    if libraries is None:
        raise PackagingError("kpack-split mode: no rocm-sdk-libraries package to overlay")
    owners = {r: libraries.dist_name for r in [*libraries.layout.files, *libraries.layout.aliases]}
    wanted = device_targets(catalog)
    if options.targets:
        unknown = sorted(set(options.targets) - set(wanted))
        if unknown:
            raise ArtifactError(
                f"--targets names targets with no per-target artifacts: {', '.join(unknown)}"
                f" (found: {', '.join(wanted) or 'none'})",
                path=catalog.root,
            )
        wanted = tuple(t for t in wanted if t in options.targets)
    devices = []
    for target in wanted:
        device = _runtime_package(catalog, spec, target, options, elf, platform=libraries.platform)
        _check_device_overlay(device, owners)
        devices.append(device)
    return devices


def plan_runtime(
    catalog: Catalog,
    manifests: Manifests,
    options: BuildOptions,
    elf: dict[Path, ElfInfo | None],
) -> tuple[list[RuntimePackage], list[str]]:
    """Lay out core, profiler, libraries (one per family, or one arch-neutral) and devices."""
    notices: list[str] = []
    shared: list[RuntimePackage] = []
    per_family: list[RuntimePackage] = []
    specs = manifests.for_mode(catalog.kpack_split)
    for spec in specs.values():
        if spec.kind in (PackageKind.CORE, PackageKind.PROFILER) or (
            spec.kind is PackageKind.LIBRARIES and catalog.kpack_split
        ):
            pkg = _runtime_package(catalog, spec, None, options, elf)
            if not pkg.layout.files and spec.kind is not PackageKind.LIBRARIES:
                if spec.required:
                    raise PackagingError(f"refusing to build an empty {pkg.dist_name} package")
                notices.append(f"{pkg.dist_name}: no matching artifacts; not built")
                continue
            shared.append(pkg)
        elif spec.kind is PackageKind.LIBRARIES:
            for family in _families(catalog):
                pkg = _runtime_package(catalog, spec, family, options, elf)
                if pkg.layout.files:
                    per_family.append(pkg)
                else:
                    notices.append(f"{pkg.dist_name}: no matching artifacts; not built")
    if catalog.kpack_split and "device" in specs:
        libraries = next((p for p in shared if p.spec.kind is PackageKind.LIBRARIES), None)
        per_family += _plan_devices(catalog, specs["device"], libraries, options, elf)
    return shared + per_family, notices


def _named_for(shortname: str, basename: str, *, windows: bool = False) -> bool:
    """``libhipdnn_backend.so.1`` is named for ``hipdnn``; ``libhipblaslt.so`` is not named
    for ``hipblas``, nor ``librocprofiler-sdk-roctx.so`` for ``rocprofiler-sdk``. On
    Windows DLLs have no ``lib`` prefix: ``hipdnn_backend.dll``, ``amdhip64_7.dll``."""
    stem = shortname if windows else f"lib{shortname}"
    if not windows:
        return basename.startswith(stem) and basename[len(stem) : len(stem) + 1] in (".", "_")
    name = basename.lower()
    return (
        name.endswith(".dll")
        and name.startswith(stem.lower())
        and name[len(stem) : len(stem) + 1] in (".", "_")
    )


def library_registry(
    manifests: Manifests, runtime: Sequence[RuntimePackage], *, windows: bool = False
) -> list[dict[str, object]]:
    """Every registry entry (for ``_dist_info``), as TheRock's registry has them all.

    An entry whose pattern matches no file this build ships, although a library named for
    its short name ships (``libhipdnn_backend.so.1`` for ``hipdnn``), is a build error: at
    run time ``find_libraries`` would fail to find a library that is there. A Windows
    package set is checked the way ``find_libraries`` looks there: ``bin/`` with the DLL
    pattern (an entry without one is not looked up on Windows).
    """
    out: list[dict[str, object]] = []
    problems: list[str] = []
    for lib in manifests.libraries:
        files = [
            relpath
            for pkg in runtime
            if pkg.spec.logical == lib.package
            for relpath in [*pkg.layout.files, *pkg.layout.aliases]
        ]
        directory, pattern = (
            ("bin", lib.dll_pattern) if windows else (lib.posix_relpath, lib.so_pattern)
        )
        present = pattern is not None and any(
            posixpath.dirname(relpath) == directory
            and fnmatch.fnmatchcase(posixpath.basename(relpath), pattern)
            for relpath in files
        )
        named = sorted(
            r for r in files if _named_for(lib.shortname, posixpath.basename(r), windows=windows)
        )
        if not present and named and pattern is not None:
            problems.append(
                f"{lib.shortname}: pattern {directory}/{pattern} matches no "
                f"file of the {lib.package} package, but {', '.join(named)} ships"
            )
        out.append(
            {
                "shortname": lib.shortname,
                "package": lib.package,
                "so_pattern": lib.so_pattern,
                "dll_pattern": lib.dll_pattern,
                "posix_relpath": lib.posix_relpath,
                "optional": lib.optional,
                "shipped": present,
            }
        )
    if problems:
        raise ManifestError(
            "library registry entries miss the files they name (manifests/libraries.yaml)",
            problems=problems,
        )
    return sorted(out, key=lambda e: str(e["shortname"]))
