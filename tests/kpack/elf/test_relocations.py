"""The dynamic relocation reader against ``readelf -rW``, on real and compiled libraries."""

from __future__ import annotations

import itertools
import re
import struct
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from kpack.elf.reader import open_reader, read_layout
from kpack.elf.relocations import Rela, Relocations, _columns, _disjoint, read_relocations
from kpack.errors import ElfError
from tests.kpack.elf.elf_samples import Samples, samples_once
from tests.pypi_inputs import JAX_PLUGIN, fat_members, pypi_wheel

_TABLE = re.compile(r"^Relocation section '(?P<name>[^']+)' at offset 0x(?P<offset>[0-9a-f]+)")
_ENTRY = re.compile(
    r"^(?P<offset>[0-9a-f]{16})\s+(?P<info>[0-9a-f]{16})\s+(?P<type>\S+)\s*(?P<rest>.*)$"
)


def _readelf_rela(path: Path) -> tuple[list[tuple[int, int, int, int]], dict[str, int]]:
    """(r_offset, type, symbol, addend) of every RELA entry as readelf prints them, in file
    order, and each RELA section's file offset."""
    text = subprocess.run(
        ["readelf", "-rW", str(path)], capture_output=True, text=True, check=True
    ).stdout
    entries: list[tuple[int, int, int, int]] = []
    starts: dict[str, int] = {}
    in_rela = False
    for line in text.splitlines():
        if table := _TABLE.match(line):
            in_rela = table["name"].startswith(".rela")
            if in_rela:
                starts[table["name"]] = int(table["offset"], 16)
            continue
        entry = _ENTRY.match(line)
        if not in_rela or entry is None:
            continue
        info = int(entry["info"], 16)
        rest = entry["rest"].strip()
        # "<value> <name> + <addend>" / "... - <addend>" against a symbol, else "<addend>"
        if sign := re.search(r" ([+-]) ([0-9a-f]+)$", rest):
            addend = int(sign[2], 16) * (-1 if sign[1] == "-" else 1)
        else:
            addend = int(rest or "0", 16)
        entries.append((int(entry["offset"], 16), info & 0xFFFFFFFF, info >> 32, addend))
    return entries, starts


def _ours(path: Path) -> Relocations:
    with open_reader(path) as reader:
        return read_relocations(reader, read_layout(reader))


def _check_against_readelf(path: Path) -> int:
    expected, starts = _readelf_rela(path)
    relocs = _ours(path)
    got = [relocs.entry(i) for i in range(len(relocs))]
    assert [(r.r_offset, r.r_type, r.r_sym, r.r_addend) for r in got] == expected
    # every table starts where readelf says, and its entries step by 24 bytes
    firsts = {r.file_offset for r in got}
    for name, offset in starts.items():
        assert offset in firsts, name
    for before, after in itertools.pairwise(got):
        assert after.file_offset in (before.file_offset + 24, *starts.values())
    # find() agrees with a walk over the entries (the last one for a place wins)
    wanted = [r.r_offset for r in got[:: max(1, len(got) // 50)]] + [0, 1]
    last = {r.r_offset: r for r in got}
    assert relocs.find(wanted) == {w: last[w] for w in wanted if w in last}
    return len(got)


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> Samples:
    return samples_once(tmp_path_factory)


def test_compiled_libraries_and_executables_match_readelf(samples: Samples) -> None:
    checked = 0
    for path in [*samples.libs.values(), *samples.exes.values(), *samples.throwers.values()]:
        checked += _check_against_readelf(path) > 0
    assert checked >= 5


@pytest.mark.real
def test_debian_rocrand_matches_readelf(debian_package: Callable[[str], Path]) -> None:
    lib = debian_package("librocrand1") / "usr/lib/x86_64-linux-gnu/librocrand.so.1.1"
    assert _check_against_readelf(lib) > 200


@pytest.mark.real
def test_rocm7_plugin_libraries_match_readelf(tmp_path: Path) -> None:
    members = fat_members(pypi_wheel(JAX_PLUGIN), tmp_path)
    assert members
    assert sum(_check_against_readelf(m) for m in members) > 1000


def _raw(*entries: tuple[int, int, int]) -> bytes:
    return b"".join(struct.pack("<QQq", *e) for e in entries)


def test_jmprel_inside_rela_is_read_once_in_file_order() -> None:
    a, b, c = (0x1000, 8, 0x10), (0x1008, (1 << 32) | 7, 0), (0x1010, 8, -8)
    rela = (0x400, _raw(a, b, c))  # DT_RELA covers all three
    jmprel = (0x418, _raw(b))  # DT_JMPREL: the middle one, inside it
    relocs = _columns(_disjoint([rela, jmprel], "lib"), ())
    assert [relocs.entry(i) for i in range(len(relocs))] == [
        Rela(0x400, 0x1000, 8, 0, 0x10),
        Rela(0x418, 0x1008, 7, 1, 0),
        Rela(0x430, 0x1010, 8, 0, -8),
    ]


def test_tables_overlapping_at_the_end_and_apart() -> None:
    a, b, c, d = ((0x2000 + 8 * i, 8, i) for i in range(4))
    overlapping = _disjoint([(0x430, _raw(c, d)), (0x400, _raw(a, b, c))], "lib")
    relocs = _columns(overlapping, ())
    assert [relocs.entry(i).file_offset for i in range(len(relocs))] == [0x400, 0x418, 0x430, 0x448]
    assert [relocs.entry(i).r_addend for i in range(len(relocs))] == [0, 1, 2, 3]
    apart = _columns(_disjoint([(0x400, _raw(a)), (0x800, _raw(b))], "lib"), ())
    assert [apart.entry(i).file_offset for i in range(2)] == [0x400, 0x800]


def test_tables_overlapping_out_of_step_are_refused() -> None:
    with pytest.raises(ElfError, match="out of step"):
        _disjoint([(0x400, _raw((0, 8, 0), (8, 8, 0))), (0x408, _raw((8, 8, 0)))], "lib.so")
