"""The pre-write verifier catches a broken plan: faults injected into the planner.

Each test breaks one step of the layout (by patching a private helper) and expects
:class:`TransformError` naming the problem, with nothing written.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import kpack.transform._cut as cut_mod
import kpack.transform._layout as layout_mod
import kpack.transform._sections as sections_mod
from kpack.bundle import make_plain_bundle
from kpack.elf._load import Patch
from kpack.elf.relocations import Rela
from kpack.elf.structs import PAGE
from kpack.errors import TransformError
from kpack.transform import transform_binary
from kpack.transform._scan import FatLayout, Pointer
from tests.conftest import require
from tests.kpack.transform_fixtures import middle_note_script, synthetic

NAME = "lib/libv.so"
PATHS = ("../.kpack/v_@GFXARCH@.kpack",)


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    require(shutil.which("gcc") is not None, "needs gcc")
    root = tmp_path_factory.mktemp("verify")
    bundle = make_plain_bundle([("hipv4-amdgcn-amd-amdhsa--gfx900", b"\x7fELF" + bytes(500))])
    body = bundle + bytes(-len(bundle) % PAGE)
    script = middle_note_script(root, ["-shared", "-fPIC"])
    return {
        "plain": synthetic(root, "plain", body + bytes(3 * PAGE), [0, 0]),
        "aligned": synthetic(root, "aligned", body + bytes(2 * PAGE), [0]),
        "order": synthetic(root, "order", body + bytes(PAGE), [0], flags=[f"-Wl,-T,{script}"]),
    }


def _refused(lib: Path, tmp_path: Path, match: str) -> None:
    out = tmp_path / "out.so"
    with pytest.raises(TransformError, match=match) as err:
        transform_binary(lib, out, kernel_name=NAME, search_paths=PATHS)
    assert not out.exists() and not list(tmp_path.glob(".*.tmp"))
    assert "failed verification" in str(err.value) or "structurally invalid" in str(err.value)


def test_wrong_reserved1_is_caught(
    libs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = layout_mod._wrapper_patches

    def shifted(fat: FatLayout, pointers: Sequence[Pointer], marker: int) -> list[Patch]:
        patches = real(fat, pointers, marker)
        last = max(i for i, (_, data) in enumerate(patches) if data.startswith(b"HIPK"))
        offset, data = patches[last]
        patches[last] = (offset, data[:16] + bytes([9]) + data[17:])
        return patches

    monkeypatch.setattr(layout_mod, "_wrapper_patches", shifted)
    _refused(libs["plain"], tmp_path, "wrapper 1 reads")


def test_rela_entry_left_pointing_into_the_section_is_caught(
    libs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = layout_mod._wrapper_patches

    def without_rela(fat: FatLayout, pointers: Sequence[Pointer], marker: int) -> list[Patch]:
        stripped = [Pointer(p.index, p.kind, p.value, None) for p in pointers]
        return real(fat, stripped, marker)

    monkeypatch.setattr(layout_mod, "_wrapper_patches", without_rela)
    _refused(libs["plain"], tmp_path, r"still points into \.hip_fatbin")


def test_rela_with_wrong_addend_is_caught(
    libs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = layout_mod._wrapper_patches

    def off_by_eight(fat: FatLayout, pointers: Sequence[Pointer], marker: int) -> list[Patch]:
        patches = real(fat, pointers, marker)
        rela_offsets = {p.rela.file_offset for p in pointers if p.rela is not None}
        out = []
        for offset, data in patches:
            if offset in rela_offsets:
                r_offset = int.from_bytes(data[:8], "little")
                data = Rela(offset, r_offset, 8, 0, marker + 8).pack()
            out.append((offset, data))
        return out

    monkeypatch.setattr(layout_mod, "_wrapper_patches", off_by_eight)
    _refused(libs["plain"], tmp_path, "RELA entry is")


def test_nobits_collision_at_a_page_aligned_end_is_caught(
    libs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the keep-the-last-page rule two PT_LOADs would share a p_offset."""

    def naive(fat: FatLayout, container: int) -> cut_mod.Cut | None:
        shdr = fat.fatbin_shdr
        start = -(-shdr.sh_offset // PAGE) * PAGE
        end = (shdr.sh_offset + shdr.sh_size) // PAGE * PAGE
        return cut_mod.Cut(start, end, container)

    monkeypatch.setattr(layout_mod, "plan_cut", naive)
    _refused(libs["aligned"], tmp_path, "share p_offset")


def test_moved_section_headers_are_caught(
    libs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two old headers swapped in the written table: indexes moved."""
    real = sections_mod.SectionTable.build

    def swapped(*args: Any, **kwargs: Any) -> sections_mod.SectionTable:
        table = real(*args, **kwargs)
        headers = list(table.headers)
        headers[1], headers[2] = headers[2], headers[1]
        return replace(table, headers=tuple(headers))

    monkeypatch.setattr(sections_mod.SectionTable, "build", swapped)
    _refused(libs["order"], tmp_path, r"section 1 \('[^']+'\): header fields changed")


def test_a_changed_symbol_table_is_caught(
    libs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A renumbered ``st_shndx`` in ``.dynsym`` (what the alloc-first reorder did)."""
    real = layout_mod._wrapper_patches

    def renumbered(fat: FatLayout, pointers: Sequence[Pointer], marker: int) -> list[Patch]:
        index = fat.layout.section_index(".dynsym")
        assert index is not None
        dynsym = fat.layout.shdrs[index]
        return [*real(fat, pointers, marker), (dynsym.sh_offset + 24 + 6, b"\x07\x00")]

    monkeypatch.setattr(layout_mod, "_wrapper_patches", renumbered)
    _refused(libs["order"], tmp_path, r"\.dynsym symbol 1 changed")


def test_wrong_cut_offsets_are_caught(
    libs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sections after the cut not moved down: their bytes no longer match their address."""
    monkeypatch.setattr(layout_mod, "cut_shdrs", lambda fat, cut: list(fat.layout.shdrs))
    _refused(libs["plain"], tmp_path, "maps to file offset|content moved wrongly")
