"""kpack.artifact.facts: a file's ELF and device-code facts, read with one header parse, and a
table that reads each file once per build."""

from __future__ import annotations

import collections
import os
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from kpack.artifact import facts as file_facts
from kpack.artifact.facts import FactsTable, read_facts
from kpack.elf import scan_elf
from kpack.errors import TransformError
from kpack.transform import inspect_fat_binary

ROCRAND = "usr/lib/x86_64-linux-gnu/librocrand.so.1.1"


@pytest.mark.real
def test_facts_equal_the_separate_readers_on_a_real_fat_library(
    debian_package: Callable[[str], Path],
) -> None:
    lib = debian_package("librocrand1") / ROCRAND
    facts = read_facts(lib)
    assert facts.elf == scan_elf(lib) and facts.elf is not None
    assert facts.fat == inspect_fat_binary(lib) and facts.fat is not None
    assert facts.fat.wrapper_count == 1 and facts.fat_error is None


def test_files_without_device_code(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a binary")
    os.symlink(text.name, tmp_path / "link")
    assert read_facts(text) == file_facts.FileFacts(None, None)
    assert read_facts(tmp_path / "link") == file_facts.FileFacts(None, None)  # not followed
    python = Path(shutil.which("python3") or "/usr/bin/python3").resolve()
    facts = read_facts(python)
    assert facts.elf == scan_elf(python) and facts.fat is None


@pytest.mark.real
def test_a_fat_binary_for_another_machine_keeps_its_elf_facts(
    debian_package: Callable[[str], Path], tmp_path: Path
) -> None:
    lib = tmp_path / "libother.so"
    data = bytearray((debian_package("librocrand1") / ROCRAND).read_bytes())
    struct.pack_into("<H", data, 18, 183)  # e_machine: AArch64
    lib.write_bytes(data)
    table = FactsTable()
    assert table.elf(lib) is not None and table.elf(lib).soname == "librocrand.so.1"  # type: ignore[union-attr]
    with pytest.raises(TransformError, match="not x86-64"):
        table.fat(lib)
    with pytest.raises(TransformError, match="not x86-64"):
        inspect_fat_binary(lib)  # the same error as the separate reader


def test_the_table_reads_each_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = []
    for n in range(5):
        paths.append(tmp_path / f"f{n}")
        paths[-1].write_bytes(b"x" * n)
    reads: collections.Counter[Path] = collections.Counter()
    real = file_facts.read_facts

    def counting(path: Path) -> file_facts.FileFacts:
        reads[path] += 1
        return real(path)

    monkeypatch.setattr(file_facts, "read_facts", counting)
    table = FactsTable()
    assert table.scan(paths + paths, jobs=3) == dict.fromkeys(paths)
    for path in paths:
        assert table.fat(path) is None and table.elf(path) is None
    assert reads == dict.fromkeys(paths, 1) and len(table) == 5
