"""Which installed packages serve each GPU of this machine (package level, no file read
beyond the installed distributions' names).

Kpack-split sets: a GPU is served by the device packages of its processor and of its LLVM
generic target (``device_targets_for``), in the libraries' site dir or in another one on
sys.path, whose archives ``initialize_process`` hands the runtime through
ROCM_KPACK_PATH_PREFIX. Legacy sets: by a libraries package of one of its families.
``rocm-sdk targets`` prints this, ``initialize_process`` warns from it, and ``rocm-sdk test``
goes further: every kernel must resolve (see :mod:`.tests.gpu_test`), also those of the
host packages of the wheel splitter's device wheels (:func:`splitter_hosts`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from . import _dist_info as di
from ._errors import RocmSdkError
from ._jsonfile import read_json
from ._kpack_installed import DeviceWheel, find_device_wheels
from ._layout import find_dist_info, package_dir

__all__ = [
    "GpuCoverage",
    "build_targets",
    "coverage",
    "device_sites",
    "layered_archives",
    "layered_wheels",
    "splitter_hosts",
]

#: TheRock's record of the GPU targets a build compiled for, in its platform packages
DIST_INFO_JSON = Path("share", "therock", "dist_info.json")


@dataclass(frozen=True)
class GpuCoverage:
    gpu: di.DetectedGpu
    served_by: tuple[str, ...]  # installed distributions that carry its code
    fix: str | None  # what to run when nothing does (or why nothing can)
    #: False when the installed packages do not tell whether they serve it (a legacy
    #: family this build does not name for the GPU, and no dist_amdgpu_targets)
    checked: bool = True


def device_sites() -> list[Path]:
    """Every directory on sys.path that may hold installed distributions (a venv, its
    ``--system-site-packages`` base, ``--user``, ``--target`` with PYTHONPATH)."""
    seen: dict[str, Path] = {}
    for entry in sys.path:
        path = Path(entry or ".")
        if path.is_dir():
            seen.setdefault(str(path.resolve()), path)
    return list(seen.values())


def _libraries_site() -> Path | None:
    """The site dir of the arch-neutral libraries package (kpack-split sets only)."""
    entry = di.ALL_PACKAGES.get("libraries")
    if not di.KPACK_MODE or entry is None or entry.is_target_specific:
        return None
    path = package_dir(entry.platform_package_name())
    return path.parent if path is not None else None


def host_site(host: str, root: str) -> Path | None:
    """The first site dir on sys.path where the host distribution ``host`` of a splitter
    device wheel is installed (its dist-info) with its package dir ``root`` (``torch``)."""
    for site in device_sites():
        if (site / root).is_dir() and find_dist_info(site, host) is not None:
            return site
    return None


def _is_layered(wheel: DeviceWheel, site: Path, home: Path | None) -> bool:
    if wheel.host is None:
        return home is not None and site.resolve() != home.resolve()
    host = wheel.host
    hosts = (host_site(host, root) for root in wheel.roots)
    return any(h is not None and h.resolve() != site.resolve() for h in hosts)


def layered_wheels() -> list[DeviceWheel]:
    """Device wheels installed in another site dir than the package they serve (a venv made
    with ``--system-site-packages`` over a base install, ``--user``, ``--target``): ours
    away from the libraries, a splitter wheel away from its host package. The runtime finds
    their archives only through ROCM_KPACK_PATH_PREFIX."""
    home = _libraries_site()
    return [
        wheel
        for site in device_sites()
        for wheel in find_device_wheels(site)
        if _is_layered(wheel, site, home)
    ]


def splitter_hosts() -> dict[Path, str]:
    """The host package dirs (``.../site-packages/torch``) of every installed splitter
    device wheel, with the host distribution's name: their transformed binaries load device
    code from those wheels, so the GPU check covers them too."""
    hosts: dict[Path, str] = {}
    for site in device_sites():
        for wheel in find_device_wheels(site):
            if wheel.host is None:
                continue
            for root in wheel.roots:
                where = host_site(wheel.host, root)
                if where is not None:
                    hosts.setdefault(where / root, wheel.host)
    return hosts


def layered_archives() -> list[Path]:
    """The ``.kpack`` files of :func:`layered_wheels`, absolute."""
    return [w.dist_info.parent / rel for w in layered_wheels() for rel in w.archives]


def _kpack(gpu: di.DetectedGpu) -> GpuCoverage:
    owner = di.package_owner(gpu.target)
    wanted = set(di.device_targets_for(owner))
    home = _libraries_site()
    served = [
        f"{w.name} ({site})"
        for site in device_sites()
        for w in find_device_wheels(site, splitter=False)
        if w.base in wanted
    ]
    if served and home is not None:
        return GpuCoverage(gpu, tuple(dict.fromkeys(served)), None)
    if not wanted:
        built = ", ".join(sorted(di.AVAILABLE_TARGET_FAMILIES)) or "none"
        return GpuCoverage(
            gpu, (), f"this ROCm {di.__version__} build has no code for {owner} (it has: {built})"
        )
    return GpuCoverage(gpu, (), f"pip install 'rocm[device-{owner}]=={di.__version__}'")


def build_targets(family: str | None = None) -> list[str] | None:
    """The processors the installed libraries were compiled for: ``dist_amdgpu_targets``
    of TheRock's ``share/therock/dist_info.json`` in the libraries package of ``family``
    (legacy sets), else in the core package of the same build; None when neither has a
    readable list."""
    packages = [("libraries", family), ("core", None)]
    for logical, fam in packages:
        entry = di.ALL_PACKAGES.get(logical)
        if entry is None or (entry.is_target_specific and fam is None):
            continue
        try:
            where = package_dir(entry.platform_package_name(fam))
            doc = read_json(where / DIST_INFO_JSON) if where is not None else None
        except (OSError, ValueError, RocmSdkError):
            continue
        value = doc.get("dist_amdgpu_targets") if isinstance(doc, dict) else None
        items = value if isinstance(value, list) else str(value or "").split(";")
        targets = [t.strip() for t in items if isinstance(t, str) and t.strip()]
        if targets:
            return [di.package_owner(t) for t in targets]
    return None


def _installed_families() -> list[str]:
    """The families of this build whose libraries package is installed."""
    entry = di.ALL_PACKAGES.get("libraries")
    if entry is None or not entry.is_target_specific:
        return []
    found = []
    for family in di.AVAILABLE_TARGET_FAMILIES:
        try:
            if package_dir(entry.platform_package_name(family)) is not None:
                found.append(family)
        except RocmSdkError:
            continue
    return found


def _legacy(gpu: di.DetectedGpu) -> GpuCoverage:
    """Served by an installed libraries package of one of the GPU's families, or, when this
    build names no family for it, by installed libraries whose build lists its processor
    in ``dist_amdgpu_targets``; without that list it cannot be told (``checked`` False)."""
    owner = di.package_owner(gpu.target)
    families = [
        f for f in di.candidate_target_families(gpu.target) if f in di.AVAILABLE_TARGET_FAMILIES
    ]
    installed = _installed_families()
    entry = di.ALL_PACKAGES["libraries"]
    mine = [entry.dist_name(f) for f in families if f in installed]
    if mine:
        return GpuCoverage(gpu, tuple(mine), None)
    if families:
        fix = (
            f"{di.TARGET_FAMILY_ENV}={families[0]} pip install --force-reinstall "
            f"--no-cache-dir 'rocm[libraries]=={di.__version__}'"
        )
        return GpuCoverage(gpu, (), fix)
    built = build_targets(installed[0]) if installed else None
    if built is not None and owner in built:
        return GpuCoverage(gpu, tuple(entry.dist_name(f) for f in installed), None)
    offered = ", ".join(di.AVAILABLE_TARGET_FAMILIES) or "none"
    fix = (
        f"this ROCm {di.__version__} build has no libraries for {owner} (it has {offered}"
        + (f", compiled for {', '.join(built)}" if built else "")
        + f"): pip install --force-reinstall --no-cache-dir 'rocm[libraries]' from an "
        f"index whose rocm offers a family for {owner}"
    )
    return GpuCoverage(gpu, (), fix, checked=built is not None or not installed)


def coverage(gpus: list[di.DetectedGpu]) -> list[GpuCoverage]:
    """One entry per distinct detected target, in detection order."""
    distinct = {g.target: g for g in reversed(gpus)}
    ordered = [distinct[t] for t in dict.fromkeys(g.target for g in gpus)]
    return [(_kpack if di.KPACK_MODE else _legacy)(gpu) for gpu in ordered]
