"""Shard balancing: largest first, each to the least loaded shard."""

from __future__ import annotations

import itertools

from kpack.common.balance import balance


def test_largest_first_to_the_least_loaded() -> None:
    costs = {"gfx942": 90, "gfx90a": 60, "gfx1100": 50, "gfx1201": 40, "gfx908": 10}
    assert balance(costs, 2) == [["gfx1201", "gfx942"], ["gfx1100", "gfx908", "gfx90a"]]


def test_never_more_shards_than_items_nor_an_empty_one() -> None:
    assert balance({"a": 1, "b": 2}, 5) == [["b"], ["a"]]
    assert balance({}, 3) == []
    assert balance({"a": 1, "b": 2, "c": 3}, 1) == [["a", "b", "c"]]


def test_equal_costs_are_placed_by_name_whatever_the_input_order() -> None:
    names = ["d", "a", "c", "b"]
    plans = {
        tuple(map(tuple, balance(dict.fromkeys(order, 7), 2)))
        for order in itertools.permutations(names)
    }
    assert plans == {(("a", "c"), ("b", "d"))}


def test_the_greedy_bound_holds() -> None:
    """Largest-first greedy: no shard exceeds the mean plus the largest item."""
    costs = {f"t{i}": (i * 7919) % 1000 + 1 for i in range(40)}
    shards = balance(costs, 6, fixed=5)
    loads = [sum(costs[t] for t in s) for s in shards]
    assert sorted(t for s in shards for t in s) == sorted(costs)
    assert max(loads) <= sum(costs.values()) / 6 + max(costs.values())
