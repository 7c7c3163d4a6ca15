"""The ``rocm`` sdist's metadata as setuptools writes it: the requirements of the build's
default target family, rendered as ``src/rocm.egg-info/`` (``PKG-INFO``, ``requires.txt``,
``SOURCES.txt``, ``top_level.txt``, ``entry_points.txt``, ``dependency_links.txt``) and as the
Requires-Dist / Provides-Extra of both PKG-INFO files.

TheRock's release tools read these files from a built sdist (``promote_packages.py`` rewrites
``src/rocm.egg-info/requires.txt`` and ``PKG-INFO`` and keeps only the GPUs it is told to).
They record what the sdist resolves to for the build's default family; the installing
machine still resolves its own (both PKG-INFO files keep ``Dynamic: Requires-Dist``). The
rules are those of the sdist's backend (``templates/rocm/_backend/rocm_sdk_requires.py``)
resolving ``ROCM_SDK_TARGET_FAMILY=<default>``; tests/build_tools/test_therock_promote.py runs that
backend and compares.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._context import TemplateContext

__all__ = ["EGG_INFO", "Requirements", "default_requirements", "egg_info_files", "requires_txt"]

EGG_INFO = "src/rocm.egg-info"
ENTRY_POINTS = "[console_scripts]\nrocm-sdk = rocm_sdk.__main__:main\n"


@dataclass(frozen=True)
class Requirements:
    """Requires-Dist of the ``rocm`` package and its extras (name -> requirements), each
    requirement a PEP 508 string with an optional ``; marker``."""

    requires_dist: tuple[str, ...]
    extras: Mapping[str, tuple[str, ...]]

    def metadata_fields(self) -> tuple[list[str], list[str]]:
        """(Provides-Extra values, Requires-Dist values) for PKG-INFO."""
        requires = list(self.requires_dist)
        for extra, reqs in self.extras.items():
            requires += [_with_extra(r, extra) for r in reqs]
        return list(self.extras), requires


def _base(target: str) -> str:
    return target.split(":", 1)[0]


def _normalize_extra(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _with_extra(req: str, extra: str) -> str:
    name, _, marker = req.partition(";")
    condition = f'extra == "{extra}"'
    if marker.strip():
        condition = f"({marker.strip()}) and {condition}"
    return f"{name.strip()}; {condition}"


class _Set:
    """The set's families and packages, as the sdist's ``_dist_info`` module has them."""

    def __init__(self, ctx: TemplateContext) -> None:
        self.ctx = ctx
        self.available = {_base(t) for t in ctx.available_target_families}
        self.linux = {_base(t) for t in ctx.linux_target_families}
        self.windows = {_base(t) for t in ctx.windows_target_families}

    def marker(self, target: str) -> str | None:
        base = _base(target)
        if not self.linux or not self.windows or (base in self.linux) == (base in self.windows):
            return None
        return 'sys_platform == "linux"' if base in self.linux else 'sys_platform == "win32"'

    def requirement(self, package: Mapping[str, Any], target: str | None) -> str:
        name = str(package["dist_template"])
        if target is not None:
            name = name.replace("{target_family}", _base(target))
        req = f"{name}=={self.ctx.version}"
        marker = self.marker(target) if package["target_specific"] and target else None
        return f"{req}; {marker}" if marker else req

    def generic(self, target: str) -> str | None:
        base = _base(target)
        return next((g for g, m in self.ctx.generic_targets.items() if base in m), None)

    def device_targets(self, target: str) -> list[str]:
        wanted = [_base(target), self.generic(target)]
        return [t for t in dict.fromkeys(wanted) if t is not None and t in self.available]

    def served(self) -> set[str]:
        out: set[str] = set()
        for base in self.available:
            out.update(self.ctx.generic_targets.get(base, (base,)))
        return out


def _device_extras(
    fam: _Set, device: Mapping[str, Any], default: str
) -> dict[str, tuple[str, ...]]:
    def reqs(target: str) -> tuple[str, ...]:
        return tuple(fam.requirement(device, t) for t in fam.device_targets(target))

    extras = {"device": reqs(default)}
    for target in sorted(fam.available | fam.served()):
        extras[_normalize_extra(f"device-{target}")] = reqs(target)
    extras["device-all"] = tuple(fam.requirement(device, t) for t in sorted(fam.available))
    return extras


def default_requirements(ctx: TemplateContext) -> Requirements:
    """What the ``rocm`` sdist resolves to for the build's default target family."""
    fam, default = _Set(ctx), ctx.default_target_family
    requires: list[str] = []
    extras: dict[str, tuple[str, ...]] = {}
    for package in sorted(ctx.packages, key=lambda p: str(p["logical_name"])):
        logical = str(package["logical_name"])
        specific = bool(package["target_specific"])
        if logical == "meta" or (specific and default is None):
            continue
        family = default if specific and logical != "device" else None
        if package["required"]:
            requires.append(fam.requirement(package, family))
        elif logical == "device" and default is not None:
            extras.update(_device_extras(fam, package, default))
        else:
            extras[_normalize_extra(logical)] = (fam.requirement(package, family),)
    return Requirements(tuple(requires), dict(sorted(extras.items())))


def requires_txt(reqs: Requirements) -> bytes:
    """``requires.txt`` as setuptools writes it: the requirements without a marker first, then
    one ``[extra]`` section per extra (``[extra:marker]`` for those with a marker; an
    unconditional one, ``[:marker]``), sections sorted by name."""
    plain: list[str] = []
    sections: dict[str, list[str]] = {}
    for req in reqs.requires_dist:
        name, _, marker = req.partition(";")
        if marker.strip():
            sections.setdefault(f":{marker.strip()}", []).append(name.strip())
        else:
            plain.append(name.strip())
    for extra, extra_reqs in reqs.extras.items():
        sections.setdefault(extra, [])
        for req in extra_reqs:
            name, _, marker = req.partition(";")
            key = f"{extra}:{marker.strip()}" if marker.strip() else extra
            sections.setdefault(key, []).append(name.strip())
    text = "".join(f"{r}\n" for r in plain)
    for key in sorted(sections):
        text += f"\n[{key}]\n" + "".join(f"{r}\n" for r in sections[key])
    return text.encode()


def egg_info_files(pkg_info: bytes, reqs: Requirements, members: Sequence[str]) -> dict[str, bytes]:
    """The ``src/rocm.egg-info/`` files (arcname -> bytes) of an sdist whose other members
    are ``members`` and whose PKG-INFO is ``pkg_info``."""
    files = {
        f"{EGG_INFO}/PKG-INFO": pkg_info,
        f"{EGG_INFO}/dependency_links.txt": b"\n",
        f"{EGG_INFO}/entry_points.txt": ENTRY_POINTS.encode(),
        f"{EGG_INFO}/requires.txt": requires_txt(reqs),
        f"{EGG_INFO}/top_level.txt": b"rocm_sdk\n",
    }
    sources = sorted({*members, *files, f"{EGG_INFO}/SOURCES.txt"})
    files[f"{EGG_INFO}/SOURCES.txt"] = "".join(f"{s}\n" for s in sources).encode()
    return dict(sorted(files.items()))
