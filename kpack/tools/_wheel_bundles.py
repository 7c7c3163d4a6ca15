"""Device-package bundles of the wheel splitter, after rocm-bootstrap 0.3 (variants.md §6).

A bundle key is a target (``gfx1100``), a sub-family (``gfx110x``, ``gfx9_4``) or a family
(``gfx11``). :func:`packaging_chain` gives the keys a GPU needs, most specific first; the
table below is ours, and the tests compare it with rocm-bootstrap's.
"""

from __future__ import annotations

import re
from enum import Enum

__all__ = [
    "Level",
    "bundle_key",
    "device_dist_name",
    "extra_name",
    "known_targets",
    "level_of",
    "packaging_chain",
]


class Level(str, Enum):
    TARGET = "target"
    SUB_FAMILY = "sub_family"
    FAMILY = "family"


#: sub-family -> (family, member targets); the members are the provider's 33 values.
_SUB_FAMILIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "gfx9_0": (
        "gfx9",
        ("gfx900", "gfx902", "gfx904", "gfx906", "gfx908", "gfx909", "gfx90a", "gfx90c"),
    ),
    "gfx9_4": ("gfx9", ("gfx942",)),
    "gfx9_5": ("gfx9", ("gfx950",)),
    "gfx10_1": ("gfx10", ("gfx1010", "gfx1011", "gfx1012", "gfx1013")),
    "gfx10_3": ("gfx10", tuple(f"gfx103{i}" for i in range(7))),
    "gfx110x": ("gfx11", ("gfx1100", "gfx1101", "gfx1102", "gfx1103")),
    "gfx115x": ("gfx11", ("gfx1150", "gfx1151", "gfx1152", "gfx1153")),
    "gfx12_0": ("gfx12", ("gfx1200", "gfx1201")),
    "gfx12_5": ("gfx12", ("gfx1250", "gfx1251")),
}
_SUB_OF = {t: sub for sub, (_, members) in _SUB_FAMILIES.items() for t in members}
_FAMILIES = frozenset(family for family, _ in _SUB_FAMILIES.values())
_TRAILING_XNACK = re.compile(r"[:-]xnack[+-]$")


def known_targets() -> frozenset[str]:
    """The target values the ``amd :: gfx_arch`` provider knows."""
    return frozenset(_SUB_OF)


def bundle_key(target: str) -> str:
    """The device-wheel key of a target id: only a trailing ``:xnack±`` (or Tensile
    ``-xnack±``) is stripped, so ``gfx90a:xnack+`` and ``gfx90a:xnack-`` share ``gfx90a``.
    Any other feature left (``gfx942:sramecc+``) is dropped too: bundles name base targets."""
    return _TRAILING_XNACK.sub("", target).split(":", 1)[0]


def level_of(key: str) -> Level:
    if key in _SUB_FAMILIES:
        return Level.SUB_FAMILY
    if key in _FAMILIES:
        return Level.FAMILY
    return Level.TARGET


def packaging_chain(key: str) -> tuple[str, ...]:
    """``gfx1151`` -> (gfx1151, gfx115x, gfx11); a key the table lacks -> (key,)."""
    if key in _SUB_OF:
        sub = _SUB_OF[key]
        return (key, sub, _SUB_FAMILIES[sub][0])
    if key in _SUB_FAMILIES:
        return (key, _SUB_FAMILIES[key][0])
    return (key,)


def device_dist_name(prefix: str, key: str) -> str:
    """``amd-torch-device`` + ``gfx9_4`` -> ``amd-torch-device-gfx9-4``."""
    return f"{prefix}-{key.replace('_', '-')}"


def extra_name(key: str) -> str:
    """The extra selecting ``key``'s device code: ``device-gfx1100``, ``device-gfx9-4``."""
    return f"device-{key.replace('_', '-')}"
