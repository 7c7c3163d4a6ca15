"""The one sort key of every list of targets a tool shows (kpack.targets.target_order):
GFX versions as numbers, variants after their processor, families, bundle keys and generic
targets after the processors they cover."""

from __future__ import annotations

import random

import pytest

from kpack.generic_targets import generic_table
from kpack.targets import target_order

#: the natural order, written out by hand
NATURAL = [
    "gfx803",
    "gfx900",
    "gfx906",
    "gfx908",
    "gfx90a",
    "gfx90a:xnack+",
    "gfx90c",
    "gfx940",
    "gfx942",
    "gfx942:sramecc+:xnack-",
    "gfx94X-dcgpu",
    "gfx9_4",
    "gfx9-4-generic",
    "gfx950",
    "gfx9",
    "gfx9-generic",
    "gfx1010",
    "gfx1030",
    "gfx103X-all",
    "gfx10-3-generic",
    "gfx1100",
    "gfx1101",
    "gfx110X-all",
    "gfx1151",
    "gfx11-generic",
    "gfx1200",
    "gfx1201",
    "gfx1250",
    "gfx1250-strict",
    "gfx12-5-generic",
    "gfx12-generic",
    "not-a-target",
]


def test_targets_sort_naturally() -> None:
    shuffled = NATURAL[:]
    random.Random(33).shuffle(shuffled)
    assert sorted(shuffled, key=target_order) == NATURAL


@pytest.mark.parametrize(("lower", "higher"), [("gfx803", "gfx1030"), ("gfx1030", "gfx1100")])
def test_the_issue_s_examples(lower: str, higher: str) -> None:
    assert target_order(lower) < target_order(higher)


def test_string_order_was_wrong() -> None:
    assert sorted(["gfx803", "gfx1030"]) == ["gfx1030", "gfx803"]
    assert sorted(["gfx803", "gfx1030"], key=target_order) == ["gfx803", "gfx1030"]


def test_served_processors_are_listed_in_that_order() -> None:
    served = generic_table().served_processors(["gfx11-generic", "gfx803", "gfx1030", "gfx90a"])
    assert list(served) == sorted(served, key=target_order)
    assert served.index("gfx803") < served.index("gfx90a") < served.index("gfx1030")
