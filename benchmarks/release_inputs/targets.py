"""Every target a release tree covers, its ELF ``e_flags``, and relabelling a code object.

The processors are TheRock's (``cmake/therock_amdgpu_targets.cmake``, ``manifests/targets.yaml``),
grouped in the 16 families its release matrix builds; the generic targets are
``manifests/generic_targets.yaml``'s, plus ``gfx1250-strict``. Machine numbers are LLVM's
``EF_AMDGPU_MACH_*`` values; a feature a processor supports is set to "any" (no ``:xnack±``
suffix), as clang writes it for a plain ``--offload-arch``.

Relabelling rewrites a code object's ``e_flags`` (machine, xnack/sramecc selectors, generic
version) and, for a generic target, ``EI_ABIVERSION`` to code object v6 (generic targets need
it); the code bytes and the AMDGPU metadata note stay those of the source target.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = ["FAMILIES", "TARGETS", "Target", "relabel"]


@dataclass(frozen=True, kw_only=True)
class Target:
    name: str
    mach: int
    xnack: bool = False  # the processor has an xnack selector
    sramecc: bool = False
    generic: bool = False


def _t(name: str, mach: int, *, x: bool = False, s: bool = False, g: bool = False) -> Target:
    return Target(name=name, mach=mach, xnack=x, sramecc=s, generic=g)


#: The 28 processors, the 7 generic targets and gfx1250-strict, in a fixed order.
TARGETS: tuple[Target, ...] = (
    _t("gfx900", 0x2C, x=True),
    _t("gfx906", 0x2F, x=True, s=True),
    _t("gfx908", 0x30, x=True, s=True),
    _t("gfx90a", 0x3F, x=True, s=True),
    _t("gfx942", 0x4C, x=True, s=True),
    _t("gfx950", 0x4F, x=True, s=True),
    _t("gfx1010", 0x33, x=True),
    _t("gfx1011", 0x34, x=True),
    _t("gfx1012", 0x35, x=True),
    _t("gfx1030", 0x36),
    _t("gfx1031", 0x37),
    _t("gfx1032", 0x38),
    _t("gfx1033", 0x39),
    _t("gfx1034", 0x3E),
    _t("gfx1035", 0x3D),
    _t("gfx1036", 0x45),
    _t("gfx1100", 0x41),
    _t("gfx1101", 0x46),
    _t("gfx1102", 0x47),
    _t("gfx1103", 0x44),
    _t("gfx1150", 0x43),
    _t("gfx1151", 0x4A),
    _t("gfx1152", 0x55),
    _t("gfx1153", 0x58),
    _t("gfx1200", 0x48),
    _t("gfx1201", 0x4E),
    _t("gfx1250", 0x49, x=True, s=True),
    _t("gfx9-4-generic", 0x5F, x=True, s=True, g=True),
    _t("gfx10-3-generic", 0x53, g=True),
    _t("gfx11-generic", 0x54, g=True),
    _t("gfx12-generic", 0x59, g=True),
    _t("gfx90c", 0x32, x=True),
    _t("gfx9-generic", 0x51, x=True, g=True),
    _t("gfx10-1-generic", 0x52, x=True, g=True),
    _t("gfx12-5-generic", 0x5B, x=True, s=True, g=True),
    _t("gfx1250-strict", 0xEB, x=True, s=True),
)

#: TheRock's release families (build_tools/github_actions/amdgpu_family_matrix.py), each
#: with the generic targets of its processors: every target above is in exactly one.
FAMILIES: dict[str, tuple[str, ...]] = {
    "gfx900": ("gfx900", "gfx9-generic"),
    "gfx906": ("gfx906",),
    "gfx908": ("gfx908",),
    "gfx90a": ("gfx90a",),
    "gfx90c": ("gfx90c",),
    "gfx94X-dcgpu": ("gfx942", "gfx9-4-generic"),
    "gfx950-dcgpu": ("gfx950",),
    "gfx101X-dgpu": ("gfx1010", "gfx1011", "gfx1012", "gfx10-1-generic"),
    "gfx103X-all": (
        "gfx1030",
        "gfx1031",
        "gfx1032",
        "gfx1033",
        "gfx1034",
        "gfx1035",
        "gfx1036",
        "gfx10-3-generic",
    ),
    "gfx110X-all": ("gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx11-generic"),
    "gfx1150": ("gfx1150",),
    "gfx1151": ("gfx1151",),
    "gfx1152": ("gfx1152",),
    "gfx1153": ("gfx1153",),
    "gfx120X-all": ("gfx1200", "gfx1201", "gfx12-generic"),
    "gfx125X-dcgpu": ("gfx1250", "gfx1250-strict", "gfx12-5-generic"),
}

_BY_NAME = {t.name: t for t in TARGETS}
_E_FLAGS = 0x30
_EI_ABIVERSION = 8
_ABI_V6 = 4
_EM_AMDGPU = 224


def e_flags(target: Target) -> int:
    """``e_flags`` of a code object for ``target`` with every supported feature "any"."""
    flags = target.mach | (0x100 if target.xnack else 0) | (0x400 if target.sramecc else 0)
    return flags | (1 << 24 if target.generic else 0)


def relabel(code_object: bytes | memoryview, target: str) -> bytes:
    """A copy of the AMDGPU ELF ``code_object`` whose header names ``target``."""
    data = bytearray(code_object)
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a little-endian ELF64 code object")
    if struct.unpack_from("<H", data, 18)[0] != _EM_AMDGPU:
        raise ValueError("not an AMDGPU code object")
    wanted = _BY_NAME[target]
    struct.pack_into("<I", data, _E_FLAGS, e_flags(wanted))
    if wanted.generic:
        data[_EI_ABIVERSION] = max(data[_EI_ABIVERSION], _ABI_V6)
    return bytes(data)
