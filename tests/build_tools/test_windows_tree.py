"""Windows artifact trees (DLLs in bin/, import libraries, no symlinks, no RPATH) built into
``win_amd64`` packages, in kpack-split and legacy mode.

The host binaries are PE images linked by lld-link around real ROCm 7 offload bundles
(compressed CCOB v3 with LLVM generic targets, from a PyPI wheel). Oracles: ``pefile``
(headers, warnings, checksums), a bundle decoder written from the spec, ``pip install
--platform win_amd64`` (the wheels' tags and RECORDs), and the ``rocm_sdk`` self-test's
own kpack checker run on the installed Windows layout.
"""

from __future__ import annotations

import collections
import hashlib
import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pefile
import pytest

from tests.kpack.bundle_fixtures import read_kpack_by_spec
from tests.pypi_inputs import Digests, independent_pe_code_objects, rocm7_bundles

from .conftest import VERSION, build_dist
from .windows_tree import write_windows_tree

pytestmark = [pytest.mark.real, pytest.mark.slow]

WHEEL = f"-{VERSION}-py3-none-win_amd64.whl"


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    return rocm7_bundles(tmp_path_factory.mktemp("jax"))


@pytest.fixture
def windows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Build for Windows, as TheRock's Windows job does on a Windows host."""
    monkeypatch.setenv("ROCM_SDK_WHEEL_PLATFORM_TAG", "win_amd64")


def _payload(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as zf:
        return {n: zf.read(n) for n in zf.namelist() if ".dist-info/" not in n}


def _python_in(site: Path, code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` with ``site`` as argv[1] and working directory; it must succeed."""
    out = subprocess.run([sys.executable, "-c", code, str(site)], cwd=site, capture_output=True,
                         text=True, check=False)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out


def test_kpack_split_windows_tree(bundles: list[bytes], tmp_path: Path, windows: None) -> None:
    tree = tmp_path / "artifacts"
    fat = write_windows_tree(tree, bundles, kpack=True, family="gfx110X-all")
    dist = build_dist(tree, tmp_path / "out")
    names = sorted(p.name for p in dist.iterdir())
    assert f"rocm-{VERSION}.tar.gz" in names
    assert all(n.endswith(WHEEL) for n in names if n.endswith(".whl"))
    assert f"rocm_sdk_device_gfx9_4_generic{WHEEL}" in names
    assert f"rocm_sdk_device_gfx90a{WHEEL}" in names

    # host DLLs: valid PE images without device code
    libraries = _payload(dist / f"rocm_sdk_libraries{WHEEL}")
    for name in ("rocblas.dll", "rocrand.dll"):
        data = libraries[f"_rocm_sdk_libraries/bin/{name}"]
        pe = pefile.PE(data=data)
        assert pe.get_warnings() == []
        assert pe.OPTIONAL_HEADER.CheckSum == pe.generate_checksum()
        hip_fat = next(s for s in pe.sections if s.Name.startswith(b".hip_fat"))
        assert hip_fat.SizeOfRawData == 0
        assert any(s.Name.startswith(b".kpackrf") for s in pe.sections)
    assert not [n for n in libraries if "TensileLibrary_lazy_gfx90a" in n]
    assert "_rocm_sdk_libraries/bin/rocblas/library/TensileLibrary.dat" in libraries
    gfx90a = _payload(dist / f"rocm_sdk_device_gfx90a{WHEEL}")
    assert any(n.endswith("TensileLibrary_lazy_gfx90a.dat") for n in gfx90a)

    # every code object in a device wheel, byte-identical
    expected: Digests = collections.Counter()
    for dll in fat.values():
        expected += independent_pe_code_objects(dll)
    archived: Digests = collections.Counter()
    for wheel in dist.glob("rocm_sdk_device_*.whl"):
        for name, data in _payload(wheel).items():
            if name.endswith(".kpack"):
                assert ":" not in name, f"{name}: Windows file systems reject ':'"
                _, kernels = read_kpack_by_spec(data)
                for (_key, target), code in kernels.items():
                    archived[(target, hashlib.sha256(code).hexdigest())] += 1
    assert archived == expected

    # core: no RPATH work on Windows, the DLL ships as it is; Windows console scripts
    core = dist / f"rocm_sdk_core{WHEEL}"
    hip = _payload(core)["_rocm_sdk_core/bin/amdhip64_7.dll"]
    assert hip == (tree / "core-hip_lib_generic/core/clr/stage/bin/amdhip64_7.dll").read_bytes()
    with zipfile.ZipFile(core) as zf:
        entry_points = zf.read(next(n for n in zf.namelist() if n.endswith("entry_points.txt")))
    assert b"hipInfo = rocm_sdk_core._cli:hipInfo" in entry_points
    assert b"rocminfo = rocm_sdk_core._cli:rocminfo" in entry_points
    info = _payload(core)["rocm_sdk_core/_dist_info.py"].decode()
    assert "SHIPPED_LIBRARIES: list[str] = ['amdhip64', 'rocrand']" in info

    # reproducible
    again = build_dist(tree, tmp_path / "out2")
    assert {p.name: p.read_bytes() for p in again.iterdir()} == {
        p.name: p.read_bytes() for p in dist.iterdir()
    }

    # installable for Windows; the rocm_sdk kpack check passes on the installed layout
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-index",
         "--find-links", str(dist), "--platform", "win_amd64", "--only-binary=:all:",
         "--target", str(site), "--no-deps",
         f"rocm-sdk-core=={VERSION}", f"rocm-sdk-libraries=={VERSION}",
         f"rocm-sdk-device-gfx9-4-generic=={VERSION}", f"rocm-sdk-device-gfx90a=={VERSION}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with tarfile.open(dist / f"rocm-{VERSION}.tar.gz") as tar:
        members = [m for m in tar.getmembers() if "/src/rocm_sdk/" in m.name and m.isfile()]
        for member in members:
            rel = member.name.split("/src/", 1)[1]
            (site / rel).parent.mkdir(parents=True, exist_ok=True)
            (site / rel).write_bytes(tar.extractfile(member).read())  # type: ignore[union-attr]
    code = (
        "import json, sys; from pathlib import Path\n"
        "from rocm_sdk import _dist_info as di\n"
        "from rocm_sdk._kpack_check import KpackChecker\n"
        "from rocm_sdk._kpack_installed import find_device_wheels\n"
        "from rocm_sdk._kpack_archive import zstandard_decompress\n"
        "site = Path(sys.argv[1]); wheels = find_device_wheels(site)\n"
        "with KpackChecker(site, zstandard_decompress(), di.generic_target) as c:\n"
        "    r = c.check(wheels, [site / '_rocm_sdk_libraries'])\n"
        "print(json.dumps({'binaries': r.binaries, 'targets': r.targets,\n"
        "                  'lookups': r.lookups, 'failures': r.message() if r.failures else ''}))\n"
    )
    out = _python_in(site, code)
    result = json.loads(out.stdout)
    assert result["failures"] == ""
    assert sorted(result["binaries"]) == [
        "_rocm_sdk_libraries/bin/rocblas.dll", "_rocm_sdk_libraries/bin/rocrand.dll"]  # fmt: skip
    assert "gfx9-4-generic" in result["targets"] and result["lookups"] > 0

    # find_libraries on the Windows code path: bin/ and the DLL patterns
    code = (
        "import sys; from rocm_sdk import _library\n"
        "_library._is_windows = lambda: True\n"
        "print([p.relative_to(sys.argv[1]).as_posix()\n"
        "       for p in _library.find_libraries('amdhip64', 'rocrand')])\n"
    )
    out = _python_in(site, code)
    assert out.stdout.strip() == (
        "['_rocm_sdk_core/bin/amdhip64_7.dll', '_rocm_sdk_libraries/bin/rocrand.dll']"
    )


def test_legacy_windows_tree(bundles: list[bytes], tmp_path: Path, windows: None) -> None:
    """Legacy mode: one libraries wheel per family, its DLLs fat and unchanged."""
    tree = tmp_path / "artifacts"
    fat = write_windows_tree(tree, bundles, kpack=False, family="gfx110X-all", rocminfo=False)
    dist = build_dist(tree, tmp_path / "out")
    wheel = dist / f"rocm_sdk_libraries_gfx110x_all{WHEEL}"
    assert wheel.is_file(), sorted(p.name for p in dist.iterdir())
    payload = _payload(wheel)
    platform = next(n.split("/")[0] for n in payload if n.endswith("/bin/rocblas.dll"))
    for relpath, dll in fat.items():
        assert payload[f"{platform}/bin/{relpath.rsplit('/', 1)[1]}"] == dll.read_bytes()
    with zipfile.ZipFile(dist / f"rocm_sdk_core{WHEEL}") as zf:
        entry_points = zf.read(next(n for n in zf.namelist() if n.endswith("entry_points.txt")))
    assert b"hipInfo" in entry_points and b"rocminfo" not in entry_points


def test_feature_qualified_archives_are_refused_on_windows(
    tmp_path: Path, windows: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """``gfx90a:xnack+`` code would need an archive named ``…_gfx90a:xnack+.kpack``, which
    Windows cannot create (``:`` opens an NTFS stream): one error, nothing written."""
    from build_tools.build_python_packages import main
    from tests.kpack.bundle_fixtures import sample_bundle

    tree = tmp_path / "artifacts"
    write_windows_tree(tree, [sample_bundle(["gfx90a:xnack+", "gfx1100"])] * 2, kpack=True,
                       family="gfx110X-all")  # fmt: skip
    dest = tmp_path / "out"
    rc = main(["--artifact-dir", str(tree), "--dest-dir", str(dest), "--version", VERSION])
    err = capsys.readouterr().err
    assert rc == 1
    assert "Windows file systems reject" in err and "gfx90a:xnack+.kpack" in err
    assert not (dest / "dist").exists()


def test_names_differing_only_in_case_are_refused_on_windows(
    tmp_path: Path,
    windows: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``Foo.py`` and ``foo.py`` are one file on NTFS: a Windows package (its wheel or its
    devel tarball) holding both is one error naming both, and nothing is written."""
    from build_tools.build_python_packages import main
    from tests.kpack.bundle_fixtures import sample_bundle

    tree = tmp_path / "artifacts"
    write_windows_tree(tree, [sample_bundle(["gfx1100"])] * 2, kpack=False, family="gfx110X-all")
    stage = tree / "core-hip_lib_generic/core/clr/stage/share/hip"
    stage.mkdir(parents=True)
    (stage / "Foo.py").write_text("a = 1\n")
    (stage / "foo.py").write_text("a = 2\n")
    cmake = tree / "core-hip_dev_generic/core/clr/stage/lib/cmake/hip"
    cmake.mkdir(parents=True)
    (cmake / "hip-config.cmake").write_text("# a\n")
    (cmake / "HIP-Config.cmake").write_text("# b\n")
    dest = tmp_path / "out"
    (dest / "dist").mkdir(parents=True)
    (dest / "dist" / "previous.whl").write_bytes(b"old")
    rc = main(["--artifact-dir", str(tree), "--dest-dir", str(dest), "--version", VERSION])
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err, err
    assert [line for line in err.splitlines() if line.startswith("error:")] == [
        "error: package member names that cannot be installed"
    ], err
    assert (
        "  - rocm-sdk-core: '_rocm_sdk_core/share/hip/Foo.py' and '_rocm_sdk_core/share/hip/"
        "foo.py' differ only in case (one file on Windows)" in err.splitlines()
    ), err
    assert (
        "  - rocm-sdk-devel: '_rocm_sdk_devel/lib/cmake/hip/HIP-Config.cmake' and "
        "'_rocm_sdk_devel/lib/cmake/hip/hip-config.cmake' differ only in case (one file on "
        "Windows)" in err.splitlines()
    ), err
    assert sorted(p.name for p in dest.iterdir()) == ["dist"]
    assert [p.name for p in (dest / "dist").iterdir()] == ["previous.whl"]
    # the same tree for Linux keeps both (a case-sensitive file system holds both)
    monkeypatch.delenv("ROCM_SDK_WHEEL_PLATFORM_TAG")
    dist = build_dist(tree, tmp_path / "linux")
    with zipfile.ZipFile(next(dist.glob("rocm_sdk_core-*.whl"))) as zf:
        names = zf.namelist()
    assert {"_rocm_sdk_core/share/hip/Foo.py", "_rocm_sdk_core/share/hip/foo.py"} <= set(names)


def test_symlinks_in_a_windows_tree_are_refused(
    bundles: list[bytes], tmp_path: Path, windows: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from build_tools.build_python_packages import main

    tree = tmp_path / "artifacts"
    write_windows_tree(tree, bundles, kpack=True, family="gfx110X-all")
    link = tree / "core-hip_lib_generic/core/clr/stage/bin/amdhip64.dll"
    link.symlink_to("amdhip64_7.dll")
    dest = tmp_path / "out"
    rc = main(["--artifact-dir", str(tree), "--dest-dir", str(dest), "--version", VERSION])
    err = capsys.readouterr().err
    assert rc == 1 and "symlinks in a Windows artifact tree" in err and str(link) in err
    assert not (dest / "dist").exists()


def test_windows_family_flags_on_a_windows_set(
    bundles: list[bytes], tmp_path: Path, windows: None
) -> None:
    """``--windows-amdgpu-families gfx110X-all``: the completeness guard counts
    gfx1100-gfx1103 as served by the gfx11-generic wheel, and the selector's Windows list
    names them with their generic target."""
    tree = tmp_path / "artifacts"
    write_windows_tree(tree, bundles, kpack=True, family="gfx110X-all")
    dist = build_dist(tree, tmp_path / "out", "--windows-amdgpu-families", "gfx110X-all")
    with tarfile.open(dist / f"rocm-{VERSION}.tar.gz") as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("rocm_sdk/_dist_info.py"))
        text = tar.extractfile(member).read().decode()  # type: ignore[union-attr]
    line = next(x for x in text.splitlines() if x.startswith("WINDOWS_TARGET_FAMILIES"))
    for target in ("gfx1100", "gfx1103", "gfx11-generic"):
        assert f"'{target}'" in line, line
