"""Which installed packages serve each GPU of this machine: the one verdict that ``rocm-sdk
targets`` prints, ``initialize_process`` warns from and ``rocm-sdk test`` starts from (package
level: installed distributions' names and RECORDs, no archive read).

Kpack-split sets: a GPU is served by the device packages of its processor and of its LLVM
generic target (``device_targets_for``), in the libraries' site dir or in another one on
sys.path (``initialize_process`` hands their archives to the runtime through
ROCM_KPACK_PATH_PREFIX), whose archives hold code the runtime loads on the GPU's agent:
its processor with its active features (:mod:`._agent`; ``gfx90a:xnack+`` code does not load
where xnack is off). The fix names what changes the outcome: the install of a missing
device package, or the variable that turns the agent's feature to the one the installed code
needs. Legacy sets: a libraries package of one of its families. ``rocm-sdk test`` goes
further: every kernel must resolve (see :mod:`.tests.gpu_test`), also those of the host
packages of the wheel splitter's device wheels (:func:`splitter_hosts`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from . import _dist_info as di
from ._agent import agent_isas, loads, switches
from ._errors import RocmSdkError
from ._jsonfile import read_json
from ._kpack_installed import DeviceWheel, archive_target, find_device_wheels
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


@dataclass(frozen=True, kw_only=True)
class GpuCoverage:
    gpu: di.DetectedGpu
    served_by: tuple[str, ...]  # installed distributions that carry its code
    fix: str | None  # what to run when nothing does (or why nothing can)
    #: False when the installed packages do not tell whether they serve it (a legacy
    #: family this build does not name for the GPU, and no dist_amdgpu_targets)
    checked: bool = True
    #: the agent ISAs looked for (kpack-split sets; :func:`._agent.agent_isas`)
    isas: tuple[str, ...] = ()
    #: what is missing, after "no" / "NO": 'device code installed', or 'device code for
    #: gfx90a:sramecc+:xnack- installed (rocm-sdk-device-gfx90a has gfx90a:xnack+)'
    missing: str = "device code installed"


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


def _installed_code(wanted: set[str]) -> dict[str, tuple[str, list[str]]]:
    """Our installed device wheels of the base targets ``wanted``: base -> (the wheel's
    name with its site dir, the target ids of the archives its RECORD lists)."""
    found: dict[str, tuple[str, list[str]]] = {}
    for site in device_sites():
        for wheel in find_device_wheels(site, splitter=False):
            if wheel.base in wanted and wheel.base not in found:
                names = (archive_target(PurePosixPath(rel).name) for rel in wheel.archives)
                found[wheel.base] = (f"{wheel.name} ({site})", [t for t in names if t])
    return found


def _kpack(gpu: di.DetectedGpu) -> GpuCoverage:
    owner = di.package_owner(gpu.target)
    wanted = di.device_targets_for(owner)
    isas = agent_isas(gpu)
    if not wanted:
        built = ", ".join(sorted(di.AVAILABLE_TARGET_FAMILIES)) or "none"
        fix = f"this ROCm {di.__version__} build has no code for {owner} (it has: {built})"
        return GpuCoverage(gpu=gpu, served_by=(), fix=fix, isas=isas)
    installed = _installed_code(set(wanted))
    served = [name for name, targets in installed.values() if any(loads(t, isas) for t in targets)]
    if served and _libraries_site() is None:
        fix = f"pip install 'rocm[libraries]=={di.__version__}'"
        return GpuCoverage(gpu=gpu, served_by=(), fix=fix, isas=isas,
                           missing="libraries package installed for its device code")  # fmt: skip
    if served:
        return GpuCoverage(gpu=gpu, served_by=tuple(served), fix=None, isas=isas)
    install = f"pip install 'rocm[device-{owner}]=={di.__version__}'"
    carried = sorted({t for _name, targets in installed.values() for t in targets})
    if not carried:
        return GpuCoverage(gpu=gpu, served_by=(), fix=install, isas=isas)
    shown = " or ".join(isas)
    has = "; ".join(
        f"{di.ALL_PACKAGES['device'].dist_name(base)} has {', '.join(targets) or 'no code'}"
        for base, (_name, targets) in installed.items()
    )
    missing = f"device code for {shown} installed ({has})"
    fixes = [s.text(gpu) for s in switches(gpu) if any(loads(t, s.isas) for t in carried)]
    if len(installed) < len(wanted):
        fixes.append(install)
    if not fixes:
        fixes.append(
            f"this ROCm {di.__version__} build's device packages for {owner} have no code for it"
        )
    return GpuCoverage(gpu=gpu, served_by=(), fix="; or ".join(fixes), isas=isas,
                       missing=missing)  # fmt: skip


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
        return GpuCoverage(gpu=gpu, served_by=tuple(mine), fix=None)
    if families:
        fix = (
            f"{di.TARGET_FAMILY_ENV}={families[0]} pip install --force-reinstall "
            f"--no-cache-dir 'rocm[libraries]=={di.__version__}'"
        )
        return GpuCoverage(gpu=gpu, served_by=(), fix=fix)
    built = build_targets(installed[0]) if installed else None
    if built is not None and owner in built:
        served = tuple(entry.dist_name(f) for f in installed)
        return GpuCoverage(gpu=gpu, served_by=served, fix=None)
    offered = ", ".join(di.AVAILABLE_TARGET_FAMILIES) or "none"
    fix = (
        f"this ROCm {di.__version__} build has no libraries for {owner} (it has {offered}"
        + (f", compiled for {', '.join(built)}" if built else "")
        + f"): pip install --force-reinstall --no-cache-dir 'rocm[libraries]' from an "
        f"index whose rocm offers a family for {owner}"
    )
    checked = built is not None or not installed
    return GpuCoverage(gpu=gpu, served_by=(), fix=fix, checked=checked)


def coverage(gpus: list[di.DetectedGpu]) -> list[GpuCoverage]:
    """One entry per distinct detected target, in detection order."""
    distinct = {g.target: g for g in reversed(gpus)}
    ordered = [distinct[t] for t in dict.fromkeys(g.target for g in gpus)]
    return [(_kpack if di.KPACK_MODE else _legacy)(gpu) for gpu in ordered]
