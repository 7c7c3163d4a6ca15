"""Bad input: truncated, garbage, mutated headers. Only ElfError (or None/OTHER) escapes."""

from __future__ import annotations

import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kpack.elf import FileKind, apply_rpath_edit, classify, plan_rpath_edit, scan_elf, verify_elf
from kpack.errors import ElfError
from tests.conftest import require
from tests.kpack.elf.elf_samples import Samples, file_phdrs, samples_once


@pytest.fixture(scope="session")
def samples(tmp_path_factory: pytest.TempPathFactory) -> Samples:
    require(shutil.which("gcc") is not None and shutil.which("g++") is not None, "needs gcc/g++")
    return samples_once(tmp_path_factory)


def _cuts(path: Path) -> list[int]:
    size = path.stat().st_size
    phoff = struct.unpack_from("<Q", path.read_bytes(), 32)[0]
    table_end = phoff + 56 * len(file_phdrs(path))
    fixed = [0, 1, 3, 4, 5, 15, 16, 17, 63, 64, 65, 100, table_end - 1, table_end]
    return sorted({*fixed, size // 4, size // 2, size - 65, size - 1})


@pytest.mark.parametrize("variant", ["gnu", "pie"])
def test_truncated(samples: Samples, tmp_path: Path, variant: str) -> None:
    original = samples.libs["gnu"] if variant == "gnu" else samples.exes["pie"]
    kind = classify(original)
    data = original.read_bytes()
    for cut in _cuts(original):
        path = tmp_path / f"cut{cut}"
        path.write_bytes(data[:cut])
        if cut < 4:
            assert scan_elf(path) is None and classify(path) is FileKind.OTHER
        else:
            with pytest.raises(ElfError, match=str(path)):
                scan_elf(path)
            try:
                assert classify(path) is kind  # classify reads less; it may still succeed
            except ElfError as exc:
                assert str(path) in str(exc)
            if cut < 64:
                with pytest.raises(ElfError):
                    classify(path)
        with pytest.raises(ElfError):
            plan_rpath_edit(path, ("$ORIGIN",))
        if cut < len(data):
            with pytest.raises(ElfError):
                verify_elf(path, name=str(path))


def test_garbage_after_magic(tmp_path: Path) -> None:
    for tail in (bytes(range(256)) * 4, b"\x02\x01" + b"\xff" * 200):
        path = tmp_path / "garbage"
        path.write_bytes(b"\x7fELF" + tail)
        for call in (scan_elf, classify, lambda p: plan_rpath_edit(p, ("x",))):
            with pytest.raises(ElfError, match="garbage"):
                call(path)
        with pytest.raises(ElfError):
            verify_elf(path, name="garbage")
    empty = tmp_path / "empty-header"
    empty.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(57))  # valid ident, all fields zero
    assert classify(empty) is FileKind.OTHER  # ET_NONE
    with pytest.raises(ElfError, match="not x86-64"):
        plan_rpath_edit(empty, ("x",))
    bad_class = tmp_path / "bad-class"
    bad_class.write_bytes(b"\x7fELF\x07\x01" + bytes(100))
    with pytest.raises(ElfError, match="EI_CLASS 7"):
        classify(bad_class)


# ---- property test: mutate header fields; nothing but ElfError may escape --------------

INTERESTING = [0, 1, 8, 0x38, 0x40, 0xFFF, 0x1000, 0x7FFF_FFFF, 0xFFFF_FFFF, 2**63 - 1, 2**64 - 1]


def _regions(data: bytes) -> list[tuple[int, int]]:
    """Byte ranges that hold headers: ELF header, both tables, dynamic, .dynstr start."""
    phoff, shoff = struct.unpack_from("<QQ", data, 32)
    phnum, shnum = struct.unpack_from("<H", data, 56)[0], struct.unpack_from("<H", data, 60)[0]
    regions = [(0, 64), (phoff, phoff + 56 * phnum), (shoff, shoff + 64 * shnum)]
    for i in range(phnum):
        p_type, _, off, _, _, filesz = struct.unpack_from("<IIQQQQ", data, phoff + 56 * i)
        if p_type == 2:
            regions.append((off, off + filesz))
    return regions


def _mutate(data: bytes, picks: list[tuple[int, int, int, int]]) -> bytes:
    out = bytearray(data)
    regions = _regions(data)
    for region_pick, position, width_pick, value in picks:
        lo, hi = regions[region_pick % len(regions)]
        width = (1, 2, 4, 8)[width_pick % 4]
        offset = lo + (position % max(hi - lo - width, 1))
        offset -= offset % width
        mask = (1 << (8 * width)) - 1
        out[offset : offset + width] = (value & mask).to_bytes(width, "little")
    return bytes(out)


def _only_elf_errors(call: Callable[[], object]) -> object:
    try:
        return call()
    except ElfError:
        return None


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    variant=st.sampled_from(["gnu", "gnu-runpath", "gnu-rpath-long", "lld", "pie"]),
    picks=st.lists(
        st.tuples(
            st.integers(0, 7),
            st.integers(0, 1 << 16),
            st.integers(0, 3),
            st.one_of(st.sampled_from(INTERESTING), st.integers(0, 2**64 - 1)),
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_mutated_headers_raise_only_elf_error(
    samples: Samples,
    tmp_path_factory: pytest.TempPathFactory,
    variant: str,
    picks: list[tuple[int, int, int, int]],
) -> None:
    source = samples.exes["pie"] if variant == "pie" else samples.libs.get(variant)
    if source is None:
        return
    work = tmp_path_factory.mktemp("mutated")
    path = work / "f.so"
    path.write_bytes(_mutate(source.read_bytes(), picks))
    _only_elf_errors(lambda: classify(path))
    _only_elf_errors(lambda: scan_elf(path))
    _only_elf_errors(lambda: verify_elf(path, name="mutated"))
    edit = _only_elf_errors(lambda: plan_rpath_edit(path, ("$ORIGIN", "/some/long/dir" * 3)))
    if edit is not None:
        dest = work / "out.so"
        if _only_elf_errors(lambda: apply_rpath_edit(path, ("$ORIGIN", "/x" * 40), dest)):
            verify_elf(dest, name="applied")  # anything written must verify
    shutil.rmtree(work)
