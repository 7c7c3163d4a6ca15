"""The values a build plan is made of, what planning reads, and the names packages take.

:class:`PlanInputs` is what every planning stage reads (the scanned tree, the package
declarations, the options and the ELF facts scanned so far); :class:`RuntimePackage` is one
runtime package after re-layout, :class:`PlannedPackage` one wheel (or the sdist) to write
and :class:`BuildPlan` the whole build. ``dist_name``, ``pure_name`` and ``platform_name``
spell a package's distribution and import names from its manifest entry, its family and
the build's nonce.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kpack.artifact.planned import PlannedArchive
from kpack.elf import ElfInfo

from ..artifacts import Catalog, Entry, EntryKind
from ..kpack_split import KpackSplitPlan
from ..manifests import Manifests, PackageKind, PackageSpec
from ..options import BuildOptions
from ..payload import PayloadFile, TarEntry
from ._layout import RuntimeLayout
from ._namespace import Namespace
from ._rpath import PackageFiles

__all__ = [
    "BuildPlan",
    "DistKind",
    "PlanInputs",
    "PlannedPackage",
    "RuntimePackage",
    "dist_name",
    "needs_elf_scan",
    "platform_name",
    "pure_name",
]


def needs_elf_scan(entry: Entry) -> bool:
    """A regular file whose ELF facts the plan needs (a planned archive is no ELF file;
    a planned transform keeps its input's dynamic section, so the input is scanned)."""
    return entry.kind is EntryKind.FILE and not isinstance(entry.planned, PlannedArchive)


@dataclass(frozen=True, kw_only=True)
class PlanInputs:
    """What every planning stage reads. ``elf`` holds the ELF facts scanned so far, each
    input file's once for the whole build (:meth:`scan_elf` adds those it lacks)."""

    catalog: Catalog
    manifests: Manifests
    options: BuildOptions
    elf: dict[Path, ElfInfo | None] = field(default_factory=dict)

    def scan_elf(self, entries: Iterable[Entry]) -> None:
        """Scan the ELF facts of the files among ``entries`` not scanned yet."""
        wanted = (e.source for e in entries if needs_elf_scan(e) and e.source not in self.elf)
        self.elf.update(self.catalog.facts.scan(wanted, jobs=self.options.jobs))


@dataclass(frozen=True, kw_only=True)
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


class DistKind(enum.Enum):
    """What a planned package is: a manifest package kind, or the ``rocm`` selector sdist."""

    CORE = "core"
    PROFILER = "profiler"
    LIBRARIES = "libraries"
    DEVICE = "device"
    DEVEL = "devel"
    SELECTOR = "meta"

    @classmethod
    def of(cls, kind: PackageKind) -> DistKind:
        return cls(kind.value)


@dataclass(frozen=True, kw_only=True)
class PlannedPackage:
    """One wheel (or the sdist) to write."""

    logical: str
    kind: DistKind
    dist_name: str
    family: str | None
    subdir: str  # '' or the family, for multi-family legacy dist/ layout
    payload: tuple[PayloadFile, ...]
    entry_points: tuple[tuple[str, str], ...] = ()  # (script name, module:func)
    devel_tar: tuple[TarEntry, ...] = ()
    devel_tar_name: str = ""  # arcname of the tarball inside the wheel
    summary: str = ""
    metadata: bytes = b""  # METADATA for wheels, PKG-INFO for the sdist

    @property
    def file_count(self) -> int:
        return len(self.payload) + len(self.devel_tar)

    @property
    def input_bytes(self) -> int:
        tar = sum(e.file.size for e in self.devel_tar if e.file is not None)
        return sum(p.size for p in self.payload) + tar


@dataclass(frozen=True, kw_only=True)
class BuildPlan:
    """The whole build: every package to write, and the split apply writes before them."""

    options: BuildOptions
    catalog: Catalog
    families: tuple[str, ...]
    runtime: tuple[RuntimePackage, ...]
    packages: tuple[PlannedPackage, ...]
    notices: tuple[str, ...]
    split: KpackSplitPlan | None = None  # written by apply before the packages


def dist_name(spec: PackageSpec, family: str | None) -> str:
    return spec.dist.format(target_family=(family or "").split(":", 1)[0])


def pure_name(spec: PackageSpec, family: str | None) -> str | None:
    if spec.pure is None:
        return None
    return spec.pure.format(target_family=(family or "").split(":", 1)[0])


def platform_name(dist: str, nonce: str) -> str:
    return "_" + dist.replace("-", "_") + nonce
