"""The rocm-sdk set a wheel joins, read from the set's own wheels (``--rocm-set DIR``).

A finalized wheel must find each ROCm library where the set installs it, so the layout is
taken from the set, never assumed: the platform directories carry the build's nonce
(``_rocm_sdk_core_v7``), a legacy set has one libraries package per GPU family, and which
package ships which library is the builder's manifests' business. Only the wheels' central
directories are read (member names), never their contents.

The set is every ``rocm_sdk_core`` / ``rocm_sdk_libraries*`` wheel in the directory for the
platform of the wheel being finalized (``linux`` or ``win``); all must be of one version.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from kpack.errors import PackagingError, UsageError

__all__ = ["Platform", "RocmSet", "SetLibrary", "platform_of", "read_set"]

Platform = str  # "linux" or "win"

_WHEEL = re.compile(
    r"(?P<name>[^-]+)-(?P<version>[^-]+)(?:-[0-9][^-]*)?-[^-]+-[^-]+-(?P<plat>[^-]+)\.whl"
)
_LIBRARY = re.compile(r"(?:lib[^/]*\.so(?:\.[0-9][^/]*)?|[^/]*\.dll)")
#: Top-level directories of the set's platform packages (and the profiler's).
PLATFORM_PREFIXES = ("_rocm_sdk_", "_rocm_profiler")


@dataclass(frozen=True, kw_only=True)
class SetLibrary:
    """One library file of the set: its name, the distribution that ships it and the
    directory it installs into, relative to site-packages."""

    name: str
    dist: str
    directory: str


@dataclass(frozen=True, kw_only=True)
class RocmSet:
    """The set's version and where each of its libraries installs."""

    source: Path
    version: Version
    platform: Platform
    core: str  # the core distribution's name
    libraries_dists: tuple[str, ...]  # rocm-sdk-libraries (kpack) or one per family
    libraries: Mapping[str, tuple[SetLibrary, ...]]  # file name (lower case on win) -> copies

    def lookup(self, name: str) -> tuple[SetLibrary, ...]:
        """The set's copies of library ``name`` (none if the set has no such file)."""
        return self.libraries.get(name.lower() if self.platform == "win" else name, ())

    def stems(self) -> dict[str, list[str]]:
        """Library stem (``libamdhip64``) -> the file names the set has for it."""
        out: dict[str, list[str]] = {}
        for name in sorted(self.libraries):
            out.setdefault(library_stem(name), []).append(name)
        return out


def library_stem(name: str) -> str:
    """``libamdhip64.so.6`` -> ``libamdhip64``; ``amdhip64_6.dll`` -> ``amdhip64``."""
    if name.lower().endswith(".dll"):
        return re.sub(r"(?:_[0-9]+)?\.dll$", "", name.lower())
    return name.split(".so", 1)[0]


def platform_of(tag: str) -> Platform:
    """``win`` for a ``win_amd64`` tag, ``linux`` for ``linux``/``manylinux``/``musllinux``."""
    plats = tag.rsplit("-", 1)[-1].split(".")
    if all(p.startswith("win") for p in plats):
        return "win"
    if all("linux" in p for p in plats):
        return "linux"
    raise PackagingError(f"wheel platform {tag.rsplit('-', 1)[-1]!r} is neither Linux nor Windows")


def read_set(directory: Path, platform: Platform) -> RocmSet:
    """The set of ``platform`` in ``directory``; :class:`UsageError` if there is none."""
    directory = Path(directory)
    if not directory.is_dir():
        raise UsageError("--rocm-set: not a directory", path=directory)
    wheels = []
    for path in sorted(directory.glob("*.whl")):
        found = _WHEEL.fullmatch(path.name)
        if found is None or platform_of("x-" + found["plat"]) != platform:
            continue
        dist = str(canonicalize_name(found["name"]))
        if dist == "rocm-sdk-core" or dist.startswith("rocm-sdk-libraries"):
            wheels.append((path, dist, found["version"]))
    if not any(d == "rocm-sdk-core" for _, d, _ in wheels):
        raise UsageError(
            f"--rocm-set: no rocm_sdk_core wheel for {platform} here (the directory the "
            "builder wrote the set into)",
            path=directory,
        )
    versions = sorted({v for _, _, v in wheels})
    if len(versions) != 1:
        raise UsageError(
            f"--rocm-set: wheels of several versions: {', '.join(versions)}", path=directory
        )
    libraries: dict[str, list[SetLibrary]] = {}
    for path, dist, _ in wheels:
        for library in _libraries(path, dist):
            key = library.name.lower() if platform == "win" else library.name
            libraries.setdefault(key, []).append(library)
    try:
        version = Version(versions[0])
    except InvalidVersion:
        raise UsageError(
            f"--rocm-set: version {versions[0]!r} is not PEP 440", path=directory
        ) from None
    return RocmSet(
        source=directory,
        version=version,
        platform=platform,
        core="rocm-sdk-core",
        libraries_dists=tuple(sorted({d for _, d, _ in wheels if d != "rocm-sdk-core"})),
        libraries={k: tuple(v) for k, v in sorted(libraries.items())},
    )


def _libraries(path: Path, dist: str) -> list[SetLibrary]:
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (OSError, zipfile.BadZipFile) as exc:
        raise PackagingError(f"cannot read the set's wheel: {exc}", path=path) from None
    out = []
    for name in names:
        member = PurePosixPath(name)
        top = member.parts[0] if member.parts else ""
        if top.startswith(PLATFORM_PREFIXES) and _LIBRARY.fullmatch(member.name):
            out.append(SetLibrary(name=member.name, dist=dist, directory=str(member.parent)))
    return out
