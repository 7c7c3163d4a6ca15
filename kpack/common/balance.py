"""Items spread over at most N shards by cost: the balancing of every shard plan (the
builder's ``--print-shards``, ``kpack split-wheel --print-shards``).

Greedy, largest first: each item goes to the shard with the least cost so far (ties: the
lower shard number; items of equal cost by name), so the plan depends on the names and
costs alone. Every shard also pays ``fixed`` (what each one reads whatever its items).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["balance"]


def balance(costs: Mapping[str, int], shards: int, *, fixed: int = 0) -> list[list[str]]:
    """The items of ``costs`` over at most ``shards`` shards (never an empty one), each
    shard's items sorted by name."""
    order = sorted(costs, key=lambda item: (-costs[item], item))
    loads: list[tuple[int, list[str]]] = [(fixed, []) for _ in range(min(shards, len(order)))]
    for item in order:
        k = min(range(len(loads)), key=lambda j: (loads[j][0], j))
        load, owned = loads[k]
        loads[k] = (load + costs[item], [*owned, item])
    return [sorted(owned) for _, owned in loads]
