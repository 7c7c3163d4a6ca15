"""End to end: a tiny package set installed offline with pip (and uv), then ``rocm-sdk test``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.templates.tpl_kit import (
    compile_library,
    platform_init,
    pure_package_files,
    rocm_sdk_tree,
    sdist_bytes,
    tar_bytes,
    write_wheel,
)
from tests.templates.tpl_rendering import _script, context

VERSION = "7.1.0"
FAMILY = "gfx94X-dcgpu"
CTX = context("legacy", (FAMILY,), nonce="_v7", version=VERSION)
CTX["console_scripts"] = [
    _script("hipconfig", "core", "bin/hipconfig", probe_args=["--version"], expect="HIP version"),
    _script("amd-smi", "core", "bin/amd-smi", probe_args=[], expect="AMD-SMI", expand_devel=False),
    _script(
        "rocprof-sys-run",
        "profiler",
        "bin/rocprof-sys-run",
        probe_args=["--version"],
        expect="rocprof-sys-run",
    ),
]
CORE, LIBS = "_rocm_sdk_core_v7", "_rocm_sdk_libraries_gfx94X_dcgpu_v7"
DEVEL, PROF = "_rocm_sdk_devel_v7", "_rocm_profiler_v7"
MISSING_SYSTEM_LIB = "libnot_on_this_system.so.1"


def _libs(tmp: Path) -> dict[str, bytes]:
    """Platform files of core, libraries and profiler: tiny real shared libraries."""
    out = tmp / "build"
    for sub in ("core/lib/rocm_sysdeps/lib", "libs/lib", "prof/lib", "scratch"):
        (out / sub).mkdir(parents=True)
    hip = compile_library(
        out / "core/lib/libamdhip64.so.7", "int hip(void){return 7;}", soname="libamdhip64.so.7"
    )
    compile_library(
        out / "core/lib/libhiprtc.so.7", "int rtc(void){return 1;}", soname="libhiprtc.so.7"
    )
    compile_library(
        out / "core/lib/rocm_sysdeps/lib/librocm_sysdeps_liblzma.so.5",
        "int lz(void){return 5;}",
        soname="librocm_sysdeps_liblzma.so.5",
    )
    compile_library(
        out / "core/lib/libtiny_user.so.1",
        "int hip(void); int u(void){return hip();}",
        soname="libtiny_user.so.1",
        link=[hip],
        rpath="$ORIGIN",
    )
    ghost = compile_library(
        out / f"scratch/{MISSING_SYSTEM_LIB}", "int g(void){return 0;}", soname=MISSING_SYSTEM_LIB
    )
    compile_library(
        out / "core/lib/libneeds_system.so.1",
        "int g(void); int n(void){return g();}",
        soname="libneeds_system.so.1",
        link=[ghost],
    )
    compile_library(
        out / "libs/lib/libhipblas.so.2",
        "int hip(void); int b(void){return hip();}",
        soname="libhipblas.so.2",
        link=[hip],
        rpath=f"$ORIGIN/../../{CORE}/lib",
    )
    compile_library(out / "libs/lib/librccl.so.1", "int r(void){return 0;}", soname="librccl.so.1")
    compile_library(
        out / "prof/lib/librocprof-sys-dl.so.1",
        "int p(void){return 0;}",
        soname="librocprof-sys-dl.so.1",
    )
    files: dict[str, bytes] = {}
    for prefix, top in (("core", CORE), ("libs", LIBS), ("prof", PROF)):
        for path in sorted((out / prefix).rglob("*.so.*")):
            files[f"{top}/{path.relative_to(out / prefix).as_posix()}"] = path.read_bytes()
    return files


def _scripts() -> dict[str, bytes]:
    sh = "#!/bin/sh\n"
    return {
        f"{CORE}/bin/hipconfig": (sh + 'echo "HIP version: 7.1.0 from $(dirname "$0")"\n').encode(),
        f"{CORE}/bin/amd-smi": (sh + "echo AMD-SMI\n").encode(),
        f"{CORE}/share/therock/dist_info.json": json.dumps(
            {"dist_amdgpu_targets": "gfx942;gfx950"}
        ).encode(),
        f"{PROF}/bin/rocprof-sys-run": (sh + 'echo "rocprof-sys-run 1.0"\n').encode(),
    }


def _devel_tar(runtime: dict[str, bytes]) -> bytes:
    members: list[tuple[str, str, bytes | str | None]] = [
        ("dir", DEVEL, None),
        ("file", f"{DEVEL}/__init__.py", b""),
    ]
    for path in sorted(runtime):
        top, rel = path.split("/", 1)
        if top in (CORE, LIBS) and rel != "__init__.py":
            members.append(("sym", f"{DEVEL}/{rel}", "../" * len(rel.split("/")) + path))
    members += [
        ("sym", f"{DEVEL}/lib/libamdhip64.so", "libamdhip64.so.7"),
        ("file", f"{DEVEL}/lib/cmake/hip/hip-config.cmake", b"# hip\n"),
        ("file", f"{DEVEL}/include/hip/hip_runtime.h", b"#pragma once\n"),
    ]
    data: bytes = tar_bytes(members)
    return data


def build_dist(tmp: Path) -> Path:
    dist = tmp / "dist"
    dist.mkdir()
    runtime = {
        **_libs(tmp),
        **_scripts(),
        **platform_init(CORE),
        **platform_init(LIBS),
        **platform_init(PROF),
    }
    execs = frozenset(p for p in runtime if "/bin/" in p)

    def part(top: str) -> dict[str, bytes]:
        return {p: d for p, d in runtime.items() if p.startswith(top + "/")}

    def eps(package: str, module: str) -> str:
        rows = [
            f"{s['name']} = {module}._cli:{s['func']}"
            for s in CTX["console_scripts"]
            if s["package"] == package
        ]
        return "[console_scripts]\n" + "\n".join(rows) + "\n"

    write_wheel(
        dist,
        "rocm-sdk-core",
        VERSION,
        {
            **pure_package_files("core", "rocm_sdk_core", CTX, this_package_entry="core"),
            **part(CORE),
        },
        entry_points=eps("core", "rocm_sdk_core"),
        executables=execs,
    )
    pure_libs = f"rocm_sdk_libraries_{FAMILY}"
    write_wheel(
        dist,
        f"rocm-sdk-libraries-{FAMILY}",
        VERSION,
        {
            **pure_package_files(
                "libraries",
                pure_libs,
                CTX,
                this_package_entry="libraries",
                this_target_family=FAMILY,
            ),
            **part(LIBS),
        },
    )
    write_wheel(
        dist,
        "rocm-profiler",
        VERSION,
        {
            **pure_package_files("profiler", "rocm_profiler", CTX, this_package_entry="profiler"),
            **part(PROF),
        },
        entry_points=eps("profiler", "rocm_profiler"),
        executables=execs,
    )
    write_wheel(
        dist,
        "rocm-sdk-devel",
        VERSION,
        {
            **pure_package_files("devel", "rocm_sdk_devel", CTX, this_package_entry="devel"),
            "rocm_sdk_devel/_devel.tar": _devel_tar(runtime),
        },
    )
    tree = rocm_sdk_tree(CTX, tmp / "rocm-src")
    (dist / f"rocm-{VERSION}.tar.gz").write_bytes(sdist_bytes(tree, f"rocm-{VERSION}"))
    return dist


def clean_env(venv: Path | None = None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ROCM_SDK_", "PIP_", "UV_", "PYTHON", "VIRTUAL_ENV"))
    }
    if venv is not None:
        env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(venv)
    return env


def run(
    cmd: list[str | Path], env: dict[str, str], timeout: int = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(c) for c in cmd], env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    if shutil.which("gcc") is None or not sys.platform.startswith("linux"):
        pytest.skip("needs Linux and gcc")
    tmp = tmp_path_factory.mktemp("install")
    dist = build_dist(tmp)
    venv = tmp / "venv"
    made = run([sys.executable, "-m", "venv", venv], clean_env())
    assert made.returncode == 0, made.stderr
    proc = run(
        [
            venv / "bin/python",
            "-m",
            "pip",
            "install",
            "--no-index",
            "--find-links",
            dist,
            "--disable-pip-version-check",
            f"rocm[libraries,devel,profiler]=={VERSION}",
        ],
        clean_env(venv),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    yield venv, dist


def site_packages(venv: Path) -> Path:
    return Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))


def test_rocm_sdk_self_tests_pass(installed: tuple[Path, Path]) -> None:
    venv, _ = installed
    proc = run([venv / "bin/rocm-sdk", "test"], clean_env(venv), timeout=600)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert f"missing system libraries: {MISSING_SYSTEM_LIB}" in output
    assert "FAILED" not in output and "ERROR" not in output
    for name in (
        "testRuntimeFilesMirroredIntoDevel",
        "testUnversionedAliases",
        "testSharedLibrariesLoad",
        "testCompiledMismatchRaisesAndWarns",
    ):
        assert name in output


def test_cli_and_trampolines(installed: tuple[Path, Path]) -> None:
    venv, _ = installed
    env = clean_env(venv)
    site = site_packages(venv)
    assert run([venv / "bin/rocm-sdk", "version"], env).stdout.strip() == VERSION
    assert run([venv / "bin/rocm-sdk", "targets"], env).stdout.strip() == "gfx942;gfx950"
    root = run([venv / "bin/rocm-sdk", "path", "--root"], env).stdout.strip()
    assert Path(root) == site / DEVEL
    assert run([venv / "bin/rocm-sdk", "path", "--cmake"], env).stdout.strip() == str(
        site / DEVEL / "lib" / "cmake"
    )
    out = run([venv / "bin/hipconfig", "--version"], env).stdout
    assert f"HIP version: 7.1.0 from {site / DEVEL / 'bin'}" in out
    assert run([venv / "bin/rocprof-sys-run"], env).stdout == "rocprof-sys-run 1.0\n"
    meta = (site / f"rocm-{VERSION}.dist-info" / "METADATA").read_text()
    assert f'Requires-Dist: rocm-sdk-libraries-{FAMILY}=={VERSION}; extra == "libraries"' in meta


def test_uninstall_removes_generated_files(installed: tuple[Path, Path]) -> None:
    venv, _ = installed
    env = clean_env(venv)
    site = site_packages(venv)
    run([venv / "bin/rocm-sdk", "init", "--quiet"], env)
    run([venv / "bin/rocprof-sys-run"], env)
    assert (site / PROF / "lib" / "librocprof-sys-dl.so").is_symlink()
    proc = run(
        [venv / "bin/python", "-m", "pip", "uninstall", "-y", "rocm-sdk-devel", "rocm-profiler"],
        env,
    )
    assert proc.returncode == 0, proc.stderr
    assert not (site / DEVEL).exists()
    assert not (site / PROF).exists()
    assert (site / CORE / "lib" / "libamdhip64.so.7").is_file()


def test_uv_install(installed: tuple[Path, Path], tmp_path: Path) -> None:
    beside = Path(sys.executable).with_name("uv")  # the project venv's own uv
    uv = str(beside) if beside.is_file() else shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed")
    _, dist = installed
    venv = tmp_path / "uv-venv"
    env = clean_env()
    env["UV_NO_CACHE"] = "1"
    assert run([uv, "venv", "--python", sys.executable, venv], env).returncode == 0
    env = clean_env(venv)
    env["UV_NO_CACHE"] = "1"
    proc = run(
        [
            uv,
            "pip",
            "install",
            "--offline",
            "--no-index",
            "--find-links",
            dist,
            f"rocm[devel]=={VERSION}",
        ],
        env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = run([venv / "bin/rocm-sdk", "path", "--bin"], env)
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()).is_dir()
