"""AMDGPU target ids, the one grammar every reader and writer of the project uses.

A target id as LLVM writes it is a processor — ``gfx`` and hex digits (``gfx90a``), that
processor's ``-strict`` variant (``gfx1250-strict``, ELF mach 0x0eb) or an LLVM generic target
(``gfx9-4-generic``) — then ``:feature+`` / ``:feature-`` parts
(``gfx942:sramecc+:xnack-``). A feature is named in lower-case letters (the target-id
features LLVM defines are ``sramecc`` and ``xnack``) and appears at most once, in any order
(LLVM AMDGPUUsage, "Target ID"; clang's ``parseTargetID``).

A target id read from input bytes (a bundle triple, a ``.kpack`` TOC, an artifact directory
name) becomes part of archive, file and directory names, so only these spellings, of at most
:data:`MAX_TARGET_ID` characters, are accepted: never ``/``, ``..``, ``\\``, ``_`` (the
runtime takes ``<P>_<target>.kpack`` apart at the last ``_``), spaces or control characters.

The installed runtime (``templates/rocm/src/rocm_sdk/_kpack.py``, which cannot import this
module) accepts exactly the same target ids; ``tests/templates/rocm_sdk/test_target_grammar.py``
feeds both one table.

- :func:`is_target_id`: the spelling a bundle or ``.kpack`` archive may carry (what both the
  archive writer and its reader accept);
- :func:`is_isa_target`: the stricter form of an artifact directory or ``--gpu-targets``;
- :func:`base_target`, :func:`target_features`: a target id's processor and features;
- :func:`looks_generic`: spelled as an LLVM generic target (which ones exist is the generic
  target table's business, :mod:`kpack.generic_targets`);
- :func:`target_order`: the one sort key of every list of targets a tool shows.
"""

from __future__ import annotations

import re

__all__ = [
    "MAX_TARGET_ID",
    "base_target",
    "is_isa_target",
    "is_processor",
    "is_target_id",
    "looks_generic",
    "target_features",
    "target_order",
]

MAX_TARGET_ID = 64
_FEATURES = r"(?::[a-z]+[+-])*"
_TARGET_ID_RE = re.compile(r"gfx[0-9a-z]+(?:-[0-9a-z]+)*" + _FEATURES)
_ISA_RE = re.compile(r"(?:gfx[0-9a-f]+(?:-strict)?|gfx[0-9]+(?:-[0-9]+)?-generic)" + _FEATURES)
_GENERIC_RE = re.compile(r"gfx[0-9]+(?:-[0-9]+)?-generic")
_PROCESSOR_RE = re.compile(r"gfx[0-9a-f]+")


def is_target_id(value: str) -> bool:
    """True for ``gfx90a``, ``gfx942:sramecc+:xnack-``, ``gfx9-4-generic``; False otherwise
    (``gfx942:XNACK+``, ``gfx942:xnack+:xnack-``, ``gfx942:sram-ecc+``)."""
    return _spelled(value, _TARGET_ID_RE)


def is_isa_target(value: str) -> bool:
    """``gfx`` + hex digits (with an optional ``-strict``: ``gfx1250-strict``) or an LLVM
    generic target (``gfx9-4-generic``), optionally ``:feature+`` / ``:feature-`` parts: a
    target id (:func:`is_target_id`) with a stricter processor."""
    return _spelled(value, _ISA_RE)


def _spelled(value: str, pattern: re.Pattern[str]) -> bool:
    if len(value) > MAX_TARGET_ID or pattern.fullmatch(value) is None:
        return False
    names = [feature[:-1] for feature in target_features(value)]
    return len(names) == len(set(names))


def is_processor(value: str) -> bool:
    """A processor name without features: ``gfx`` + hex digits (``gfx90a``)."""
    return _PROCESSOR_RE.fullmatch(value) is not None


def base_target(target: str) -> str:
    """The part before the first ``:`` (``gfx942:xnack+`` -> ``gfx942``)."""
    return target.split(":", 1)[0]


def target_features(target: str) -> tuple[str, ...]:
    """The ``:``-separated parts after the processor (``gfx942:sramecc+:xnack-`` ->
    ``("sramecc+", "xnack-")``)."""
    return tuple(target.split(":")[1:])


def looks_generic(target: str) -> bool:
    """True when ``target``'s processor is spelled as an LLVM generic target
    (``gfx11-generic``, ``gfx9-4-generic:xnack-``), whether or not the table knows it."""
    return _GENERIC_RE.fullmatch(base_target(target)) is not None


#: a processor, its -strict variant, or a family of one processor (gfx950-dcgpu)
_ORDER_PROCESSOR_RE = re.compile(r"gfx([0-9]+)([0-9a-f])([0-9a-f])(?:-([a-z][a-z-]*))?")
_ORDER_GENERIC_RE = re.compile(r"gfx([0-9]+)(?:-([0-9]+))?-generic")
_ORDER_FAMILY_RE = re.compile(r"gfx([0-9]+?)([0-9a-f])[xX](?:-.*)?")  # gfx94X-dcgpu, gfx11X-all
_ORDER_KEY_RE = re.compile(r"gfx([0-9]+)(?:_([0-9]+))?")  # bundle keys: gfx9, gfx9_4
#: a major version's sub-families, families and generic targets sort after its processors
_AFTER = 0x100


def target_order(target: str) -> tuple[int, int, int, str]:
    """The natural order of targets, as a sort key: by GFX version (major, minor, stepping),
    so ``gfx803 < gfx90a < gfx942 < gfx1030 < gfx1100 < gfx1250``; a processor's
    feature variants, ``-strict`` variant and families right after it (``gfx942``,
    ``gfx942:xnack+``; ``gfx1250``, ``gfx1250-strict``, ``gfx1250-dgpu``); a family of several
    (``gfx94X-dcgpu``), a
    bundle key (``gfx9_4``) and a generic target (``gfx9-4-generic``) after the processors
    they cover, the broader ones last (``gfx950 < gfx9_5 < gfx9-generic``); anything else
    after every GFX version, by name."""
    base, _, features = target.partition(":")
    found = _ORDER_PROCESSOR_RE.fullmatch(base)
    if found:
        major, minor, stepping = int(found[1]), int(found[2], 16), int(found[3], 16)
        suffix = found[4] or ""
        return (
            major,
            minor,
            stepping,
            f"{0 if not suffix else 1 if suffix == 'strict' else 2}{suffix}:{features}",
        )
    for pattern, rank in ((_ORDER_FAMILY_RE, 1), (_ORDER_KEY_RE, 2), (_ORDER_GENERIC_RE, 3)):
        found = pattern.fullmatch(base)
        if found:
            minor = int(found[2], 16) if found[2] else _AFTER
            return int(found[1]), minor, _AFTER + rank, target
    return 1 << 30, 0, 0, target
