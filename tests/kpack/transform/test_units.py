"""Pure units behind the transform: ElfEdit with a removed range and holes, RELR decoding,
the cut arithmetic, the marker encoding and the spare-slot / pinning planner options."""

from __future__ import annotations

import os
import random
import struct
from dataclasses import replace
from pathlib import Path

import msgpack
import pytest

from kpack.elf import ElfEdit
from kpack.elf._load import Blob, plan_load
from kpack.elf.reader import ElfLayout
from kpack.elf.relocations import decode_relr
from kpack.elf.structs import PF_R, PT_INTERP, PT_LOAD, Ehdr, Phdr
from kpack.errors import ElfError
from kpack.transform import encode_marker
from kpack.transform._cut import Cut

# ---- ElfEdit: removed range, zero fill ----------------------------------------------


def _expected(
    original: bytes,
    patches: list[tuple[int, bytes]],
    removed: tuple[int, int] | None,
    zero_fill: int,
    appended: bytes,
) -> bytes:
    out = bytearray(original)
    for offset, data in patches:
        out[offset : offset + len(data)] = data
    if removed is not None:
        del out[removed[0] : removed[1]]
    return bytes(out) + bytes(zero_fill) + appended


@pytest.fixture
def source(tmp_path: Path) -> tuple[Path, bytes]:
    rng = random.Random(11)
    data = bytes(rng.randrange(256) for _ in range(300_000))
    path = tmp_path / "src.bin"
    path.write_bytes(data)
    os.chmod(path, 0o751)
    return path, data


CASES = [
    ([(0, b"head"), (250_000, b"tail")], (8192, 200_704), 0, b"new" * 10),
    ([(5, b"x" * 10)], (4096, 8192), 300_000, b"after a hole"),
    ([], None, 5, b"z"),
    ([(299_990, b"0123456789")], (0, 4096), 0, b""),
]


@pytest.mark.parametrize(("patches", "removed", "zero_fill", "appended"), CASES)
def test_removed_range_and_zero_fill(
    source: tuple[Path, bytes],
    tmp_path: Path,
    patches: list[tuple[int, bytes]],
    removed: tuple[int, int] | None,
    zero_fill: int,
    appended: bytes,
) -> None:
    path, data = source
    edit = ElfEdit(path, len(data), tuple(patches), appended, removed=removed, zero_fill=zero_fill)
    want = _expected(data, patches, removed, zero_fill, appended)
    assert edit.size == len(want)
    for chunk in (1 << 20, 4097, 333):
        assert b"".join(edit.iter_chunks(chunk)) == want
    rng = random.Random(5)
    with edit.open() as view:
        for _ in range(200):
            start, size = rng.randrange(len(want) + 10), rng.randrange(9000)
            view.seek(start)
            assert view.read(size) == want[start : start + size]
    dest = tmp_path / "out.bin"
    edit.write_to(dest)
    assert dest.read_bytes() == want
    assert dest.stat().st_mode & 0o777 == 0o751
    if removed is not None:
        assert edit.result_offset(removed[1]) == removed[0]
        if removed[0]:
            assert edit.result_offset(removed[0] - 1) == removed[0] - 1


def test_long_zero_fill_is_written_as_a_hole(source: tuple[Path, bytes], tmp_path: Path) -> None:
    path, data = source
    edit = ElfEdit(path, len(data), (), b"end", zero_fill=64 << 20)
    dest = tmp_path / "sparse.bin"
    edit.write_to(dest)
    assert dest.stat().st_size == len(data) + (64 << 20) + 3
    assert dest.stat().st_blocks * 512 < 8 << 20  # the 64 MiB of zeros take no blocks
    with dest.open("rb") as f:
        f.seek(len(data) + (32 << 20))
        assert f.read(16) == bytes(16)
        f.seek(-3, os.SEEK_END)
        assert f.read() == b"end"


@pytest.mark.parametrize(
    ("patches", "removed", "zero_fill", "match"),
    [
        (((100, b"ab"),), (50, 101), 0, "lies in the removed range"),
        (((100, b"ab"),), (101, 102), 0, "lies in the removed range"),
        ((), (10, 10), 0, "empty"),
        ((), (10, 400_000), 0, "beyond"),
        ((), None, -1, "zero_fill"),
    ],
)
def test_invalid_removals_rejected(
    source: tuple[Path, bytes],
    patches: tuple[tuple[int, bytes], ...],
    removed: tuple[int, int] | None,
    zero_fill: int,
    match: str,
) -> None:
    path, data = source
    with pytest.raises(ElfError, match=match):
        ElfEdit(path, len(data), patches, b"", removed=removed, zero_fill=zero_fill)


def test_result_offset_inside_removed_range_is_an_error(source: tuple[Path, bytes]) -> None:
    path, data = source
    edit = ElfEdit(path, len(data), (), b"", removed=(4096, 8192))
    assert edit.result_offset(100) == 100 and edit.result_offset(9000) == 9000 - 4096
    with pytest.raises(ElfError, match="removed range"):
        edit.result_offset(5000)


def test_replace_source_is_opt_in(source: tuple[Path, bytes]) -> None:
    path, data = source
    edit = ElfEdit(path, len(data), ((0, b"X"),), b"")
    with pytest.raises(ElfError, match="over its own source"):
        edit.write_to(path)
    edit.write_to(path, replace_source=True)
    assert path.read_bytes() == b"X" + data[1:]


# ---- RELR ----------------------------------------------------------------------------


def test_decode_relr() -> None:
    words = [0x1000, (1 << 1) | (1 << 3) | 1, (1 << 63) | 1, 0x9000]
    raw = struct.pack(f"<{len(words)}Q", *words)
    assert decode_relr(raw) == [0x1000, 0x1008, 0x1018, 0x1008 + 63 * 8 + 62 * 8, 0x9000]
    with pytest.raises(ElfError, match="starts with a bitmap"):
        decode_relr(struct.pack("<Q", 3))
    assert decode_relr(b"") == []


# ---- the cut -------------------------------------------------------------------------


def test_cut_shift() -> None:
    cut = Cut(0x3000, 0x5000, 2)
    assert cut.size == 0x2000
    assert [cut.shift(o) for o in (0, 0x3000, 0x3001, 0x4FFF, 0x5000, 0x9000)] == [
        0,
        0x3000,
        None,
        None,
        0x3000,
        0x7000,
    ]


# ---- the marker ----------------------------------------------------------------------


def test_marker_encoding_matches_the_spec_example() -> None:
    path = "../.kpack/blas_lib_@GFXARCH@.kpack"
    raw = encode_marker("math-libs/BLAS/rocBLAS/stage/lib/librocblas.so.5.1", [path])
    head = b"\x82\xb2kpack_search_paths\x91\xd9\x22" + path.encode()
    assert raw.startswith(head)
    assert msgpack.unpackb(raw) == {
        "kpack_search_paths": [path],
        "kernel_name": "math-libs/BLAS/rocBLAS/stage/lib/librocblas.so.5.1",
    }
    name = b"math-libs/BLAS/rocBLAS/stage/lib/librocblas.so.5.1"
    assert raw == head + b"\xabkernel_name\xd9\x32" + name


# ---- planner options used by the transform -------------------------------------------

EHDR = Ehdr(b"\x7fELF\x02\x01\x01" + bytes(9), 3, 62, 1, 0, 64, 0, 0, 64, 56, 0, 64, 0, 0)


def _layout(phdrs: list[Phdr], size: int, interp: bool = False) -> ElfLayout:
    if interp:
        phdrs = [Phdr(PT_INTERP, PF_R, 0x200, 0x200, 0x200, 0x1C, 0x1C, 1), *phdrs]
    ehdr = replace(EHDR, e_phnum=len(phdrs))
    return ElfLayout(
        name="synthetic",
        size=size,
        ehdr=ehdr,
        phdrs=tuple(phdrs),
        shdrs=(),
        section_names=(),
        dynamic=(),
    )


def _load(offset: int, vaddr: int, size: int, memsz: int | None = None) -> Phdr:
    return Phdr(PT_LOAD, PF_R, offset, vaddr, vaddr, size, memsz or size, 0x1000)


def test_spare_slots_round_the_moved_table_up_to_16() -> None:
    lay = _layout([_load(0, 0, 0x800), _load(0x1000, 0x1000, 0x100)], 0x2000)
    plan = plan_load(lay, [Blob(10)], PF_R, spare_slots=True)
    assert plan.table_moved and plan.phnum == 3 and plan.starts == (16 * 56,)
    assert plan_load(lay, [Blob(10)], PF_R).starts == (3 * 56,)


def test_library_pinned_only_when_padding_is_small() -> None:
    # image ends at 0x5000, file at 0x4000: one page of padding pins it
    lay = _layout([_load(0, 0, 0x800), _load(0x1000, 0x1000, 0x100, 0x3F00)], 0x3800)
    assert plan_load(lay, [Blob(1)], PF_R).offset == 0x4000  # default: never
    pinned = plan_load(lay, [Blob(1)], PF_R, pin_padding=0x1000)
    assert pinned.offset == pinned.vaddr == 0x5000
    unpinned = plan_load(lay, [Blob(1)], PF_R, pin_padding=0xFFF)
    assert (unpinned.offset, unpinned.vaddr) == (0x4000, 0x5000)


def test_executable_padding_limit_can_be_lifted() -> None:
    huge = [_load(0, 0, 0x800), _load(0x1000, 0x1000, 0x100, 1 << 32)]
    lay = _layout(huge, 0x2000, interp=True)
    with pytest.raises(ElfError, match="padding"):
        plan_load(lay, [Blob(1)], PF_R)
    plan = plan_load(lay, [Blob(1)], PF_R, max_padding=None)
    assert plan.offset == plan.vaddr >= (1 << 32)
