"""Shared package owners and owner dependencies in a kpack-split build.

``gfx1250`` and ``gfx1250-strict`` code ships in one ``rocm-sdk-device-gfx1250`` wheel with
one ``device-gfx1250`` extra (TheRock#8280); a file both payloads ship is an error. Every
device wheel requires the wheels holding the rest of its processor's code (its generic
target's), pinned, so installing the leaf alone is complete (rocm-systems#10685).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from email.parser import BytesHeaderParser
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from build_tools.build_python_packages import main
from tests.kpack.bundle_fixtures import sample_bundle
from tests.kpack.transform_fixtures import synthetic

from ..conftest import require
from .conftest import VERSION, build_dist, install
from .treeutil import add_artifact, write_manifest

TARGETS = ["gfx1250", "gfx1250-strict", "gfx12-5-generic", "gfx1100", "gfx11-generic", "gfx942"]
BLAS = "math-libs/BLAS/rocBLAS/stage"


def _tree(root: Path) -> Path:
    require(shutil.which("gcc") is not None, "gcc is not installed")
    write_manifest(root, kpack=True)
    fat = synthetic(root.parent / "synth", "rocblas", sample_bundle(TARGETS), [0])
    add_artifact(root, "blas_lib_gfx125X-all", BLAS, {
        "lib/librocblas.so.5": fat.read_bytes(),
        "lib/rocblas/library/TensileLibrary_lazy_gfx1250.dat": b"gfx1250 kernel database",
        "lib/rocblas/library/TensileLibrary_lazy_gfx1250-strict.dat": b"gfx1250-strict database",
    })  # fmt: skip
    return root


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("owner")
    return build_dist(_tree(base / "artifacts"), base / "out")


def _wheel(dist: Path, project: str) -> Path:
    found = sorted(dist.glob(f"{project}-{VERSION}-*.whl"))
    assert len(found) == 1, sorted(p.name for p in dist.iterdir())
    return found[0]


def _metadata(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        headers = BytesHeaderParser().parsebytes(zf.read(name))
    return [Requirement(r) for r in headers.get_all("Requires-Dist", [])]


def test_one_owner_wheel_holds_strict_and_non_strict(dist: Path) -> None:
    devices = sorted(p.name.split("-")[0] for p in dist.glob("rocm_sdk_device_*.whl"))
    assert devices == [
        "rocm_sdk_device_gfx1100",
        "rocm_sdk_device_gfx11_generic",
        "rocm_sdk_device_gfx1250",
        "rocm_sdk_device_gfx12_5_generic",
        "rocm_sdk_device_gfx942",
    ]
    with zipfile.ZipFile(_wheel(dist, "rocm_sdk_device_gfx1250")) as zf:
        archives = sorted(Path(n).name for n in zf.namelist() if n.endswith(".kpack"))
        names = zf.namelist()
    assert archives == ["blas_lib_gfx1250-strict.kpack", "blas_lib_gfx1250.kpack"]
    for target in ("gfx1250", "gfx1250-strict"):
        assert any(n.endswith(f"TensileLibrary_lazy_{target}.dat") for n in names), target
    report = json.loads((dist.parent / "report.json").read_text())
    rows = {r["target"]: r for r in report["device_wheels"]}
    assert sorted(rows) == ["gfx11-generic", "gfx1100", "gfx12-5-generic", "gfx1250", "gfx942"]
    assert rows["gfx1250"]["kernels"] == 2 and rows["gfx1250"]["database_files"] == 2

    with tarfile.open(dist / f"rocm-{VERSION}.tar.gz") as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/PKG-INFO"))
        extracted = tar.extractfile(member)
        assert extracted is not None
        pkg_info = BytesHeaderParser().parsebytes(extracted.read())
    extras = pkg_info.get_all("Provides-Extra", [])
    assert "device-gfx1250" in extras
    assert not [e for e in extras if "strict" in e]
    gfx1250 = [r for r in pkg_info.get_all("Requires-Dist", []) if 'extra == "device-gfx1250"' in r]
    assert sorted(Requirement(r).name for r in gfx1250) == [
        "rocm-sdk-device-gfx12-5-generic",
        "rocm-sdk-device-gfx1250",
    ]


def test_device_wheels_require_their_generic_target_pinned(dist: Path) -> None:
    def requires(project: str) -> dict[str, str]:
        return {r.name: str(r.specifier) for r in _metadata(_wheel(dist, project))}

    pin = f"=={VERSION}"
    assert requires("rocm_sdk_device_gfx1100") == {
        "rocm-sdk-libraries": pin,
        "rocm-sdk-device-gfx11-generic": pin,
    }
    assert requires("rocm_sdk_device_gfx1250") == {
        "rocm-sdk-libraries": pin,
        "rocm-sdk-device-gfx12-5-generic": pin,
    }
    # gfx942's generic target (gfx9-4-generic) has no code in this set: no requirement
    assert requires("rocm_sdk_device_gfx942") == {"rocm-sdk-libraries": pin}
    assert requires("rocm_sdk_device_gfx11_generic") == {"rocm-sdk-libraries": pin}


def test_installing_a_leaf_device_wheel_pulls_its_generic_target(
    dist: Path, tmp_path: Path
) -> None:
    site = install(dist, tmp_path / "venv", f"rocm-sdk-device-gfx1100=={VERSION}")
    installed = sorted(p.name.split("-")[0] for p in site.glob("rocm_sdk_*.dist-info"))
    assert "rocm_sdk_device_gfx11_generic" in installed
    assert "rocm_sdk_device_gfx1250" not in installed


def test_colliding_files_of_one_owner_are_one_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _tree(tmp_path / "artifacts")
    fft = "math-libs/rocFFT/stage"
    for target in ("gfx1250", "gfx1250-strict"):
        add_artifact(tree, f"fft_lib_{target}", fft, {"lib/rocfft/kernels.dat": target})
    argv = ["--artifact-dir", str(tree), "--dest-dir", str(tmp_path / "out"), "--version", VERSION]
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert err.count("share one device package") == 1, err
    assert "lib/rocfft/kernels.dat: fft_lib_gfx1250 and fft_lib_gfx1250-strict" in err
    assert not (tmp_path / "out" / "dist").exists()


def test_self_test_on_a_gfx1250_machine(dist: Path, tmp_path: Path) -> None:
    """``rocm[device-gfx1250]`` installs the owner wheel and its generic target's; on a KFD
    gfx1250 (120500, also what a gfx1250-strict part reports) ``rocm-sdk test`` passes: the
    strict archives belong to the gfx1250 wheel and every kernel resolves."""
    venv = tmp_path / "venv"
    site = install(dist, venv, f"rocm[libraries,device-gfx1250]=={VERSION}")
    installed = sorted(p.name.split("-")[0] for p in site.glob("rocm_sdk_device_*.dist-info"))
    assert installed == ["rocm_sdk_device_gfx1250", "rocm_sdk_device_gfx12_5_generic"]
    kfd = tmp_path / "kfd"
    for node, simds, version in (("0", 0, 0), ("1", 64, 120500)):
        (kfd / node).mkdir(parents=True)
        (kfd / node / "properties").write_text(
            f"simd_count {simds}\ngfx_target_version {version}\n"
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DETECTION_VARIABLES)}
    env["ROCM_SDK_KFD_TOPOLOGY"] = str(kfd)
    test = subprocess.run([str(venv / "bin/rocm-sdk"), "test"], capture_output=True, text=True,
                          env=env, timeout=900, check=False)  # fmt: skip
    out = test.stdout + test.stderr
    assert test.returncode == 0, out[-6000:]
    assert "testDeviceArchivesMatchTheirNames" in out
    assert "testKernelsFoundForInstalledTargets" in out


_DETECTION_VARIABLES = ("ROCM_SDK_TARGET_FAMILY", "ROCM_BOOTSTRAP_", "ROCM_SDK_KFD_TOPOLOGY")


@pytest.mark.parametrize("arch", ["gfx1250", "gfx1250-strict"])
def test_kpack_resolve_finds_both_payloads_of_the_owner_wheel(
    dist: Path, tmp_path: Path, arch: str
) -> None:
    for project in ("rocm_sdk_libraries", "rocm_sdk_device_gfx1250"):
        with zipfile.ZipFile(_wheel(dist, project)) as zf:
            zf.extractall(tmp_path)
    (library,) = tmp_path.glob("_rocm_sdk_libraries*/lib/librocblas.so.5")
    argv = [sys.executable, "-m", "kpack", "resolve", "--no-generic", "--arch", arch, str(library)]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"blas_lib_{arch}.kpack" in proc.stdout + proc.stderr
