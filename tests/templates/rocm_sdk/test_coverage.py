"""What the installed runtime says about this machine's GPUs (rocm_sdk._coverage, the
self-test's gpu_test, initialize_process's warning), run as a user runs it: a fresh
interpreter over a fake installation, the GPU named by rocm-bootstrap's forcing variable."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.templates.tpl_kit import fake_install, rocm_sdk_tree
from tests.templates.tpl_rendering import context

VERSION = "7.1.0"
#: a legacy build of one family, named for one processor (TheRock's gfx90a-dcgpu)
LEGACY = context("legacy", ("gfx90a-dcgpu",), version=VERSION)
LIBS_90A = "_rocm_sdk_libraries_gfx90a_dcgpu"


def legacy_site(tmp_path: Path, dist_targets: str | None = "gfx90a") -> Path:
    """rocm_sdk, core (with TheRock's dist_info.json unless ``dist_targets`` is None) and
    the gfx90a-dcgpu libraries package."""
    site = tmp_path / "site"
    rocm_sdk_tree(LEGACY, tmp_path / "rocm")
    shutil.copytree(tmp_path / "rocm" / "src" / "rocm_sdk", site / "rocm_sdk")
    core = {"_rocm_sdk_core/__init__.py": b""}
    if dist_targets is not None:
        doc = json.dumps({"dist_amdgpu_targets": dist_targets}).encode()
        core["_rocm_sdk_core/share/therock/dist_info.json"] = doc
    fake_install(site, "rocm-sdk-core", VERSION, core)
    fake_install(site, "rocm-sdk-libraries-gfx90a-dcgpu", VERSION, {f"{LIBS_90A}/__init__.py": b""})
    return site


def run(site: Path, argv: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    """``python argv`` with only ``site`` added and this machine's GPUs out of the way."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ROCM_", "PYTHON"))}
    base["ROCM_SDK_KFD_TOPOLOGY"] = "/nonexistent/kfd/topology/nodes"
    base["PYTHONPATH"] = str(site)
    base["PATH"] = "/usr/bin:/bin"  # no offload-arch of this machine
    return subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, env={**base, **env}, timeout=120
    )


GPU_TEST = ["-m", "unittest", "-v", "rocm_sdk.tests.gpu_test"]


def test_legacy_libraries_of_another_family_fail_the_self_test(tmp_path: Path) -> None:
    """gfx90a-dcgpu libraries on a gfx942 machine: this build names no family for gfx942,
    and the build's dist_amdgpu_targets do not list it, so the self-test fails, naming the
    GPU, what is missing and the install; rocm-sdk targets says the same."""
    site = legacy_site(tmp_path)
    test = run(site, GPU_TEST, ROCM_BOOTSTRAP_FORCE_GFX_ARCH="gfx942")
    assert test.returncode != 0, test.stderr
    assert "could not be checked" not in test.stderr
    line = next(x for x in test.stderr.splitlines() if x.startswith("AssertionError"))
    assert line == (
        "AssertionError: gfx942 (found by forced) is not served by the installed libraries "
        f"(gfx90a-dcgpu); fix: this ROCm {VERSION} build has no libraries for gfx942 (it has "
        "gfx90a-dcgpu, compiled for gfx90a): pip install --force-reinstall --no-cache-dir "
        "'rocm[libraries]' from an index whose rocm offers a family for gfx942"
    ), test.stderr
    targets = run(site, ["-m", "rocm_sdk", "targets"], ROCM_BOOTSTRAP_FORCE_GFX_ARCH="gfx942")
    assert "rocm: GPU gfx942 (found by forced): NO device code installed; this ROCm" in (
        targets.stderr
    )
    served = run(site, GPU_TEST, ROCM_BOOTSTRAP_FORCE_GFX_ARCH="gfx90a")
    assert served.returncode == 0, served.stderr
    assert "is one for each detected GPU's family. ... ok" in served.stderr, served.stderr


def test_a_gpu_the_build_compiled_for_is_served_without_a_family_named_for_it(
    tmp_path: Path,
) -> None:
    """A processor listed in dist_amdgpu_targets runs the installed libraries' code."""
    site = legacy_site(tmp_path, dist_targets="gfx90a;gfx1030")
    test = run(site, GPU_TEST, ROCM_BOOTSTRAP_FORCE_GFX_ARCH="gfx1030")
    assert test.returncode == 0, test.stderr
    assert "is one for each detected GPU's family. ... ok" in test.stderr, test.stderr
    targets = run(site, ["-m", "rocm_sdk", "targets"], ROCM_BOOTSTRAP_FORCE_GFX_ARCH="gfx1030")
    assert (
        "rocm: GPU gfx1030 (found by forced): device code from rocm-sdk-libraries-gfx90a-dcgpu"
        in targets.stderr
    ), targets.stderr


def test_without_the_build_targets_it_could_not_be_checked(tmp_path: Path) -> None:
    """No dist_info.json: the self-test cannot tell, and says so instead of OK."""
    site = legacy_site(tmp_path, dist_targets=None)
    test = run(site, GPU_TEST, ROCM_BOOTSTRAP_FORCE_GFX_ARCH="gfx942")
    assert test.returncode == 0, test.stderr
    assert "skipped 'no target family of this build is named for gfx942" in test.stderr


INIT_SCRIPT = """\
import rocm_sdk

rocm_sdk.initialize_process()
rocm_sdk.initialize_process()
print("initialized")
"""


@pytest.mark.parametrize("warnings_filter", ["", "error"])
def test_initialize_process_warns_once_in_one_line(tmp_path: Path, warnings_filter: str) -> None:
    """Called from a script file (warnings.warn would add the source line) and twice: one
    line; a warnings filter of the application changes nothing; the variable silences it."""
    site = legacy_site(tmp_path)
    script = tmp_path / "app.py"
    script.write_text(INIT_SCRIPT)
    forced = {"ROCM_BOOTSTRAP_FORCE_GFX_ARCH": "gfx942", "PYTHONWARNINGS": warnings_filter}
    proc = run(site, [str(script)], **forced)
    assert proc.returncode == 0 and proc.stdout == "initialized\n", proc.stderr
    assert proc.stderr.splitlines() == [
        "rocm_sdk: warning: GPU gfx942 has no device code installed, so its kernels will not "
        f"load; this ROCm {VERSION} build has no libraries for gfx942 (it has gfx90a-dcgpu, "
        "compiled for gfx90a): pip install --force-reinstall --no-cache-dir 'rocm[libraries]' "
        "from an index whose rocm offers a family for gfx942 (set ROCM_SDK_NO_GPU_CHECK=1 to "
        "silence)"
    ], proc.stderr
    quiet = run(site, [str(script)], **forced, ROCM_SDK_NO_GPU_CHECK="1")
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    served = run(site, [str(script)], ROCM_BOOTSTRAP_FORCE_GFX_ARCH="gfx90a")
    assert served.returncode == 0 and served.stderr == "", served.stderr


def test_version_flag_prints_the_installed_version(tmp_path: Path) -> None:
    """``rocm-sdk --version``: the set's version on stdout, exit 0 (not a usage error)."""
    proc = run(legacy_site(tmp_path), ["-m", "rocm_sdk", "--version"])
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"{VERSION}\n", ""), proc


def test_without_a_gpu_each_command_says_so_once(tmp_path: Path) -> None:
    """No GPU: the self-test's skip line and rocm-sdk targets' note appear once each;
    targets' stdout is its one list."""
    site = legacy_site(tmp_path)
    off = {"ROCM_BOOTSTRAP_DISABLE_DETECTION": "1"}
    test = run(site, GPU_TEST, **off)
    assert test.returncode == 0, test.stderr
    assert test.stderr.count("no GPU detected") == 1, test.stderr
    targets = run(site, ["-m", "rocm_sdk", "targets"], **off)
    assert targets.returncode == 0 and targets.stdout == "gfx90a\n", targets
    assert targets.stderr.count("no GPU detected") == 1, targets.stderr
