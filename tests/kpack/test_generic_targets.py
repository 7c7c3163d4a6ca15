"""The generic-target table (``manifests/generic_targets.yaml``) and its queries."""

from __future__ import annotations

from pathlib import Path

import pytest

from kpack.errors import ManifestError
from kpack.generic_targets import generic_table, load_generic_table
from kpack.targets import looks_generic

#: LLVM AMDGPUUsage, "Generic processors": every generic target and a member of each.
LLVM_FACTS = {
    "gfx9-generic": "gfx906",
    "gfx9-4-generic": "gfx942",
    "gfx10-1-generic": "gfx1012",
    "gfx10-3-generic": "gfx1030",
    "gfx11-generic": "gfx1151",
    "gfx12-generic": "gfx1201",
    "gfx12-5-generic": "gfx1250",
}


def test_the_shipped_table_lists_llvm_generic_targets() -> None:
    table = generic_table()
    assert set(table.members) == set(LLVM_FACTS)
    for generic, member in LLVM_FACTS.items():
        assert table.generic_of(member) == generic
        assert table.is_generic(generic) and table.is_generic(f"{generic}:xnack-")
    # processors LLVM gives no generic target
    assert table.generic_of("gfx908") is None and table.generic_of("gfx90a") is None
    assert table.generic_of("gfx9-4-generic") is None


def test_lookup_order_carries_the_agent_features() -> None:
    table = generic_table()
    assert table.lookup_targets("gfx942:sramecc+:xnack-") == (
        "gfx942:sramecc+:xnack-",
        "gfx9-4-generic:sramecc+:xnack-",
    )
    assert table.lookup_targets("gfx90a:xnack+") == ("gfx90a:xnack+",)


def test_device_keys_and_served_processors() -> None:
    table = generic_table()
    available = ["gfx942", "gfx9-4-generic:xnack-", "gfx11-generic", "gfx90a"]
    assert table.device_keys("gfx942:xnack+", available) == ("gfx942", "gfx9-4-generic")
    assert table.device_keys("gfx950", available) == ("gfx9-4-generic",)
    assert table.device_keys("gfx1030", available) == ()
    assert table.device_keys("gfx11-generic", available) == ("gfx11-generic",)
    served = table.served_processors(available)
    assert {"gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1153"} <= set(served)
    assert "gfx1030" not in served and "gfx11-generic" not in served


def test_unknown_generic_targets_are_named() -> None:
    table = generic_table()
    assert looks_generic("gfx9-7-generic:xnack+") and not looks_generic("gfx942")
    assert table.unknown_generic(["gfx942", "gfx9-7-generic", "gfx11-generic"]) == (
        "gfx9-7-generic",
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("other: {}\n", "missing mapping 'generic_targets'"),
        ("generic_targets: {gfx9-four-generic: [gfx942]}\n", "not an LLVM generic target"),
        ("generic_targets: {gfx9-4-generic: []}\n", "non-empty list"),
        ("generic_targets: {gfx9-4-generic: [gfx94z]}\n", "not a processor"),
        (
            "generic_targets: {gfx9-4-generic: [gfx942], gfx9-generic: [gfx942]}\n",
            "already a member of gfx9-4-generic",
        ),
        ("generic_targets: [\n", "cannot read YAML"),
    ],
)
def test_a_bad_table_is_one_error_naming_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "generic_targets.yaml"
    path.write_text(text)
    with pytest.raises(ManifestError, match=message) as info:
        load_generic_table(path)
    assert str(path) in str(info.value)
