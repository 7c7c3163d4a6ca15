"""The transform on Debian's real fat libraries: librocrand (and, opt-in, librocsparse)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from kpack.elf import apply_rpath_edit, verify_elf
from kpack.transform import (
    AlreadyTransformed,
    TransformPlan,
    extract_kernels,
    inspect_fat_binary,
    transform_binary,
)
from tests.conftest import require
from tests.kpack.transform_fixtures import (
    PHDRS_C,
    SYSTEM_HIP,
    bundler_list,
    check_transformed,
    copy_to,
    fatbin_bytes,
    file_phdrs,
    loaded_phdrs,
    readelf,
    run,
    section,
    unbundle,
    wrappers,
)

pytestmark = pytest.mark.real

LIBDIR = "usr/lib/x86_64-linux-gnu"
NAME = "math-libs/rocRAND/stage/lib/librocrand.so.1.1"
PATHS = ("../.kpack/rand_lib_@GFXARCH@.kpack",)
TARGETS = {
    "gfx803",
    "gfx900:xnack-",
    "gfx906:xnack-",
    "gfx908:xnack-",
    "gfx90a:xnack+",
    "gfx90a:xnack-",
    "gfx1030",
}

ROCRAND_VERSION = """
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
fn = lib.rocrand_get_version
fn.argtypes = [ctypes.POINTER(ctypes.c_int)]
fn.restype = ctypes.c_int
v = ctypes.c_int(-1)
print(fn(ctypes.byref(v)), v.value)
"""


def _version(lib: Path) -> str:
    return run([sys.executable, "-c", ROCRAND_VERSION, lib]).stdout.strip()


@pytest.fixture(scope="module")
def rocrand(debian_package: Callable[[str], Path]) -> Path:
    return debian_package("librocrand1") / LIBDIR / "librocrand.so.1.1"


@pytest.fixture(scope="module")
def transformed(
    rocrand: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, TransformPlan]:
    dest = tmp_path_factory.mktemp("rocrand") / "librocrand.so.1.1"
    plan = transform_binary(rocrand, dest, kernel_name=NAME, search_paths=PATHS)
    return dest, plan


def test_inspect_rocrand(rocrand: Path) -> None:
    info = inspect_fat_binary(rocrand)
    assert info is not None
    assert (info.hip_fatbin_addr, info.hip_fatbin_offset) == (0xC53000, 0xC53000)
    assert info.hip_fatbin_size == 0xBBF229
    assert (info.wrapper_count, info.already_transformed, info.relocation_kind) == (
        1,
        False,
        "rela",
    )


def test_rocrand_result_is_clean_and_smaller(
    rocrand: Path, transformed: tuple[Path, TransformPlan]
) -> None:
    dest, plan = transformed
    check_transformed(
        rocrand, dest, kernel_name=NAME, search_paths=PATHS, removed=plan.removed_bytes
    )
    proc = subprocess.run(["readelf", "-lSW", dest], capture_output=True, text=True, check=True)
    assert proc.stderr == ""
    assert verify_elf(dest, name=str(dest)) == []
    assert run(["patchelf", "--print-rpath", dest]).stdout.strip() == ""
    assert run(["patchelf", "--print-soname", dest]).stdout.strip() == "librocrand.so.1"
    fatbin_size = 0xBBF229
    assert fatbin_size - 2 * 4096 <= plan.removed_bytes <= fatbin_size
    shrink = rocrand.stat().st_size - dest.stat().st_size
    assert fatbin_size - 4 * 4096 <= shrink <= fatbin_size, shrink
    assert section(dest, ".hip_fatbin").type == "SHT_NOBITS"
    marker = section(dest, ".rocm_kpack_ref")
    assert wrappers(dest) == [(b"HIPK", 1, marker.addr, 0)]
    assert wrappers(rocrand) == [(b"FPIH", 1, 0xC53000, 0)]


def test_rocrand_loads_and_answers_as_before(
    rocrand: Path, transformed: tuple[Path, TransformPlan], tmp_path: Path
) -> None:
    require(SYSTEM_HIP.exists(), f"{SYSTEM_HIP} missing (apt-get install hipcc)")
    dest, _ = transformed
    before = _version(rocrand)
    assert before.startswith("0 ") and _version(dest) == before
    tool = tmp_path / "phdrs"
    run(["gcc", PHDRS_C, "-ldl", "-o", tool])
    assert loaded_phdrs(tool, dest) == file_phdrs(dest)


def test_rocrand_kernels_match_the_bundler(
    rocrand: Path, transformed: tuple[Path, TransformPlan], tmp_path: Path
) -> None:
    require(shutil.which("clang-offload-bundler-15") is not None, "needs clang-offload-bundler-15")
    _, plan = transformed
    kernels = extract_kernels(rocrand)
    assert len(kernels) == 7 and {k.target for k in kernels} == TARGETS
    assert {k.index for k in kernels} == {0}
    assert [(k.index, k.triple, k.read()) for k in kernels] == [
        (k.index, k.triple, k.read()) for k in plan.kernels
    ]
    raw = tmp_path / "fatbin.bin"
    fatbin_bytes(rocrand, raw)
    triples = [t for t in bundler_list(raw) if not t.startswith("host")]
    assert sorted(triples) == sorted(k.triple for k in kernels)
    oracle = unbundle(raw, triples, tmp_path / "co")
    for k in kernels:
        data = k.read()
        assert data == oracle[k.triple], k.triple
        assert data[:4] == b"\x7fELF" and data[18] == 224  # e_machine EM_AMDGPU


def test_rocrand_rpath_edits_after_transform(
    rocrand: Path, transformed: tuple[Path, TransformPlan], tmp_path: Path
) -> None:
    require(SYSTEM_HIP.exists(), f"{SYSTEM_HIP} missing (apt-get install hipcc)")
    dest, _ = transformed
    entries = ("$ORIGIN", "$ORIGIN/../../_rocm_sdk_core/lib")
    ours = tmp_path / "ours" / dest.name
    ours.parent.mkdir()
    assert apply_rpath_edit(dest, entries, ours) is True
    readelf(ours, "-a")
    theirs = copy_to(dest, tmp_path / "theirs")
    run(["patchelf", "--force-rpath", "--set-rpath", ":".join(entries), theirs])
    before = _version(rocrand)
    for edited in (ours, theirs):
        assert run(["patchelf", "--print-rpath", edited]).stdout.strip() == ":".join(entries)
        assert _version(edited) == before
    with pytest.raises(AlreadyTransformed):
        transform_binary(ours, tmp_path / "again.so", kernel_name=NAME, search_paths=PATHS)


@pytest.mark.large
def test_rocsparse_streams_with_bounded_memory(
    debian_package: Callable[[str], Path], tmp_path: Path
) -> None:
    """1.31 GB, 111 wrappers: transform and extract in a child with bounded memory."""
    if os.environ.get("ROCM_PACKAGING_LARGE") != "1":
        pytest.skip("opt-in: set ROCM_PACKAGING_LARGE=1")
    lib = debian_package("librocsparse0") / LIBDIR / "librocsparse.so.0.1"
    dest = tmp_path / "librocsparse.so.0.1"
    script = (
        "import resource, sys, zlib\n"
        "from pathlib import Path\n"
        "from kpack.transform import transform_binary\n"
        "plan = transform_binary(Path(sys.argv[1]), Path(sys.argv[2]),\n"
        "    kernel_name='math-libs/rocSPARSE/stage/lib/librocsparse.so.0.1',\n"
        "    search_paths=['../.kpack/sparse_lib_@GFXARCH@.kpack'])\n"
        "print(len(plan.kernels), len({k.index for k in plan.kernels}), plan.removed_bytes)\n"
        # VmHWM: this process's own peak (ru_maxrss would carry over the forking parent's)
        "status = open('/proc/self/status').read().splitlines()\n"
        "print(next(int(x.split()[1]) for x in status if x.startswith('VmHWM')))\n"
    )
    repo = Path(__file__).resolve().parents[3]
    proc = run([sys.executable, "-c", script, lib, dest], cwd=repo)
    counts, peak = proc.stdout.split("\n")[:2]
    kernels, wrappers_seen, removed = map(int, counts.split())
    assert (kernels, wrappers_seen) == (777, 111)
    assert removed > 1_290_000_000
    assert int(peak) < 400 * 1024, f"peak RSS {peak} KiB"
    assert dest.stat().st_size < 20 << 20
    readelf(dest, "-lS")
    if SYSTEM_HIP.exists():
        run([sys.executable, "-c", f"import ctypes; ctypes.CDLL({str(dest)!r})"])
