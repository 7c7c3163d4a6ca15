"""Real Debian ROCm libraries: scan, edit, compare with patchelf 0.19.3, load with ld.so."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import pytest

from kpack.elf import FileKind, apply_rpath_edit, classify, scan_elf
from kpack.elf import reader as elf_read
from tests.conftest import require
from tests.kpack.elf.elf_samples import (
    check_oracles,
    file_phdrs,
    loaded_phdrs,
    patchelf,
    readelf,
    run,
)

pytestmark = pytest.mark.real

LIBDIR = "usr/lib/x86_64-linux-gnu"
ENTRIES = ("$ORIGIN", "$ORIGIN/../../_rocm_sdk_core/lib")
SYSTEM_HIP = Path("/usr/lib/x86_64-linux-gnu/libamdhip64.so.5")

ROCRAND_VERSION = """
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
fn = lib.rocrand_get_version
fn.argtypes = [ctypes.POINTER(ctypes.c_int)]
fn.restype = ctypes.c_int
v = ctypes.c_int(-1)
print(fn(ctypes.byref(v)), v.value)
"""

HIP_ERROR_STRING = """
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
fn = lib.hipGetErrorName
fn.argtypes = [ctypes.c_int]
fn.restype = ctypes.c_char_p
print(fn(0).decode())
"""


@pytest.fixture(scope="module")
def rocrand(debian_package: Callable[[str], Path]) -> Path:
    return debian_package("librocrand1") / LIBDIR / "librocrand.so.1.1"


@pytest.fixture(scope="module")
def amdhip(debian_package: Callable[[str], Path]) -> Path:
    return (debian_package("libamdhip64-5") / LIBDIR / "libamdhip64.so.5").resolve()


def _py(script: str, lib: Path) -> str:
    return run([sys.executable, "-c", script, str(lib)]).stdout.strip()


def _differing_offsets(a: Path, b: Path, chunk: int = 1 << 20) -> list[int]:
    """Offsets below ``a``'s size where the files differ (streamed)."""
    out = []
    with a.open("rb") as fa, b.open("rb") as fb:
        pos = 0
        while block_a := fa.read(chunk):
            block_b = fb.read(len(block_a))
            if block_a != block_b:
                out += [
                    pos + i for i, (x, y) in enumerate(zip(block_a, block_b, strict=True)) if x != y
                ]
            pos += len(block_a)
    return out


def test_scan_rocrand_matches_readelf(rocrand: Path) -> None:
    info = scan_elf(rocrand)
    assert info is not None
    assert info.kind is FileKind.SHARED_LIBRARY is classify(rocrand)
    assert info.soname == "librocrand.so.1" == patchelf("--print-soname", rocrand)
    assert list(info.needed) == patchelf("--print-needed", rocrand).split()
    assert info.rpath is None and info.runpath is None and info.interp is None
    assert info.has_hip_fatbin and " .hip_fatbin " in readelf(rocrand, "-S")


def test_scan_reads_only_headers(rocrand: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """scan_elf of a 25 MB library reads a few KiB: headers, dynamic, strings, names."""
    counts = {"bytes": 0, "reads": 0}
    real_open = elf_read.open_binary

    class Counting:
        def __init__(self, inner: BinaryIO) -> None:
            self.inner = inner

        def read(self, size: int = -1) -> bytes:
            data = self.inner.read(size)
            counts["bytes"] += len(data)
            counts["reads"] += 1
            return data

        def __getattr__(self, name: str) -> object:
            return getattr(self.inner, name)

        def __enter__(self) -> Counting:
            return self

        def __exit__(self, *exc: object) -> None:
            self.inner.close()

    monkeypatch.setattr(elf_read, "open_binary", lambda path: Counting(real_open(path)))
    info = scan_elf(rocrand)
    assert info is not None and info.has_hip_fatbin
    assert rocrand.stat().st_size > 20 << 20
    assert 0 < counts["bytes"] < 16 << 10, counts
    assert counts["reads"] < 40, counts


def test_edit_rocrand_loads_and_agrees_with_patchelf(rocrand: Path, tmp_path: Path) -> None:
    require(SYSTEM_HIP.exists(), f"{SYSTEM_HIP} missing (apt-get install hipcc)")
    before = _py(ROCRAND_VERSION, rocrand)
    assert before.startswith("0 ")
    ours = tmp_path / "ours" / "librocrand.so.1"
    ours.parent.mkdir()
    assert apply_rpath_edit(rocrand, ENTRIES, ours) is True
    check_oracles(rocrand, ours, ENTRIES)
    assert _py(ROCRAND_VERSION, ours) == before
    info = scan_elf(ours)
    assert info is not None and info.has_hip_fatbin and info.rpath == ENTRIES
    phdrs_tool = tmp_path / "phdrs"
    run(["gcc", str(Path(__file__).parent / "data" / "phdrs.c"), "-ldl", "-o", str(phdrs_tool)])
    assert loaded_phdrs(phdrs_tool, ours) == file_phdrs(ours)
    # the body is untouched: only the ELF header, dynamic slots and section headers differ
    dyn = next(p for p in file_phdrs(rocrand) if p[0] == 2)
    head = rocrand.read_bytes()[:64]
    shoff, shnum = int.from_bytes(head[40:48], "little"), int.from_bytes(head[60:62], "little")
    allowed = [(0, 64), (dyn[1], dyn[1] + dyn[3]), (shoff, shoff + 64 * shnum)]
    for offset in _differing_offsets(rocrand, ours):
        assert any(lo <= offset < hi for lo, hi in allowed), hex(offset)

    theirs = tmp_path / "theirs" / "librocrand.so.1"
    theirs.parent.mkdir()
    shutil.copy2(rocrand, theirs)
    patchelf("--force-rpath", "--set-rpath", ":".join(ENTRIES), theirs)
    assert patchelf("--print-rpath", theirs) == patchelf("--print-rpath", ours)
    assert _py(ROCRAND_VERSION, theirs) == before


def test_edit_amdhip_loads(amdhip: Path, tmp_path: Path) -> None:
    require(SYSTEM_HIP.exists(), f"{SYSTEM_HIP} missing (apt-get install hipcc)")
    info = scan_elf(amdhip)
    assert info is not None and info.soname == "libamdhip64.so.5" and info.rpath is None
    dest = tmp_path / "libamdhip64.so.5"
    assert apply_rpath_edit(amdhip, ENTRIES, dest) is True
    check_oracles(amdhip, dest, ENTRIES)
    assert _py(HIP_ERROR_STRING, dest) == _py(HIP_ERROR_STRING, amdhip) == "hipSuccess"
    theirs = tmp_path / "theirs.so"
    shutil.copy2(amdhip, theirs)
    patchelf("--force-rpath", "--set-rpath", ":".join(ENTRIES), theirs)
    assert _py(HIP_ERROR_STRING, theirs) == "hipSuccess"


@pytest.mark.large
def test_edit_rocsparse_streams(debian_package: Callable[[str], Path], tmp_path: Path) -> None:
    """The 1.31 GB library: edited in a child process with bounded memory, still loads."""
    if os.environ.get("ROCM_PACKAGING_LARGE") != "1":
        pytest.skip("opt-in: set ROCM_PACKAGING_LARGE=1")
    lib = debian_package("librocsparse0") / LIBDIR / "librocsparse.so.0.1"
    dest = tmp_path / "librocsparse.so.0"
    script = (
        "import resource, sys\n"
        "from pathlib import Path\n"
        "from kpack.elf import apply_rpath_edit\n"
        f"assert apply_rpath_edit(Path(sys.argv[1]), {ENTRIES!r}, Path(sys.argv[2]))\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    repo = Path(__file__).resolve().parents[3]
    proc = run([sys.executable, "-c", script, str(lib), str(dest)], cwd=repo)
    peak_kb = int(proc.stdout.strip())
    assert peak_kb < 200 * 1024, f"peak RSS {peak_kb} KiB"
    assert patchelf("--print-rpath", dest) == ":".join(ENTRIES)
    readelf(dest, "-d", "-l")
    run([sys.executable, "-c", f"import ctypes; ctypes.CDLL({str(dest)!r})"])
