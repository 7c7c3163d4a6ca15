"""kpack finalize-wheel end to end: a hipcc-built wheel in auditwheel's layout joins a real
rocm-sdk set (the kpack-mode sample set: Debian's HIP runtime, rocRAND) and, installed in a
fresh venv with the set, loads only the set's libraries.

Oracles: readelf and patchelf 0.19 (what the files say), ``ldd`` (where ``ld.so`` resolves
every NEEDED), ``/proc/self/maps`` of a process that loads the extension and the set's HIP
runtime by its path (one object), pip (the pins resolve to the set) and
:func:`kpack.resolve.resolve_binary` on the installed files (kernels found in the installed
device wheels after ``split-wheel --finalize``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from kpack.cli import main as kpack_main
from kpack.resolve import resolve_binary
from tests.kpack.elf.elf_samples import run

from ...conftest import require
from .finalize_kit import FOO, HIP, HIP_HASHED, HSA_HASHED, PATCHELF, VERSION, build_wheel

pytestmark = [pytest.mark.real, pytest.mark.compile, pytest.mark.slow]

FINALIZED = f"kernpkg-1.0+devrocm{VERSION}-cp311-cp311-linux_x86_64.whl"


@pytest.fixture(scope="module")
def rocm_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The kpack-mode sample set (core, libraries, device wheels) in ``dist/``."""
    require(shutil.which("hipcc") is not None, "hipcc is not installed")
    from sample_tree.make_sample_tree import make_sample_tree
    from tests.build_tools.conftest import build_dist

    root = tmp_path_factory.mktemp("set")
    tree = make_sample_tree(root / "artifacts", cache_dir=None, kpack_split=True)
    return build_dist(tree, root / "out")


@pytest.fixture(scope="module")
def fat_wheel(rocm_set: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(rocm_set, tmp_path_factory.mktemp("kernpkg"))


def _finalize(wheel: Path, rocm_set: Path, out: Path, *extra: str) -> int:
    return kpack_main(
        ["finalize-wheel", str(wheel), "--output-dir", str(out), "--rocm-version", VERSION,
         "--rocm-set", str(rocm_set), *extra]
    )  # fmt: skip


def _venv(venv: Path, *find_links: Path, requirement: str) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    links = [a for d in find_links for a in ("--find-links", str(d))]
    proc = subprocess.run(
        [str(venv / "bin/python"), "-m", "pip", "--disable-pip-version-check", "install",
         "--no-cache-dir", "--no-index", *links, requirement],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return next(venv.glob("lib/python*/site-packages"))


def _ldd(path: Path) -> dict[str, str]:
    out = run(["ldd", path]).stdout
    found = {}
    for line in out.splitlines():
        name, _, where = line.strip().partition(" => ")
        if where:
            found[name] = where.split(" (", 1)[0]
    assert "not found" not in out, out
    return found


def _mapped(python: Path, *libraries: Path) -> list[str]:
    """The distinct files named libamdhip64* mapped once ``libraries`` are loaded in order."""
    code = (
        "import ctypes, json, sys\n"
        "for p in sys.argv[1:]: ctypes.CDLL(p)\n"
        "maps = open('/proc/self/maps').read().split('\\n')\n"
        "print(json.dumps(sorted({l.split()[-1] for l in maps if 'libamdhip64' in l})))\n"
    )
    proc = subprocess.run(
        [str(python), "-c", code, *map(str, libraries)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    return list(json.loads(proc.stdout))


def test_finalized_wheel_links_the_set(fat_wheel: Path, rocm_set: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert _finalize(fat_wheel, rocm_set, out, "--expected-gpu-target", "gfx900,gfx90a") == 0
    assert sorted(p.name for p in out.glob("*.whl")) == [FINALIZED]
    tree = tmp_path / "tree"
    with zipfile.ZipFile(out / FINALIZED) as archive:
        archive.extractall(tree)
        names = archive.namelist()
    assert not any(n.endswith((HIP_HASHED, HSA_HASHED, FOO)) for n in names), names
    assert f"kernpkg-1.0+devrocm{VERSION}.dist-info/RECORD" in names
    kern, deep = tree / "kernpkg/_kern.so", tree / "kernpkg/sub/_deep.so"
    assert HIP in run([PATCHELF, "--print-needed", kern]).stdout.split()
    assert run([PATCHELF, "--print-rpath", kern]).stdout.split() == [
        "$ORIGIN/../_rocm_sdk_core/lib:$ORIGIN/../kernpkg.libs"
    ]
    assert run([PATCHELF, "--print-rpath", deep]).stdout.split() == [
        "$ORIGIN/../../_rocm_sdk_libraries/lib:$ORIGIN/../../_rocm_sdk_core/lib:"
        "$ORIGIN/../../kernpkg.libs"
    ]
    for binary in (kern, deep):
        dynamic = run(["readelf", "-dW", binary]).stdout + run(["readelf", "-VW", binary]).stdout
        assert "-1a2b3c4d" not in dynamic, dynamic
    metadata = (tree / f"kernpkg-1.0+devrocm{VERSION}.dist-info/METADATA").read_text()
    requires = re.findall(r"^Requires-Dist: (.*)$", metadata, re.MULTILINE)
    assert requires == [
        f"rocm-sdk-core == {VERSION}",
        "numpy; extra == 'np'",
        f"rocm-sdk-libraries == {VERSION}",
    ]


def test_installed_with_the_set_loads_one_copy(
    fat_wheel: Path, rocm_set: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    assert _finalize(fat_wheel, rocm_set, out) == 0
    site = _venv(tmp_path / "venv", rocm_set, out, requirement="kernpkg")
    core = site / "_rocm_sdk_core/lib"
    for ext, expected in (
        ("kernpkg/_kern.so", {HIP: core}),
        ("kernpkg/sub/_deep.so", {HIP: core, "librocrand.so.1": site / "_rocm_sdk_libraries/lib"}),
    ):
        resolved = _ldd(site / ext)
        for name, directory in expected.items():
            assert Path(resolved[name]).resolve() == (directory / name).resolve(), resolved
    python = tmp_path / "venv/bin/python"
    set_hip = core / HIP
    assert _mapped(python, site / "kernpkg/_kern.so", set_hip) == [str(set_hip.resolve())]
    # the oracle tells two copies apart: the unfinalized wheel loads its vendored one too
    raw = tmp_path / "raw"
    with zipfile.ZipFile(fat_wheel) as archive:
        archive.extractall(raw)
    assert len(_mapped(python, raw / "kernpkg/_kern.so", set_hip)) == 2


def test_split_finalize_kernels_resolve_from_device_wheels(
    fat_wheel: Path, rocm_set: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    argv = ["split-wheel", "--input", str(fat_wheel), "--output-dir", str(out), "-q",
            "--device-package-prefix", "kernpkg-device", "--finalize", "--rocm-version", VERSION,
            "--rocm-set", str(rocm_set), "--expected-gpu-target", "gfx900,gfx90a"]  # fmt: skip
    assert kpack_main(argv) == 0
    wheels = sorted(p.name for p in out.glob("*.whl"))
    assert all(f"-1.0+devrocm{VERSION}-" in w for w in wheels), wheels
    for wheel in wheels:
        with zipfile.ZipFile(out / wheel) as archive:
            meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
            assert f"Requires-Dist: rocm-sdk-core == {VERSION}" in archive.read(meta).decode()
    site = _venv(tmp_path / "venv", rocm_set, out, requirement="kernpkg[device-all]")
    for ext in ("kernpkg/_kern.so", "kernpkg/sub/_deep.so"):
        _ldd(site / ext)
        for arch in ("gfx900", "gfx90a"):
            resolution = resolve_binary(site / ext, [arch])
            assert resolution.lookups and not resolution.missing, resolution
            assert all(site in a.path.parents for a in resolution.archives)
