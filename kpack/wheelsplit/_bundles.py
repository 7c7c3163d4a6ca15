"""Device-package bundles of the wheel splitter, after rocm-bootstrap 0.3 (variants.md §6).

A bundle key is a target (``gfx1100``), a sub-family (``gfx110x``, ``gfx9_4``), a family
(``gfx11``) or an LLVM generic target (``gfx11-generic``, from ``manifests/``'s generic-target
table). :func:`packaging_chain` gives the bundle keys a GPU needs, most specific first; the
table below is ours, and the tests compare it with rocm-bootstrap's. :func:`device_keys`
adds the processor's generic target, whose code the runtime falls back to.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import Enum

from kpack.generic_targets import generic_table
from kpack.owners import package_owner
from kpack.targets import target_order

__all__ = [
    "Level",
    "bundle_key",
    "device_dist_name",
    "device_keys",
    "extra_name",
    "known_targets",
    "level_of",
    "packaging_chain",
    "served_targets",
]


class Level(str, Enum):
    TARGET = "target"
    SUB_FAMILY = "sub_family"
    FAMILY = "family"
    GENERIC = "generic"  # an LLVM generic target: gfx9-4-generic


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
    Any other feature left (``gfx942:sramecc+``) is dropped too: bundles name base targets,
    after their package owner (``gfx1250-strict`` -> ``gfx1250``, :mod:`kpack.owners`)."""
    return package_owner(_TRAILING_XNACK.sub("", target).split(":", 1)[0])


def level_of(key: str) -> Level:
    if generic_table().is_generic(key):
        return Level.GENERIC
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


def device_keys(key: str, present: Iterable[str]) -> tuple[str, ...]:
    """The present bundle keys whose device code a ``key`` user needs: a target's
    packaging chain, then its generic target (``gfx942`` -> gfx942, gfx9_4, gfx9,
    gfx9-4-generic); any other key needs only itself."""
    have = set(present)
    if level_of(key) is not Level.TARGET:
        return (key,) if key in have else ()
    wanted = list(packaging_chain(key))
    generic = generic_table().generic_of(key)
    if generic is not None:
        wanted.append(generic)
    return tuple(k for k in wanted if k in have)


def served_targets(present: Iterable[str]) -> tuple[str, ...]:
    """Every target whose users get device code from ``present``: the target-level keys
    plus every member processor of a present generic target, sorted."""
    table = generic_table()
    out: set[str] = set()
    for key in present:
        level = level_of(key)
        if level is Level.TARGET:
            out.add(key)
        elif level is Level.GENERIC:
            out.update(table.members[key])
    return tuple(sorted(out, key=target_order))


def device_dist_name(prefix: str, key: str) -> str:
    """``amd-torch-device`` + ``gfx9_4`` -> ``amd-torch-device-gfx9-4``."""
    return f"{prefix}-{key.replace('_', '-')}"


def extra_name(key: str) -> str:
    """The extra selecting ``key``'s device code: ``device-gfx1100``, ``device-gfx9-4``."""
    return f"device-{key.replace('_', '-')}"
