"""A shard of a wheel split: ``kpack split-wheel --targets T1,T2``.

A shard writes the host wheel (and the variant wheels) of the whole split and the device
wheels of its targets only. Every shard transforms every fat binary and plans every
archive — the out-of-scope kernels described, never spooled or compressed — so its host
wheel is byte-identical to every other shard's and to the one-machine split's, while the
compression of other targets' code objects, most of a split's work, is left to their
shards. Its report records its targets and every target of the input, which
``kpack assemble-wheel-shards`` checks the shards cover exactly once.

Targets are named as the device wheels are (their bundle keys, :mod:`._bundles`):
``gfx942``, ``gfx9-4-generic``, ``gfx1250``; a target with features or a target another
one's package owns names that wheel (``gfx90a:xnack+`` → ``gfx90a``, ``gfx1250-strict``
→ ``gfx1250``).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence

from kpack.errors import UsageError
from kpack.owners import owner_table
from kpack.targets import target_order
from kpack.wheelsplit._bundles import bundle_key

__all__ = ["TARGETS_FLAG", "check_shard", "kernel_scope", "shard_keys"]

TARGETS_FLAG = "--targets"
_KEY_RE = re.compile(r"gfx[0-9a-z_]+(?:-[0-9a-z]+)*(?::[a-z]+[+-])*")


def shard_keys(given: Iterable[str]) -> tuple[str, ...]:
    """The device-wheel keys ``--targets`` names, in natural order; a name that is not a
    target is a :class:`UsageError`."""
    names = [n.strip() for n in given if n.strip()]
    bad = [n for n in names if not _KEY_RE.fullmatch(n)]
    if bad:
        raise UsageError(
            f"{TARGETS_FLAG} {', '.join(repr(n[:40]) for n in bad[:5])}: not a target "
            "(gfx942, gfx90a:xnack+, gfx9-4-generic)"
        )
    if not names:
        raise UsageError(f"{TARGETS_FLAG}: give at least one target")
    return tuple(sorted({bundle_key(n) for n in names}, key=target_order))


def kernel_scope(keys: Collection[str]) -> frozenset[str]:
    """The base arches whose kernels go to the device wheels of ``keys``: each key and the
    targets whose package it owns (``gfx1250`` → gfx1250, gfx1250-strict)."""
    owned = {target for target, owner in owner_table().owners.items() if owner in keys}
    return frozenset({*keys, *owned})


def check_shard(keys: Sequence[str], present: Collection[str], wheel: str) -> None:
    """Every key of the shard must be a device wheel of the input: one :class:`UsageError`
    naming those that are not and listing the wheel's."""
    missing = [k for k in keys if k not in present]
    if not missing:
        return
    have = ", ".join(sorted(present, key=target_order)) or "none (no device code)"
    raise UsageError(
        f"{TARGETS_FLAG} {', '.join(missing)}: not in {wheel}; its device wheels are for: {have}"
    )
