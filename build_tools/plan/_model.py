"""The values a build plan is made of, and the names its packages take.

:class:`RuntimePackage` is one runtime package after re-layout, :class:`PackagePlan` one
wheel (or the sdist) to write and :class:`BuildPlan` the whole build. ``dist_name``,
``pure_name`` and ``platform_name`` spell a package's distribution and import names from
its manifest entry, its family and the build's nonce.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ..artifacts import Catalog
from ..kpack_split import KpackSplitPlan
from ..layout import RuntimeLayout
from ..manifests import PackageKind, PackageSpec
from ..namespace import Namespace
from ..options import BuildOptions
from ..payload import PayloadFile, TarEntry
from ..rpath import PackageFiles

__all__ = [
    "BuildPlan",
    "PackagePlan",
    "PlanKind",
    "RuntimePackage",
    "dist_name",
    "platform_name",
    "pure_name",
]


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


def dist_name(spec: PackageSpec, family: str | None) -> str:
    return spec.dist.format(target_family=(family or "").split(":", 1)[0])


def pure_name(spec: PackageSpec, family: str | None) -> str | None:
    if spec.pure is None:
        return None
    return spec.pure.format(target_family=(family or "").split(":", 1)[0])


def platform_name(dist: str, nonce: str) -> str:
    return "_" + dist.replace("-", "_") + nonce
