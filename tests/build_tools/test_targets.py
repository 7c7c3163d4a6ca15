from __future__ import annotations

import re
from pathlib import Path

import pytest

from build_tools.targets import (
    base_target,
    is_isa_target,
    load_family_table,
    parse_family_list,
    parse_targets_cmake,
)
from kpack.errors import ManifestError, UsageError
from kpack.targets import target_order

# The family table from the spec (artifact-tree.md §9), written out independently.
SPEC_TABLE = {
    "dgpu-all": "gfx900 gfx906 gfx1010 gfx1011 gfx1012 gfx1030 gfx1031 gfx1032 gfx1034 "
    "gfx1100 gfx1101 gfx1102 gfx1200 gfx1201",
    "igpu-all": "gfx90c gfx1033 gfx1035 gfx1036 gfx1103 gfx1150 gfx1151 gfx1152 gfx1153",
    "dcgpu-all": "gfx908 gfx90a gfx942 gfx950 gfx1250",
    "gfx900-dgpu": "gfx900",
    "gfx906-dgpu": "gfx906",
    "gfx90c-igpu": "gfx90c",
    "gfx908-dcgpu": "gfx908",
    "gfx90a-dcgpu": "gfx90a",
    "gfx94X-all": "gfx942",
    "gfx94X-dcgpu": "gfx942",
    "gfx950-all": "gfx950",
    "gfx950-dcgpu": "gfx950",
    "gfx101X-all": "gfx1010 gfx1011 gfx1012",
    "gfx101X-dgpu": "gfx1010 gfx1011 gfx1012",
    "gfx103X-all": "gfx1030 gfx1031 gfx1032 gfx1033 gfx1034 gfx1035 gfx1036",
    "gfx103X-dgpu": "gfx1030 gfx1031 gfx1032 gfx1034",
    "gfx103X-igpu": "gfx1033 gfx1035 gfx1036",
    "gfx110X-all": "gfx1100 gfx1101 gfx1102 gfx1103",
    "gfx110X-dgpu": "gfx1100 gfx1101 gfx1102",
    "gfx110X-igpu": "gfx1103",
    "gfx115X-all": "gfx1150 gfx1151 gfx1152 gfx1153",
    "gfx115X-igpu": "gfx1150 gfx1151 gfx1152 gfx1153",
    "gfx120X-all": "gfx1200 gfx1201",
    "gfx125X-all": "gfx1250",
    "gfx125X-dcgpu": "gfx1250",
}


def test_shipped_table_matches_spec() -> None:
    table = load_family_table()
    assert set(table.families) == set(SPEC_TABLE)
    for family, targets in SPEC_TABLE.items():
        assert set(table.expand(family)) == set(targets.split()), family


def test_single_target_is_its_own_family_and_unknown_fails() -> None:
    table = load_family_table()
    assert table.expand("gfx1151") == ("gfx1151",)
    with pytest.raises(UsageError, match="gfx120X-dgpu"):
        table.expand("gfx120X-dgpu")  # there is no -dgpu variant
    with pytest.raises(UsageError):
        table.expand("gfx9999")


def test_family_list_separators_and_blank() -> None:
    assert parse_family_list(" gfx94X-dcgpu;gfx110X-all , gfx1151") == (
        "gfx94X-dcgpu",
        "gfx110X-all",
        "gfx1151",
    )
    assert parse_family_list("   ") == ()
    assert parse_family_list(None) == ()


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("gfx942", True),
        ("gfx942:xnack+", True),
        ("gfx942:sramecc+:xnack-", True),
        ("gfx90a", True),
        ("gfx94X-dcgpu", False),
        ("dcgpu-all", False),
        ("gfx942:xnack", False),
        ("generic", False),
    ],
)
def test_isa_target_ids(text: str, ok: bool) -> None:
    assert is_isa_target(text) is ok


def test_base_target() -> None:
    assert base_target("gfx942:xnack+") == "gfx942"
    assert base_target("gfx1100") == "gfx1100"


def test_targets_cmake_parser(tmp_path: Path) -> None:
    cmake = tmp_path / "t.cmake"
    cmake.write_text(
        "function(therock_add_amdgpu_target gfx_target product_name)\nendfunction()\n"
        'therock_add_amdgpu_target(gfx906 "Radeon VII (MI50)" FAMILY dgpu-all gfx90X-all\n'
        "  EXCLUDE_TARGET_PROJECTS\n    hipBLASLt # https://example/1062\n)\n"
        'therock_add_amdgpu_target(gfx90a "MI210/250" FAMILY gfx90X-all dcgpu-all)\n'
        '# therock_add_amdgpu_target(gfx1 "commented" FAMILY nope)\n'
        'therock_add_amdgpu_target(gfx1035 "iGPU" igpu-all FAMILY gfx103X-all)\n'
    )
    table = parse_targets_cmake(cmake)
    assert table.expand("gfx90X-all") == ("gfx906", "gfx90a")
    assert table.expand("dgpu-all") == ("gfx906",)
    assert table.expand("gfx90a") == ("gfx90a",)
    assert "hipBLASLt" not in table.families and "nope" not in table.families
    # like cmake_parse_arguments, a name before FAMILY is not a family
    assert "igpu-all" not in table.families
    assert table.expand("gfx103X-all") == ("gfx1035",)


def test_targets_cmake_read_as_cmake_reads_it(tmp_path: Path) -> None:
    """What CMake comments out stays out; a ``#`` or ``)`` inside quotes is text; the command
    name matches in any case."""
    cmake = tmp_path / "t.cmake"
    cmake.write_text(
        '#[[\ntherock_add_amdgpu_target(gfx900 "bracket comment" FAMILY hidden)\n]]\n'
        'message("# ) therock_add_amdgpu_target(gfx901 x FAMILY hidden)")\n'
        'THEROCK_ADD_AMDGPU_TARGET(gfx906 "Radeon \\"VII\\" #1 (x)" FAMILY gfx90X-all)\n'
        'therock_add_amdgpu_target(gfx90a [=[MI210 ]] ")]=] FAMILY "gfx90X-all")\n'
    )
    assert dict(parse_targets_cmake(cmake).families) == {
        "gfx906": ("gfx906",),
        "gfx90X-all": ("gfx906", "gfx90a"),
        "gfx90a": ("gfx90a",),
    }


def test_a_target_with_a_trailing_newline(tmp_path: Path) -> None:
    bad = tmp_path / "t.yaml"
    bad.write_text('families:\n  x: ["gfx942\\n"]\n')
    with pytest.raises(ManifestError, match=r"families\.x: invalid gfx target 'gfx942\\n'"):
        load_family_table(bad)
    table = load_family_table()
    with pytest.raises(UsageError, match=r"unknown GPU family 'gfx942\\n'"):
        table.expand("gfx942\n")


def test_an_unknown_family_is_shown_cut() -> None:
    with pytest.raises(UsageError) as info:
        load_family_table().expand("x" * 100_000)
    lines = str(info.value).splitlines()
    assert lines[0] == f"unknown GPU family '{'x' * 77}...'; the valid ones:"
    assert all(len(line) <= 100 for line in lines[1:]), lines


def test_an_unknown_family_lists_the_valid_ones_not_the_table_path() -> None:
    """Every family and single target of the table, on short lines below the error;
    a near miss is named first."""
    table = load_family_table()
    with pytest.raises(UsageError) as info:
        table.expand_all(["gfx94X-dcgpu", "gfx94x-dcgpu"], flag="--linux-amdgpu-families")
    text = str(info.value)
    first, *rest = text.splitlines()
    assert first == (
        "unknown GPU family 'gfx94x-dcgpu' in --linux-amdgpu-families "
        "(did you mean gfx94X-dcgpu or gfx950-dcgpu?); the valid ones:"
    )
    assert "targets.yaml" not in text and all(len(line) <= 100 for line in rest)
    listed = set(re.findall(r"[\w-]+", " ".join(line.split(":", 1)[-1] for line in rest)))
    everything = set(table.families) | {t for ts in table.families.values() for t in ts}
    assert listed == everything
    assert rest[0].startswith(f"  families ({len(table.families)}): gfx90")  # natural order
    shown = [n.strip(",") for line in rest for n in line.split(":", 1)[-1].split()]
    families = [
        n for n in shown if n in table.families and n not in everything - set(table.families)
    ]
    assert families == sorted(families, key=target_order)


def test_bad_yaml_table(tmp_path: Path) -> None:
    bad = tmp_path / "t.yaml"
    bad.write_text("families:\n  x: [notgfx]\n")
    with pytest.raises(ManifestError, match=r"t\.yaml.*families\.x"):
        load_family_table(bad)
