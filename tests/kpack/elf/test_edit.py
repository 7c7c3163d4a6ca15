"""Pure units: ElfEdit streaming/viewing, and the new-PT_LOAD layout planner."""

from __future__ import annotations

import os
import random
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from kpack.elf import ElfEdit
from kpack.elf._load import MAX_PADDING, Blob, grown_table, plan_load
from kpack.elf.reader import ElfLayout
from kpack.elf.structs import PF_R, PT_INTERP, PT_LOAD, PT_NOTE, PT_PHDR, Ehdr, Phdr, Shdr
from kpack.errors import ElfError


def _apply(original: bytes, patches: list[tuple[int, bytes]], appended: bytes) -> bytes:
    out = bytearray(original)
    for offset, data in patches:
        out[offset : offset + len(data)] = data
    return bytes(out) + appended


@pytest.fixture
def edit(tmp_path: Path) -> tuple[ElfEdit, bytes]:
    rng = random.Random(7)
    original = bytes(rng.randrange(256) for _ in range(10_000))
    src = tmp_path / "src.bin"
    src.write_bytes(original)
    os.chmod(src, 0o750)
    patches = [(0, b"abc"), (4095, b"x" * 100), (9990, b"y" * 10)]
    appended = b"tail" * 50
    expected = _apply(original, patches, appended)
    return ElfEdit(src, len(original), tuple(patches), appended), expected


@pytest.mark.parametrize("chunk", [1, 7, 4096, 1 << 20])
def test_iter_chunks(edit: tuple[ElfEdit, bytes], chunk: int) -> None:
    e, expected = edit
    chunks = list(e.iter_chunks(chunk))
    assert b"".join(chunks) == expected and e.size == len(expected)
    assert all(len(c) <= chunk for c in chunks)


def test_open_is_a_seekable_view(edit: tuple[ElfEdit, bytes]) -> None:
    e, expected = edit
    rng = random.Random(3)
    with e.open() as view:
        assert view.read() == expected
        assert view.seek(0, os.SEEK_END) == len(expected)
        assert view.read(10) == b""
        for _ in range(300):
            start = rng.randrange(len(expected) + 20)
            size = rng.randrange(300)
            view.seek(start)
            assert view.read(size) == expected[start : start + size]
            assert view.tell() == min(start + size, len(expected)) or start > len(expected)
        view.seek(-5, os.SEEK_END)
        assert view.read() == expected[-5:]


def test_write_to_keeps_mode(edit: tuple[ElfEdit, bytes], tmp_path: Path) -> None:
    e, expected = edit
    dest = tmp_path / "out.bin"
    e.write_to(dest)
    assert dest.read_bytes() == expected
    assert stat.S_IMODE(dest.stat().st_mode) == 0o750


@pytest.mark.parametrize(
    "patches",
    [
        ((0, b"ab"), (1, b"c")),  # overlap
        ((10, b"a"), (5, b"b")),  # unsorted
        ((9_999, b"ab"),),  # beyond the original
        ((3, b""),),  # empty
    ],
)
def test_invalid_patches_rejected(tmp_path: Path, patches: tuple[tuple[int, bytes], ...]) -> None:
    with pytest.raises(ElfError, match="invalid edit plan"):
        ElfEdit(tmp_path / "x", 10_000, patches, b"")


# ---- the layout planner on synthetic layouts ----------------------------------------

EHDR = Ehdr(b"\x7fELF\x02\x01\x01" + bytes(9), 3, 62, 1, 0, 64, 0, 0, 64, 56, 0, 64, 0, 0)


def layout(
    phdrs: list[Phdr], *, size: int = 0x3000, shdrs: tuple[Shdr, ...] = (), interp: bool = False
) -> ElfLayout:
    if interp:
        phdrs = [phdrs[0], Phdr(PT_INTERP, PF_R, 0x200, 0x200, 0x200, 0x1C, 0x1C, 1), *phdrs[1:]]
    shoff = size - 64 * len(shdrs) if shdrs else 0
    ehdr = replace(EHDR, e_phnum=len(phdrs), e_shoff=shoff, e_shnum=len(shdrs))
    return ElfLayout(
        name="synthetic",
        size=size,
        ehdr=ehdr,
        phdrs=tuple(phdrs),
        shdrs=shdrs,
        section_names=("",) * len(shdrs),
        dynamic=(),
    )


def load(offset: int, vaddr: int, filesz: int, memsz: int | None = None, flags: int = PF_R) -> Phdr:
    return Phdr(
        PT_LOAD, flags, offset, vaddr, vaddr, filesz, filesz if memsz is None else memsz, 0x1000
    )


def section(offset: int, size: int) -> Shdr:
    return Shdr(1, 1, 2, offset, offset, size, 0, 0, 1, 0)


BASE = [
    Phdr(PT_PHDR, PF_R, 64, 64, 64, 2 * 56, 2 * 56, 8),
    load(0, 0, 0x800),
    load(0x1000, 0x2000, 0x100, 0x5000, flags=6),
]


def test_grows_in_place_when_bytes_after_table_are_free() -> None:
    phdrs = [replace(BASE[0], p_filesz=3 * 56, p_memsz=3 * 56), *BASE[1:]]
    lay = layout(phdrs, shdrs=(Shdr(0, 0, 0, 0, 0, 0, 0, 0, 0, 0), section(64 + 4 * 56, 0x10)))
    plan = plan_load(lay, [Blob(10)], PF_R)
    assert not plan.table_moved and plan.phoff == 64 and plan.phnum == 4
    assert (plan.vaddr, plan.offset) == (0x7000, 0x3000)


def test_moves_table_when_next_section_is_adjacent() -> None:
    phdrs = [replace(BASE[0], p_filesz=3 * 56, p_memsz=3 * 56), *BASE[1:]]
    lay = layout(phdrs, shdrs=(Shdr(0, 0, 0, 0, 0, 0, 0, 0, 0, 0), section(64 + 3 * 56, 0x10)))
    plan = plan_load(lay, [Blob(10, 1), Blob(16, 8)], PF_R)
    assert plan.table_moved and plan.phoff == plan.offset
    assert plan.starts == (4 * 56, 4 * 56 + 16)  # table first, then aligned blobs
    table = grown_table(lay.phdrs, plan)
    assert [p.p_type for p in table] == [PT_PHDR, PT_LOAD, PT_LOAD, PT_LOAD]
    assert table[0].p_offset == plan.offset and table[0].p_vaddr == plan.vaddr
    assert table[0].p_filesz == 4 * 56 and table[3] == plan.new_load()


def test_without_section_headers_the_table_always_moves() -> None:
    plan = plan_load(layout(list(BASE)), [Blob(1)], PF_R)
    assert plan.table_moved


def test_new_load_goes_after_last_load_not_at_end() -> None:
    phdrs = [*BASE, Phdr(PT_NOTE, PF_R, 0x300, 0x300, 0x300, 0x20, 0x20, 4)]
    plan = plan_load(layout(phdrs), [Blob(1)], PF_R)
    types = [p.p_type for p in grown_table(phdrs, plan)]
    assert types == [PT_PHDR, PT_LOAD, PT_LOAD, PT_LOAD, PT_NOTE]


def test_executable_table_is_pinned_even_when_file_is_larger_than_image() -> None:
    non_pie = [replace(p, p_vaddr=p.p_vaddr + 0x400000, p_paddr=p.p_paddr + 0x400000) for p in BASE]
    for phdrs in (list(BASE), non_pie):
        for size in (0x3000, 0x20000):
            lay = layout(phdrs, size=size, interp=True)
            plan = plan_load(lay, [Blob(100)], PF_R)
            first = lay.segments(PT_LOAD)[0]
            assert plan.vaddr - plan.offset == first.p_vaddr - first.p_offset
            assert plan.offset >= size and plan.offset % 0x1000 == 0
            assert plan.vaddr >= max(p.mem_end for p in lay.segments(PT_LOAD))


def test_library_is_not_pinned() -> None:
    plan = plan_load(layout(list(BASE), size=0x1800), [Blob(100)], PF_R)
    assert (plan.offset, plan.vaddr) == (0x2000, 0x7000)


def test_refusals() -> None:
    huge_bss = [*BASE[:2], load(0x1000, 0x2000, 0x100, MAX_PADDING * 2, flags=6)]
    with pytest.raises(ElfError, match="padding"):
        plan_load(layout(huge_bss, interp=True), [Blob(1)], PF_R)
    with pytest.raises(ElfError, match="no PT_LOAD"):
        plan_load(layout([BASE[0]]), [Blob(1)], PF_R)
    top = [*BASE[:2], load(0x1000, (1 << 63) - 0x1000, 0x100)]
    with pytest.raises(ElfError, match="no room"):
        plan_load(layout(top), [Blob(1)], PF_R)


def _random_plan(rng: random.Random, source: Path | ElfEdit, size: int) -> ElfEdit:
    removed = None
    if rng.random() < 0.6:
        lo = rng.randrange(size)
        removed = (lo, rng.randrange(lo + 1, size + 1))
    patches: list[tuple[int, bytes]] = []
    pos = rng.randrange(8)
    while True:
        length = rng.randrange(1, 12)
        if pos + length > size:
            break
        if removed is None or not (pos < removed[1] and removed[0] < pos + length):
            patches.append((pos, rng.randbytes(length)))
        pos += length + rng.randrange(0, size // 4 + 1)
    appended = rng.randbytes(rng.randrange(20))
    return ElfEdit(
        source, size, tuple(patches), appended, removed=removed, zero_fill=rng.randrange(10)
    )


@pytest.mark.parametrize("seed", range(200))
def test_kept_runs_are_exactly_the_unchanged_bytes(tmp_path: Path, seed: int) -> None:
    """Every run names result bytes that are the file's, and every result byte that comes
    from the file unpatched is in a run, through an edit planned on another."""
    rng = random.Random(seed)
    data = os.urandom(rng.randrange(16, 2000))
    path = tmp_path / "f"
    path.write_bytes(data)
    first = _random_plan(rng, path, len(data))
    edit = first if seed % 2 else _random_plan(rng, first, first.size)
    result = b"".join(edit.iter_chunks())
    # where each result byte comes from, tracked independently: the file offset, or None
    origin: list[int | None] = list(range(len(data)))
    for step in [first] if edit is first else [first, edit]:
        patched = {o for off, d in step.patches for o in range(off, off + len(d))}
        kept = [None if i in patched else origin[i] for i in range(step.original_size)]
        if step.removed is not None:
            del kept[step.removed[0] : step.removed[1]]
        origin = kept + [None] * (step.zero_fill + len(step.appended))
    runs = edit.kept_runs()
    covered: list[int | None] = [None] * len(result)
    for at, base, length in runs:
        assert length > 0 and result[at : at + length] == data[base : base + length]
        for i in range(length):
            covered[at + i] = base + i
    assert covered == origin
    assert [r[0] for r in runs] == sorted(r[0] for r in runs)
