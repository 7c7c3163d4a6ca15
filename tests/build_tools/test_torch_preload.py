"""PyTorch's `_rocm_init.py` preload list against an installed package set.

The sample tree gains the libraries TheRock ships and torch preloads, under TheRock's file
names and directories (real shared objects built here with gcc, each with its SONAME):
``libhipdnn_backend.so.1``, ``lib/rocm_sysdeps/lib/librocm_sysdeps_liblzma.so.5``,
``lib/host-math/lib/librocm-openblas.so.0`` ... Then `rocm[libraries]` is installed into a
fresh venv and torch's call runs there: every short name resolves and loads.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.build_tools.plan.test_registry import TORCH_PRELOADS

from .conftest import VERSION, build_dist, install

pytestmark = [pytest.mark.real, pytest.mark.compile, pytest.mark.slow]

FAMILY = "gfx90a-dcgpu"
# short name -> (artifact name and component, relpath); the sample tree ships the rest
STUBS = {
    "amd_smi": ("core-amdsmi_lib", "lib/libamd_smi.so.26"),
    "hiprtc": ("core-hip_lib", "lib/libhiprtc.so.7"),
    "rocm_smi64": ("core-amdsmi_lib", "lib/librocm_smi64.so.7"),
    "rocm_sysdeps_liblzma": ("sysdeps_lib", "lib/rocm_sysdeps/lib/librocm_sysdeps_liblzma.so.5"),
    "rocm-openblas": ("host-blas_lib", "lib/host-math/lib/librocm-openblas.so.0"),
    "rocprofiler-sdk": ("rocprofiler-sdk_lib", "lib/librocprofiler-sdk.so.1"),
    "rocprofiler-sdk-roctx": ("rocprofiler-sdk_lib", "lib/librocprofiler-sdk-roctx.so.1"),
    "roctracer64": ("rocprofiler-sdk_lib", "lib/libroctracer64.so.4"),
    "roctx64": ("rocprofiler-sdk_lib", "lib/libroctx64.so.4"),
    "hipfile": ("hipfile_lib", "lib/libhipfile.so.0"),
    "hipblas": ("blas_lib", "lib/libhipblas.so.3"),
    "hipblaslt": ("blas_lib", "lib/libhipblaslt.so.1"),
    "hipsparse": ("blas_lib", "lib/libhipsparse.so.4"),
    "hipsparselt": ("blas_lib", "lib/libhipsparselt.so.0"),
    "hipsolver": ("blas_lib", "lib/libhipsolver.so.1"),
    "hipfft": ("fft_lib", "lib/libhipfft.so.0"),
    "miopen": ("miopen_lib", "lib/libMIOpen.so.1"),
    "hipdnn": ("hipdnn_lib", "lib/libhipdnn_backend.so.1"),
    "rccl": ("rccl_lib", "lib/librccl.so.1"),
}
# libraries-package artifacts are family-named in a legacy tree, core ones generic
_TARGET_SPECIFIC = ("blas_lib", "fft_lib", "miopen_lib", "hipdnn_lib", "rccl_lib")


def _stub(path: Path, work: Path) -> None:
    """A real shared object whose SONAME is its file name."""
    source = work / "stub.c"
    source.write_text("int rocm_stub_marker(void) { return 42; }\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["gcc", "-shared", "-fPIC", f"-Wl,-soname,{path.name}", "-o", str(path), str(source)],
        check=True,
    )


def _add_stubs(tree: Path, work: Path) -> list[str]:
    added = []
    for shortname, (prefix, relpath) in sorted(STUBS.items()):
        artifact = f"{prefix}_{FAMILY if prefix in _TARGET_SPECIFIC else 'generic'}"
        stage = f"stubs/{prefix}/stage"
        target = tree / artifact / stage / relpath
        if target.exists():
            continue
        _stub(target, work)
        manifest = tree / artifact / "artifact_manifest.txt"
        stages = set(manifest.read_text().split()) if manifest.exists() else set()
        manifest.write_text("\n".join(sorted(stages | {stage})) + "\n")
        added.append(shortname)
    return added


def test_torch_preloads_resolve_and_load(sample_tree: Path, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(sample_tree, tree, symlinks=True)
    assert _add_stubs(tree, tmp_path)
    dist = build_dist(tree, tmp_path / "out")
    venv = tmp_path / "venv"
    install(dist, venv, f"rocm[libraries]=={VERSION}")
    code = (
        "import json, sys, rocm_sdk\n"
        "names = json.loads(sys.argv[1])\n"
        "paths = rocm_sdk.find_libraries(*names)\n"
        "assert len(paths) == len(names), paths\n"
        "rocm_sdk.initialize_process(preload_shortnames=names, check_version=sys.argv[2])\n"
        "print(json.dumps(sorted(rocm_sdk._library._ALL_CDLLS)))\n"
    )
    proc = subprocess.run(
        [str(venv / "bin/python"), "-c", code, json.dumps(TORCH_PRELOADS), VERSION],
        capture_output=True, text=True, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == sorted(TORCH_PRELOADS)
