"""The sample artifact tree: layout, real binaries, runnable programs, determinism."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from kpack.errors import PackagingError, ToolError, UsageError
from sample_tree.make_sample_tree import DEB_PACKAGES, make_sample_tree
from tests.conftest import require

COMPONENTS = {"lib", "run", "dbg", "dev", "doc", "test"}
FAMILY = "gfx90a-dcgpu"
HIP = "core-hip_lib_generic/core/clr/stage"
FFT_LIB = f"fft_lib_{FAMILY}/math-libs/rocFFT/stage/lib"
PROFILER = "profiler/rocprofiler-systems/stage"
LEGACY_ARTIFACTS = {
    "amd-llvm_dev_generic",
    "amd-llvm_lib_generic",
    "base_lib_generic",
    "core-hip_dev_generic",
    "core-hip_lib_generic",
    "core-hip_run_generic",
    "core-runtime_dev_generic",
    "core-runtime_lib_generic",
    "fft_dev_generic",
    f"fft_lib_{FAMILY}",
    "fft_test_generic",
    "prim_dev_generic",
    "prim_doc_generic",
    "rand_dev_generic",
    f"rand_lib_{FAMILY}",
    "rocprofiler-systems_lib_generic",
    "rocprofiler-systems_run_generic",
}
HIPSAMPLE_BUNDLE = {
    "host-x86_64-unknown-linux",
    "hipv4-amdgcn-amd-amdhsa--gfx900",
    "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
    "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-",
    "hipv4-amdgcn-amd-amdhsa--gfx1030",
}
real_compile = [pytest.mark.real, pytest.mark.compile]


@pytest.fixture(scope="module")
def build(
    hipcc: Path, debian_package: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory
) -> Callable[..., Path]:
    """Build a sample tree into a fresh directory (debs and compiles come from the cache)."""
    require(shutil.which("cc") is not None, "no C compiler 'cc' (apt-get install gcc)")
    for name in DEB_PACKAGES:
        debian_package(name)

    def run(*, kpack_split: bool = False, edge_cases: bool = True) -> Path:
        out = tmp_path_factory.mktemp("sample") / "artifacts"
        return make_sample_tree(out, family=FAMILY, kpack_split=kpack_split, edge_cases=edge_cases)

    return run


@pytest.fixture(scope="module")
def tree(build: Callable[..., Path]) -> Path:
    return build()


def _tool(name: str) -> str:
    path = shutil.which(name)
    require(path is not None, f"{name} is not installed")
    assert path is not None
    return path


def _run(cmd: list[str], tree: Path) -> subprocess.CompletedProcess[str]:
    lib_dirs = [
        f"{HIP}/lib",
        "core-runtime_lib_generic/core/ROCR-Runtime/stage/lib",
        "amd-llvm_lib_generic/compiler/amd-llvm/stage/lib",
        FFT_LIB,
        f"rocprofiler-systems_lib_generic/{PROFILER}/lib",
    ]
    env = {**os.environ, "LD_LIBRARY_PATH": ":".join(str(tree / d) for d in lib_dirs)}
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, check=False)


def _snapshot(root: Path) -> dict[str, tuple[object, ...]]:
    snap: dict[str, tuple[object, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            st = path.lstat()
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                snap[rel] = ("link", os.readlink(path), st.st_mtime)
            elif path.is_dir():
                snap[rel] = ("dir", st.st_mode, st.st_mtime)
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                snap[rel] = ("file", digest, st.st_mode, st.st_mtime)
    return snap


@pytest.mark.real
@pytest.mark.compile
def test_artifact_dirs_parse_and_manifests_list_stage_dirs(tree: Path) -> None:
    names = {p.name for p in tree.iterdir()}
    assert names == LEGACY_ARTIFACTS
    for name in names:
        fields = name.split("_")
        assert len(fields) == 3 and fields[1] in COMPONENTS, name
        text = (tree / name / "artifact_manifest.txt").read_text()
        assert text.endswith("\n") and not text.endswith("\n\n")
        for stage in text.splitlines():
            assert (tree / name / stage).is_dir(), f"{name}: {stage}"


@pytest.mark.real
@pytest.mark.compile
def test_therock_metadata(tree: Path) -> None:
    therock = tree / "base_lib_generic/base/aux-overlay/stage/share/therock"
    manifest = json.loads((therock / "therock_manifest.json").read_text())
    assert manifest["flags"] == {"KPACK_SPLIT_ARTIFACTS": False}
    assert manifest["the_rock_commit"] == "sample"
    dist = json.loads((therock / "dist_info.json").read_text())
    assert dist == {"dist_amdgpu_targets": "gfx900;gfx90a;gfx1030"}


@pytest.mark.real
@pytest.mark.compile
def test_rocrand_is_a_real_fat_library(tree: Path) -> None:
    lib = tree / f"rand_lib_{FAMILY}/math-libs/rocRAND/stage/lib"
    real = lib / os.readlink(lib / "librocrand.so.1")
    assert real.read_bytes()[:4] == b"\x7fELF" and not real.is_symlink()
    out = subprocess.run(
        [_tool("readelf"), "-SW", str(real)], capture_output=True, text=True, check=True
    ).stdout
    assert " .hip_fatbin " in out and " .hipFatBinSegment " in out


@pytest.mark.real
@pytest.mark.compile
@pytest.mark.parametrize("name", ["libhipsample.so.1.0", "libhipsample_lld.so.1"])
def test_hipsample_has_four_code_objects(tree: Path, tmp_path: Path, name: str) -> None:
    objcopy, bundler = _tool("objcopy"), _tool("clang-offload-bundler-15")
    fatbin = tmp_path / "fatbin.bin"
    subprocess.run(
        [
            objcopy,
            "-O",
            "binary",
            "--only-section=.hip_fatbin",
            str(tree / FFT_LIB / name),
            str(fatbin),
        ],
        check=True,
    )
    out = subprocess.run(
        [bundler, "--list", "--type=o", f"--input={fatbin}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert set(out.split()) == HIPSAMPLE_BUNDLE


@pytest.mark.real
@pytest.mark.compile
def test_library_sonames_and_lld_phdr(tree: Path) -> None:
    readelf = _tool("readelf")

    def dynamic(path: Path) -> str:
        return subprocess.run(
            [readelf, "-dlW", str(path)], capture_output=True, text=True, check=True
        ).stdout

    gnu, lld = (
        dynamic(tree / FFT_LIB / "libhipsample.so.1.0"),
        dynamic(tree / FFT_LIB / "libhipsample_lld.so.1"),
    )
    assert "[libhipsample.so.1]" in gnu and " PHDR " not in gnu
    assert "[libhipsample_lld.so.1]" in lld and " PHDR " in lld
    assert "[libamdhip64.so.5]" in gnu and "RPATH" not in gnu and "RUNPATH" not in gnu
    test_exe = dynamic(tree / "fft_test_generic/math-libs/rocFFT/stage/bin/hipsample-test")
    assert "[libhipsample.so.1]" in test_exe and "RUNPATH" not in test_exe


@pytest.mark.real
@pytest.mark.compile
def test_programs_run(tree: Path) -> None:
    run_bin = tree / "core-hip_run_generic/core/clr/stage/bin"
    info = run_bin / "hip-sample-info"
    assert os.readlink(info) == "../libexec/hip-sample/hip-sample-info"
    assert info.resolve().read_bytes()[:4] == b"\x7fELF"
    assert _run([str(info), "--version"], tree).stdout == "hip-sample-info\n"
    assert _run([str(info)], tree).returncode == 0
    result = _run([str(tree / "fft_test_generic/math-libs/rocFFT/stage/bin/hipsample-test")], tree)
    assert (result.returncode, result.stdout) == (0, "hipsample-test ok\n"), result.stderr
    for tool in ("rocprof-sys-instrument", "rocprof-sys-run", "rocprof-sys-sample"):
        path = tree / f"rocprofiler-systems_run_generic/{PROFILER}/bin/{tool}"
        assert not path.is_symlink()
        assert _run([str(path), "--version"], tree).stdout == f"{tool}\n"
    perl = shutil.which("perl")
    if perl is not None:
        hipconfig = _run([perl, str(run_bin / "hipconfig"), "--version"], tree)
        assert hipconfig.returncode == 0 and hipconfig.stdout.startswith("5."), hipconfig


@pytest.mark.real
@pytest.mark.compile
def test_symlinks_and_identical_duplicates(tree: Path) -> None:
    hip_lib = tree / HIP / "lib"
    dangling = hip_lib / "libhip-dangling.so.1"
    assert dangling.is_symlink() and not dangling.exists()
    assert (hip_lib / "libamdhip64.so.5").resolve().is_file()
    # linker names live beside the library, in the lib artifact, as in TheRock
    assert os.readlink(hip_lib / "libamdhip64.so") == "libamdhip64.so.5"
    rand_lib = tree / f"rand_lib_{FAMILY}/math-libs/rocRAND/stage/lib"
    assert os.readlink(rand_lib / "librocrand.so") == "librocrand.so.1"
    notice = "share/therock/NOTICE.txt"
    runtime = tree / "core-runtime_lib_generic/core/ROCR-Runtime/stage"
    assert (tree / HIP / notice).read_bytes() == (runtime / notice).read_bytes()


@pytest.mark.real
@pytest.mark.compile
def test_cmake_configs_sit_at_lib_cmake_and_name_lib(tree: Path) -> None:
    """Debian's configs, moved from usr/lib/<triplet>/cmake/<pkg>, climb three levels to
    their prefix and name lib/, as TheRock's lib/cmake/<pkg> configs do."""
    configs = sorted(tree.glob("*_dev_generic/**/lib/cmake/*/*.cmake"))
    packages = {c.parent.name for c in configs}
    assert {"hip", "hsa-runtime64", "amd_comgr", "AMDDeviceLibs", "rocrand"} <= packages
    for config in configs:
        text = config.read_text()
        assert "linux-gnu" not in text and "/../../../../" not in text, config
    targets = tree / "rand_dev_generic/math-libs/rocRAND/stage/lib/cmake/rocrand"
    release = (targets / "rocrand-targets-release.cmake").read_text()
    assert '"${_IMPORT_PREFIX}/lib/librocrand.so.1.1"' in release
    assert (tree / f"rand_lib_{FAMILY}/math-libs/rocRAND/stage/lib/librocrand.so.1.1").is_file()
    climbs = (targets / "rocrand-targets.cmake").read_text().count('"${_IMPORT_PREFIX}" PATH)')
    assert climbs == 3


@pytest.mark.real
@pytest.mark.compile
def test_rebuild_is_identical(tree: Path, build: Callable[..., Path]) -> None:
    assert _snapshot(build()) == _snapshot(tree)


@pytest.mark.real
@pytest.mark.compile
def test_kpack_mode_is_a_fat_generic_tree(build: Callable[..., Path]) -> None:
    root = build(kpack_split=True)
    names = {p.name for p in root.iterdir()}
    assert not any(n.endswith(f"_{FAMILY}") for n in names)
    assert {"fft_lib_generic", "rand_lib_generic"} <= names
    # fat: no per-target artifacts yet (the builder or `kpack split-artifacts` makes them)
    assert not [n for n in names if n.split("_")[-1].startswith("gfx")]
    manifest = root / "base_lib_generic/base/aux-overlay/stage/share/therock/therock_manifest.json"
    assert json.loads(manifest.read_text())["flags"]["KPACK_SPLIT_ARTIFACTS"] is True


def test_missing_tools_are_named_together(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("CC", raising=False)
    with pytest.raises(ToolError) as info:
        make_sample_tree(tmp_path / "out", cache_dir=tmp_path / "cache")
    assert {"hipcc", "cc", "apt-get"} <= {p.split()[0] for p in info.value.problems}
    assert not (tmp_path / "out").exists()


def test_rejects_bad_family_and_foreign_output(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="family"):
        make_sample_tree(tmp_path / "out", family="gfx90a_dcgpu")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "keep.txt").write_text("x")
    with pytest.raises(PackagingError, match="mine: a directory not written by this tool"):
        make_sample_tree(tmp_path / "mine", cache_dir=tmp_path / "cache")
    assert (tmp_path / "mine" / "keep.txt").exists()


def test_a_usage_error_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from sample_tree.make_sample_tree import main

    assert main(["--output", str(tmp_path / "out"), "--family", "gfx90a_dcgpu"]) == 2
    assert "invalid family" in capsys.readouterr().err and not (tmp_path / "out").exists()
