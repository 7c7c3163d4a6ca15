"""``kpack verify DIR|WHEEL``: the old-kernel gate on the outputs of ``split-artifacts`` and
``split-wheel`` (a gcc-built PIE fat executable and a library in each), and on the same
outputs after a real ``llvm-strip`` broke the executable: the gate names it, and
``normalize_phdr_tree`` repairs it (the program runs again, the gate passes)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from kpack.cli import main
from kpack.wheelfile import Member, write_wheel
from tests.conftest import require
from tests.kpack.split.test_split import manifest, put
from tests.kpack.transform.test_synthetic import pad, plain
from tests.kpack.transform_fixtures import LLVM_BIN, run_program, synthetic
from tests.kpack.wheel_fixtures import TAG, VERSION, metadata

REPO = Path(__file__).resolve().parents[2]
EXE = "bin/demo-test"


def verify(capsys: pytest.CaptureFixture[str], path: Path) -> tuple[int, str, str]:
    rc = main(["verify", str(path)])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def normalize(path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    cmd = [sys.executable, "-m", "rocm_kpack.tools.normalize_phdr_tree", str(path)]
    subprocess.run(cmd, check=True, env=env, capture_output=True)


@pytest.fixture(scope="module")
def fat(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A fat PIE executable and a fat library (gcc, synthetic bundles)."""
    require(shutil.which("gcc") is not None, "needs gcc")
    root = tmp_path_factory.mktemp("fat")
    first = pad(plain(0x10, size=9000))
    data = first + pad(plain(0x30, size=9000))
    exe = synthetic(root, "exe", data, [0, len(first)], kind="pie")
    lib = synthetic(root, "lib", data, [0, len(first)], kind="so")
    return exe, lib


def test_split_artifacts_output(
    capsys: pytest.CaptureFixture[str], fat: tuple[Path, Path], tmp_path: Path
) -> None:
    exe, lib = fat
    art = tmp_path / "artifacts" / "demo_test_gfx90X-dcgpu"
    put(art, "s/stage", EXE, exe, mode=0o755)
    put(art, "s/stage", "lib/libdemo.so", lib)
    manifest(art, "s/stage")
    out = tmp_path / "out"
    argv = ["split-artifacts", "--artifact-dir", str(art), "--output-dir", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    capsys.readouterr()
    rc, stdout, err = verify(capsys, out)
    assert rc == 0, err
    assert "OK, 2 ELF file(s)" in stdout
    split_exe = next(out.glob(f"*_generic/s/stage/{EXE}"))
    assert run_program(split_exe) == (5, "answer 42\n")
    subprocess.run([LLVM_BIN / "llvm-strip", split_exe], check=True)
    rc, _, err = verify(capsys, out)
    assert rc == 1 and f"{split_exe}: program-header table's PT_LOAD" in err
    assert "1 of 2 ELF file(s) fail the old-kernel check" in err
    normalize(out)
    assert verify(capsys, out)[0] == 0
    assert run_program(split_exe) == (5, "answer 42\n")


def _wheel(dest: Path, exe: Path, lib: Path) -> Path:
    members = [
        Member("demo/__init__.py", b""),
        Member(f"demo/{EXE}", exe, executable=True),
        Member("demo/lib/libdemo.so", lib, executable=True),
    ]
    return write_wheel(
        dest, dist_name="demo", version=VERSION, tag=TAG, members=members, metadata=metadata("demo")
    ).path


def test_split_wheel_output(
    capsys: pytest.CaptureFixture[str], fat: tuple[Path, Path], tmp_path: Path
) -> None:
    exe, lib = fat
    wheel = _wheel(tmp_path / "in", exe, lib)
    out = tmp_path / "out"
    argv = ["split-wheel", "--input", str(wheel), "--output-dir", str(out)]
    argv += ["--overlay-root", "demo/", "--device-package-prefix", "amd-demo"]
    assert main(argv) == 0, capsys.readouterr().err
    capsys.readouterr()
    host = out / wheel.name
    rc, stdout, err = verify(capsys, host)
    assert rc == 0 and "OK, 2 ELF file(s)" in stdout, err
    # the host wheel's executable after llvm-strip, repacked: caught, then repaired
    unpacked = tmp_path / "unpacked"
    with zipfile.ZipFile(host) as z:
        z.extractall(unpacked)
    split_exe = unpacked / "demo" / EXE
    split_exe.chmod(0o755)
    assert run_program(split_exe) == (5, "answer 42\n")
    subprocess.run([LLVM_BIN / "llvm-strip", split_exe], check=True)
    stripped = _wheel(tmp_path / "stripped", split_exe, unpacked / "demo/lib/libdemo.so")
    rc, _, err = verify(capsys, stripped)
    assert rc == 1 and f"{stripped}!demo/{EXE}: program-header table's PT_LOAD" in err
    normalize(split_exe)
    assert run_program(split_exe) == (5, "answer 42\n")
    fixed = _wheel(tmp_path / "fixed", split_exe, unpacked / "demo/lib/libdemo.so")
    assert verify(capsys, fixed)[0] == 0


def test_unreadable_wheel_is_one_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    junk = tmp_path / "junk-1-py3-none-any.whl"
    junk.write_bytes(b"not a zip")
    rc, _, err = verify(capsys, junk)
    assert rc == 1 and err.startswith(f"error: {junk}: not a readable wheel"), err


def test_gnu_strip_of_the_split_tree_is_caught(
    capsys: pytest.CaptureFixture[str], fat: tuple[Path, Path], tmp_path: Path
) -> None:
    """``strip`` (GNU binutils 2.40, as rpm and deb packaging run it) over the split tree:
    the executable no longer runs and loading the library kills the process; the gate
    names the executable's two faults and the library's overlapping segments."""
    require(shutil.which("strip") is not None, "needs GNU strip (binutils)")
    exe, lib = fat
    art = tmp_path / "artifacts" / "demo_test_gfx90X-dcgpu"
    put(art, "s/stage", EXE, exe, mode=0o755)
    put(art, "s/stage", "lib/libdemo.so", lib)
    manifest(art, "s/stage")
    out = tmp_path / "out"
    argv = ["split-artifacts", "--artifact-dir", str(art), "--output-dir", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    capsys.readouterr()
    split_exe = next(out.glob(f"*_generic/s/stage/{EXE}"))
    split_lib = next(out.glob("*_generic/s/stage/lib/libdemo.so"))
    subprocess.run(["strip", split_exe, split_lib], check=True, capture_output=True)
    assert run_program(split_exe)[0] == -11
    rc, _, err = verify(capsys, out)
    assert rc == 1, err
    line = next(x for x in err.splitlines() if f"{split_exe}: " in x)
    assert "program-header table's PT_LOAD" in line and "overlap in memory" in line, err
    assert f"{split_lib}: PT_LOAD[" in err and err.count("overlap in memory") == 2, err
    assert "2 of 2 ELF file(s) fail" in err
    # ld.so agrees: loading the stripped library kills the process
    load = [sys.executable, "-c", "import ctypes, sys; ctypes.CDLL(sys.argv[1])", str(split_lib)]
    assert subprocess.run(load, capture_output=True, check=False).returncode == -11
