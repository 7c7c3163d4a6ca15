"""Requires-Dist and extras of the ``rocm`` meta package.

Computed when the sdist is built on the installing machine, from the
``_dist_info`` module of the sdist: ``rocm-sdk-core`` always, and one extra per
optional package of this build. Target-specific packages use the target family
that ``determine_target_family()`` resolves on this machine. Every requirement
pins ``==<version>``; a target available for only one platform carries a
``sys_platform`` marker.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class Requirements:
    requires_dist: tuple[str, ...]
    extras: dict[str, tuple[str, ...]]
    notes: tuple[str, ...]


def normalize_extra(name: str) -> str:
    """PEP 685 extra name normalisation."""
    return re.sub(r"[-_.]+", "-", name).lower()


def platform_marker(di: ModuleType, target: str) -> str | None:
    """``sys_platform`` marker for a target built for only one platform.

    Only a cross-platform build (both platform lists non-empty) has markers.
    """
    base = di.base_target(target)
    linux = {di.base_target(t) for t in di.LINUX_TARGET_FAMILIES}
    windows = {di.base_target(t) for t in di.WINDOWS_TARGET_FAMILIES}
    if not linux or not windows:
        return None
    if base in linux and base not in windows:
        return 'sys_platform == "linux"'
    if base in windows and base not in linux:
        return 'sys_platform == "win32"'
    return None


def requirement(di: ModuleType, logical_name: str, target: str | None = None) -> str:
    entry = di.ALL_PACKAGES[logical_name]
    req = entry.requirement(target)
    marker = platform_marker(di, target) if entry.target_specific and target else None
    return f"{req}; {marker}" if marker else req


def device_targets(di: ModuleType) -> list[str]:
    """Base targets of every device package of this build, sorted."""
    return sorted({di.base_target(t) for t in di.AVAILABLE_TARGET_FAMILIES})


def device_requirements(di: ModuleType, target: str) -> tuple[str, ...]:
    """The device packages a ``target`` user needs: its processor's, then its generic
    target's (``gfx942`` -> ``gfx942`` and ``gfx9-4-generic``), those this build has."""
    return tuple(requirement(di, "device", t) for t in di.device_targets_for(target))


def _machine_targets(di: ModuleType, family: str, source: str) -> list[str]:
    """What the ``device`` extra serves: every GPU of this machine (a machine with two GPU
    kinds needs both's code) when detection chose, else the family the user named."""
    if source != "discovered":
        return [family]
    try:
        gpus = [g.target for g in di.detect_gpus()]
    except ValueError:
        gpus = []
    return [family, *gpus]


def _device_extras(
    di: ModuleType, family: str, source: str
) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    """``device`` (this machine's target), ``device-<gfx>`` for every processor with device
    code in this build (its own package or its generic target's) and every generic target,
    and ``device-all``."""
    extras: dict[str, tuple[str, ...]] = {}
    notes: list[str] = []
    if source == "default":
        extras["device"] = ()
        notes.append(
            "no GPU target was detected, so the 'device' extra is empty; install "
            "'rocm[device-<gfx>]' or set ROCM_SDK_TARGET_FAMILY"
        )
    else:
        extras["device"] = tuple(
            dict.fromkeys(r for t in _machine_targets(di, family, source)
                          for r in device_requirements(di, t))
        )  # fmt: skip
    built = device_targets(di)
    for target in sorted({*built, *di.served_processors()}):
        extras[normalize_extra(f"device-{target}")] = device_requirements(di, target)
    extras["device-all"] = tuple(requirement(di, "device", t) for t in built)
    return extras, notes


def compute_requirements(
    di: ModuleType, resolve: Callable[[], tuple[str, str]] | None = None
) -> Requirements:
    """Requires-Dist and extras for the ``_dist_info`` module ``di``.

    ``resolve`` returns (target family, source) and defaults to
    ``di.resolve_target_family``; it is called only if a package needs it.
    """
    resolver = resolve or di.resolve_target_family
    packages = sorted(di.ALL_PACKAGES.values(), key=lambda p: p.logical_name)
    requires: list[str] = []
    extras: dict[str, tuple[str, ...]] = {}
    notes: list[str] = []
    for pkg in packages:
        if pkg.logical_name == "meta":
            continue
        family = resolver()[0] if pkg.target_specific and pkg.logical_name != "device" else None
        if pkg.required:
            requires.append(requirement(di, pkg.logical_name, family))
        elif pkg.logical_name == "device":
            device, device_notes = _device_extras(di, *resolver())
            extras.update(device)
            notes.extend(device_notes)
        else:
            extras[normalize_extra(pkg.logical_name)] = (requirement(di, pkg.logical_name, family),)
    return Requirements(tuple(requires), dict(sorted(extras.items())), tuple(notes))


def with_extra(req: str, extra: str) -> str:
    """``req`` restricted to ``extra``, keeping any marker it already has."""
    name, _, marker = req.partition(";")
    condition = f'extra == "{extra}"'
    if marker.strip():
        condition = f"({marker.strip()}) and {condition}"
    return f"{name.strip()}; {condition}"


def metadata_fields(reqs: Requirements) -> list[tuple[str, str]]:
    """(field, value) pairs: Requires-Dist, then Provides-Extra and its requirements."""
    fields = [("Requires-Dist", r) for r in reqs.requires_dist]
    for extra, extra_reqs in reqs.extras.items():
        fields.append(("Provides-Extra", extra))
        fields.extend(("Requires-Dist", with_extra(r, extra)) for r in extra_reqs)
    return fields
