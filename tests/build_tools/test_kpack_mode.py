"""Kpack-split mode end to end on the real sample tree (fat and pre-split inputs)."""

from __future__ import annotations

import collections
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

from build_tools.build_python_packages import main
from kpack.resolve import resolve_binary
from kpack.split import split_artifact
from tests.wheel_checks import check_dist_for_upload

from ..conftest import require
from .conftest import VERSION, build_dist, install

pytestmark = [pytest.mark.real, pytest.mark.compile, pytest.mark.slow]

TARGETS = ["gfx1030", "gfx803", "gfx900", "gfx906", "gfx908", "gfx90a"]
WHEEL = f"-{VERSION}-py3-none-linux_x86_64.whl"


@pytest.fixture(scope="module")
def fat_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require(shutil.which("hipcc") is not None, "hipcc is not installed")
    from sample_tree.make_sample_tree import make_sample_tree

    out = tmp_path_factory.mktemp("kpack") / "artifacts"
    return make_sample_tree(out, cache_dir=None, family="gfx90a-dcgpu", kpack_split=True)


@pytest.fixture(scope="module")
def presplit_tree(fat_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same tree split ahead of time, as rocm-kpack's splitter lays it out."""
    tree = tmp_path_factory.mktemp("presplit") / "artifacts"
    shutil.copytree(fat_tree, tree, symlinks=True)
    for name in ("rand_lib_generic", "fft_lib_generic"):
        src = tmp_path_factory.mktemp("src") / name
        shutil.move(str(tree / name), src)
        split_artifact(src, tree, prefix=name.rsplit("_", 1)[0])
    return tree


@pytest.fixture(scope="module")
def fat_dist(fat_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_dist(fat_tree, tmp_path_factory.mktemp("out"))


def _digests(dist: Path) -> dict[str, str]:
    return {
        p.relative_to(dist).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(dist.rglob("*"))
        if p.is_file()
    }


def _payload(wheel: Path) -> dict[str, zipfile.ZipInfo]:
    with zipfile.ZipFile(wheel) as zf:
        return {i.filename: i for i in zf.infolist() if ".dist-info/" not in i.filename}


def test_package_set_and_report(fat_dist: Path) -> None:
    names = sorted(p.name for p in fat_dist.iterdir())
    expected = (  # distributions only: twine upload dist/* works as is
        [f"rocm-{VERSION}.tar.gz"]
        + [
            f"{n}{WHEEL}"
            for n in ("rocm_profiler", "rocm_sdk_core", "rocm_sdk_devel", "rocm_sdk_libraries")
        ]
        + [f"rocm_sdk_device_{t}{WHEEL}" for t in TARGETS]
    )
    assert names == sorted(expected)
    report = json.loads((fat_dist.parent / "report.json").read_text())
    assert (fat_dist.parent / "report.md").is_file()
    rows = {r["target"]: r for r in report["device_wheels"]}
    assert sorted(rows) == sorted(TARGETS)
    # gfx90a merges xnack+ and xnack-: librocrand, libhipsample, libhipsample_lld, twice
    assert rows["gfx90a"]["kernels"] == 6 and rows["gfx803"]["kernels"] == 1
    for t in report["targets"]:
        assert 0 < t["download_bytes"] < t["fat_download_bytes"]


def test_dist_is_upload_ready(fat_dist: Path) -> None:
    check_dist_for_upload(fat_dist)


def test_device_wheels_own_nothing_else_owns(fat_dist: Path) -> None:
    owners: dict[str, str] = {}
    for wheel in sorted(fat_dist.glob("*.whl")):
        for name in _payload(wheel):
            assert name not in owners, f"{name} is in {wheel.name} and {owners[name]}"
            owners[name] = wheel.name
    for target in TARGETS:
        payload = _payload(fat_dist / f"rocm_sdk_device_{target}{WHEEL}")
        assert not [n for n in payload if n.endswith(".py")]
        assert f"_rocm_sdk_libraries/.devel_links/{target}.json" in payload
        kpacks = [i for n, i in payload.items() if n.endswith(".kpack")]
        assert kpacks and all(i.compress_type == zipfile.ZIP_STORED for i in kpacks)
    libraries = _payload(fat_dist / f"rocm_sdk_libraries{WHEEL}")
    assert "_rocm_sdk_libraries/lib/librocrand.so.1" in libraries
    assert not [n for n in libraries if n.endswith(".kpack")]


def _rocrand_path(venv: Path) -> str:
    code = (
        "import ctypes, rocm_sdk; p = rocm_sdk.find_libraries('rocrand')[0]; "
        "v = ctypes.c_int(); ctypes.CDLL(str(p)).rocrand_get_version(ctypes.byref(v)); "
        "print(p, v.value)"
    )
    out = subprocess.run(
        [str(venv / "bin/python"), "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert int(out[1]) > 0
    return out[0]


def _self_test(venv: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DETECTION_VARIABLES)}
    env.update(extra)
    return subprocess.run(
        [str(venv / "bin/rocm-sdk"), "test"], capture_output=True, text=True, env=env, timeout=900
    )


#: what decides which GPU the self-test checks: this machine's own GPUs take no part
_DETECTION_VARIABLES = ("ROCM_SDK_TARGET_FAMILY", "ROCM_BOOTSTRAP_", "ROCM_SDK_KFD_TOPOLOGY")


def _kfd_topology(root: Path, gfx_target_version: int) -> Path:
    """A fake KFD topology: node 0 a CPU, node 1 a GPU of ``gfx_target_version``."""
    for node, simds, version in (("0", 0, 0), ("1", 64, gfx_target_version)):
        (root / node).mkdir(parents=True)
        text = f"simd_count {simds}\ngfx_target_version {version}\n"
        (root / node / "properties").write_text(text)
    return root


def test_self_test_fails_for_a_gpu_without_device_code(fat_dist: Path, tmp_path: Path) -> None:
    """Only gfx1030's device code installed: a gfx90a machine must fail the self-test, naming
    the GPU and the install that fixes it; once gfx90a's device wheel is in, it passes."""
    venv = tmp_path / "venv"
    install(fat_dist, venv, f"rocm[libraries,device-gfx1030]=={VERSION}")
    gfx90a = {"ROCM_SDK_KFD_TOPOLOGY": str(_kfd_topology(tmp_path / "kfd90a", 90010))}
    failed = _self_test(venv, **gfx90a)
    out = failed.stdout + failed.stderr
    assert failed.returncode != 0, out[-4000:]
    assert "gfx90a (found by kfd) has no device code" in out, out[-4000:]
    assert f"pip install 'rocm[device-gfx90a]=={VERSION}'" in out
    forced = _self_test(venv, ROCM_BOOTSTRAP_FORCE_GFX_ARCH="gfx90a:xnack-")
    assert forced.returncode != 0 and "gfx90a:xnack- (found by forced)" in forced.stderr
    gfx1030 = {"ROCM_SDK_KFD_TOPOLOGY": str(_kfd_topology(tmp_path / "kfd1030", 100300))}
    served = _self_test(venv, **gfx1030)
    assert served.returncode == 0, (served.stdout + served.stderr)[-4000:]
    assert "testDeviceCodeForEveryDetectedGpu" in served.stderr
    missing = (
        "GPU gfx90a (found by kfd): NO device code installed; "
        f"pip install 'rocm[device-gfx90a]=={VERSION}'"
    )
    assert missing in _run(venv, ["rocm-sdk", "targets"], **gfx90a).stderr
    warned = _run(venv, ["python", "-c", _INIT], **gfx90a).stderr
    assert warned.count("GPU gfx90a has no device code installed") == 1, warned
    quiet = _run(venv, ["python", "-c", _INIT], **gfx90a, ROCM_SDK_NO_GPU_CHECK="1")
    assert "device code" not in quiet.stderr
    pip = [str(venv / "bin/python"), "-m", "pip", "install", "-q", "--no-index", "--find-links"]
    subprocess.run([*pip, str(fat_dist), f"rocm-sdk-device-gfx90a=={VERSION}"], check=True)
    fixed = _self_test(venv, **gfx90a)
    assert fixed.returncode == 0, (fixed.stdout + fixed.stderr)[-4000:]
    served = _run(venv, ["rocm-sdk", "targets"], **gfx90a).stderr
    assert "GPU gfx90a (found by kfd): device code from rocm_sdk_device_gfx90a" in served, served
    assert "device code" not in _run(venv, ["python", "-c", _INIT], **gfx90a).stderr


#: what frameworks call at import
_INIT = "import rocm_sdk; rocm_sdk.initialize_process(); rocm_sdk.initialize_process()"


def _run(venv: Path, argv: list[str], **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DETECTION_VARIABLES)}
    env.update(extra)
    command = [str(venv / "bin" / argv[0]), *argv[1:]]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


def test_a_device_wheel_in_another_site_dir_serves_the_base_install(
    fat_dist: Path, tmp_path: Path
) -> None:
    """gfx90a's device wheel installed in another directory on sys.path than the libraries
    (``pip install --target`` + PYTHONPATH; the same holds for a --system-site-packages venv
    over a system install, or --user): the self-test finds it, and initialize_process hands
    its archives to the runtime (ROCM_KPACK_PATH_PREFIX); the base alone fails for gfx90a."""
    base = tmp_path / "base"
    install(fat_dist, base, f"rocm[libraries,device-gfx1030]=={VERSION}")
    layer = tmp_path / "layer"
    pip = [str(base / "bin/python"), "-m", "pip", "install", "-q", "--no-index", "--no-deps"]
    subprocess.run(
        [*pip, "--target", str(layer), "--find-links", str(fat_dist),
         f"rocm-sdk-device-gfx90a=={VERSION}"],
        check=True,
    )  # fmt: skip
    assert (layer / "_rocm_sdk_libraries" / ".kpack").is_dir()
    assert not (layer / "_rocm_sdk_libraries" / "lib" / "librocrand.so.1").exists()
    gfx90a = {"ROCM_SDK_KFD_TOPOLOGY": str(_kfd_topology(tmp_path / "kfd", 90010))}
    assert _self_test(base, **gfx90a).returncode != 0
    layered = {**gfx90a, "PYTHONPATH": str(layer)}
    test = _run(base, ["python", "-m", "rocm_sdk", "test"], **layered)
    assert test.returncode == 0, (test.stdout + test.stderr)[-4000:]
    code = (
        "import os, rocm_sdk; rocm_sdk.initialize_process(); "
        "print(os.environ.get('ROCM_KPACK_PATH_PREFIX', ''))"
    )
    prefix = _run(base, ["python", "-c", code], **layered).stdout.strip().split(os.pathsep)
    assert prefix == [
        str(layer / "_rocm_sdk_libraries" / ".kpack" / f"{name}_@GFXARCH@.kpack")
        for name in ("fft_lib", "rand_lib")
    ], prefix
    targets = _run(base, ["rocm-sdk", "targets"], **layered).stderr
    assert "GPU gfx90a (found by kfd): device code from rocm_sdk_device_gfx90a" in targets


def test_without_a_gpu_the_self_test_says_what_it_could_not_check(
    fat_dist: Path, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    install(fat_dist, venv, f"rocm[libraries,device-gfx90a]=={VERSION}")
    test = _self_test(venv, ROCM_BOOTSTRAP_DISABLE_DETECTION="1")
    assert test.returncode == 0, (test.stdout + test.stderr)[-4000:]
    assert "no GPU detected" in test.stderr and "could not be checked" in test.stderr
    targets = _run(venv, ["rocm-sdk", "targets"], ROCM_BOOTSTRAP_DISABLE_DETECTION="1")
    assert "rocm: no GPU detected on this machine" in targets.stderr, targets.stderr


def test_rocm_device_without_a_gpu_records_that_it_installed_nothing(
    fat_dist: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rocm[device] built where no GPU is visible installs no device code: the wheel's
    record and rocm-sdk targets say so and name the command that installs a GPU's."""
    for name in [k for k in os.environ if k.startswith(_DETECTION_VARIABLES)]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("ROCM_BOOTSTRAP_DISABLE_DETECTION", "1")
    venv = tmp_path / "venv"
    site = install(fat_dist, venv, f"rocm[libraries,device]=={VERSION}")
    assert not list(site.glob("rocm_sdk_device_*.dist-info"))
    chosen = json.loads((site / "rocm_sdk" / "_selection.json").read_text())
    assert chosen["device_extra"] == [] and "no GPU being found" in chosen["how"]
    fix = f"pip install 'rocm[device-gfx1030]=={VERSION}'"
    assert chosen["device_fix"] == fix
    targets = _run(venv, ["rocm-sdk", "targets"], ROCM_BOOTSTRAP_DISABLE_DETECTION="1").stderr
    line = next(x for x in targets.splitlines() if "'device' extra" in x)
    assert line.startswith(
        "rocm: the 'device' extra of the rocm package installed no device code when pip or uv "
        "built it (the build's default, no GPU being found on this machine); " + fix
    ), targets
    assert "chose target family" not in targets


def test_pip_install_and_self_test(fat_dist: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    site = install(fat_dist, venv, f"rocm[libraries,device-gfx90a]=={VERSION}")
    assert "/_rocm_sdk_libraries/lib/librocrand.so.1" in _rocrand_path(venv)
    test = _self_test(venv)
    assert test.returncode == 0, test.stdout[-3000:] + test.stderr[-6000:]
    assert "testKernelsFoundForInstalledTargets" in test.stderr + test.stdout
    # the integrity test can fail: truncate an installed archive
    archive = next((site / "_rocm_sdk_libraries" / ".kpack").glob("rand_lib_gfx90a:xnack+*.kpack"))
    archive.write_bytes(archive.read_bytes()[:-64])
    broken = _self_test(venv)
    assert broken.returncode != 0
    assert "rand_lib_gfx90a:xnack+" in broken.stdout + broken.stderr


def test_uv_install_and_self_test(fat_dist: Path, tmp_path: Path) -> None:
    uv = shutil.which("uv")
    require(uv is not None, "uv is not installed (pip install uv)")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    proc = subprocess.run(
        [
            str(uv),
            "pip",
            "install",
            "--python",
            str(venv / "bin/python"),
            "--offline",
            "--no-index",
            "--find-links",
            str(fat_dist),
            f"rocm[libraries,device-gfx90a]=={VERSION}",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "/_rocm_sdk_libraries/lib/librocrand.so.1" in _rocrand_path(venv)
    test = _self_test(venv)
    assert test.returncode == 0, test.stdout[-3000:] + test.stderr[-6000:]


def test_uninstalling_a_device_wheel_leaves_libraries_intact(
    fat_dist: Path, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    site = install(fat_dist, venv, f"rocm[libraries,device-gfx90a,device-gfx1030]=={VERSION}")
    pip = [str(venv / "bin/python"), "-m", "pip"]
    subprocess.run([*pip, "uninstall", "-y", "-q", "rocm-sdk-device-gfx1030"], check=True)
    assert (site / "_rocm_sdk_libraries" / "__init__.py").is_file()
    assert not list((site / "_rocm_sdk_libraries" / ".kpack").glob("*gfx1030*"))
    assert _rocrand_path(venv)
    test = _self_test(venv)
    assert test.returncode == 0, test.stdout[-3000:] + test.stderr[-6000:]


def test_presplit_input_gives_the_same_packages(
    presplit_tree: Path, fat_dist: Path, tmp_path: Path
) -> None:
    assert (presplit_tree / "rand_lib_gfx90a:xnack+").is_dir()
    dist = build_dist(presplit_tree, tmp_path / "out")
    assert _digests(dist) == _digests(fat_dist)
    venv = tmp_path / "venv"
    install(dist, venv, f"rocm[libraries,devel,device-gfx90a]=={VERSION}")
    test = _self_test(venv)
    assert test.returncode == 0, test.stdout[-3000:] + test.stderr[-6000:]


def test_shards_reproduce_the_full_build(fat_tree: Path, fat_dist: Path, tmp_path: Path) -> None:
    full = _digests(fat_dist)
    for shard in ("gfx90a", "gfx1030,gfx803"):
        dist = build_dist(fat_tree, tmp_path / shard.replace(",", "-"), "--targets", shard)
        got = {k: v for k, v in _digests(dist).items() if not k.startswith("report.")}
        devices = {k for k in got if k.startswith("rocm_sdk_device_")}
        assert {d.split("-")[0].rsplit("_", 1)[1] for d in devices} == set(shard.split(","))
        for name, digest in got.items():
            assert full[name] == digest, name


def test_platform_markers_from_family_flags(fat_tree: Path, tmp_path: Path) -> None:
    dist = build_dist(
        fat_tree,
        tmp_path / "out",
        "--linux-amdgpu-families",
        "gfx90a;gfx908,gfx900",
        "--windows-amdgpu-families",
        "gfx1030",
    )
    venv = tmp_path / "venv"
    install(dist, venv, f"rocm[device-all]=={VERSION}")
    listed = subprocess.run(
        [str(venv / "bin/python"), "-m", "pip", "list", "--format=freeze"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    installed = {line.split("==")[0] for line in listed.split() if "device" in line}
    # gfx1030 is Windows-only here; gfx803/gfx906 are in neither list, so unmarked
    assert installed == {
        f"rocm-sdk-device-{t}" for t in ("gfx803", "gfx900", "gfx906", "gfx908", "gfx90a")
    }


def _fails(
    tree: Path, dest: Path, capsys: pytest.CaptureFixture[str], needle: str, *extra: str
) -> None:
    rc = main(["--artifact-dir", str(tree), "--dest-dir", str(dest), "--version", VERSION, *extra])
    err = capsys.readouterr().err
    assert rc == 1, err
    assert len([line for line in err.splitlines() if line.startswith("error:")]) == 1, err
    assert needle in err, err
    assert not dest.exists() or not any(dest.iterdir())


def test_missing_targets_against_family_flags(
    fat_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _fails(
        fat_tree,
        tmp_path / "out",
        capsys,
        "missing fetched artifact targets: gfx1100",
        "--linux-amdgpu-families",
        "gfx110X-dgpu",
    )


def _copy(tree: Path, tmp_path: Path) -> Path:
    out = tmp_path / "tree"
    shutil.copytree(tree, out, symlinks=True)
    return out


def test_invalid_isa_target_dir(
    presplit_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _copy(presplit_tree, tmp_path)
    (tree / "rand_lib_gfx90a:xnack+").rename(tree / "rand_lib_gfx9zz")
    _fails(tree, tmp_path / "out", capsys, "rand_lib_gfx9zz")


def test_device_file_overwriting_a_libraries_file(
    presplit_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _copy(presplit_tree, tmp_path)
    stage = tree / "rand_lib_gfx1030" / "math-libs/rocRAND/stage"
    (stage / "lib").mkdir(parents=True, exist_ok=True)
    (stage / "lib" / "librocrand.so.1").write_bytes(b"not the library")
    _fails(tree, tmp_path / "out", capsys, "would overwrite")


def test_host_binary_referencing_missing_archives(
    presplit_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _copy(presplit_tree, tmp_path)
    archives = [p for p in tree.glob("rand_lib_gfx*/**/*.kpack") if p.is_file()]
    assert archives
    for archive in archives:
        archive.unlink()
    _fails(tree, tmp_path / "out", capsys, ".kpack/rand_lib_@GFXARCH@.kpack")


def test_mixed_split_and_fat_forms(
    fat_tree: Path, presplit_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _copy(fat_tree, tmp_path)
    shutil.copytree(presplit_tree / "rand_lib_gfx1030", tree / "rand_lib_gfx1030")
    _fails(tree, tmp_path / "out", capsys, "mixes split and unsplit")


def test_target_without_code_in_every_library(fat_dist: Path, tmp_path: Path) -> None:
    """libhipsample has no gfx906 code (rocRAND has): installing gfx906 must still pass."""
    venv = tmp_path / "venv"
    install(fat_dist, venv, f"rocm[libraries,device-gfx906]=={VERSION}")
    test = _self_test(venv)
    assert test.returncode == 0, test.stdout[-3000:] + test.stderr[-6000:]


def test_dry_run_prints_the_split_plan_and_writes_nothing(
    fat_tree: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scratch = tmp_path / "tmpdir"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    before = sorted(p.relative_to(fat_tree) for p in fat_tree.rglob("*"))
    dest = tmp_path / "out"
    argv = ["--artifact-dir", str(fat_tree), "--dest-dir", str(dest), "--version", VERSION]
    assert main([*argv, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "split rand_lib_generic (in " in out and "split fft_lib_generic (in " in out
    rand = out[out.index("split rand_lib_generic") :]
    for target in TARGETS:  # archives carry the full target id (gfx90a:xnack+)
        assert re.search(rf"\n  {target}(:xnack[+-])?: 1 kernel, ", rand), target
    assert "rocm-sdk-device-gfx90a" in out
    assert not dest.exists()
    assert not any(scratch.iterdir())
    assert sorted(p.relative_to(fat_tree) for p in fat_tree.rglob("*")) == before


def test_transformed_binaries_are_streamed_once_into_their_wheel(
    fat_tree: Path, fat_dist: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No transformed host binary is written to disk on the way: the transform is planned,
    composed with the RPATH edit and streamed into the wheel; the result is the same."""
    from kpack.elf._edit import ElfEdit

    def refuse(self: ElfEdit, dest: Path, *, replace_source: bool = False) -> None:
        raise AssertionError(f"an edit of {self.path} was written to {dest}")

    monkeypatch.setattr(ElfEdit, "write_to", refuse)
    dist = build_dist(fat_tree, tmp_path / "out")
    assert _digests(dist) == _digests(fat_dist)


def test_each_file_is_read_once_and_archives_go_straight_into_wheels(
    fat_tree: Path, fat_dist: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One scan, one model: each file's headers are read once for the whole build (the
    split's classification, the RPATH rules and the archive-reference check all ask the
    catalog's facts table), and no .kpack is written as a file on the way to its wheel."""
    from kpack.archive import _write as _archive_write
    from kpack.artifact import facts as file_facts
    from kpack.split import _archives as _split_work

    reads: collections.Counter[Path] = collections.Counter()
    real = file_facts.read_facts

    def counting(path: Path) -> file_facts.FileFacts:
        reads[path] += 1
        return real(path)

    def refuse(*args: object, **kwargs: object) -> int:
        raise AssertionError(f"an archive was written to a file: {args[:1]}")

    monkeypatch.setattr(file_facts, "read_facts", counting)
    monkeypatch.setattr(_archive_write, "write_file", refuse)
    monkeypatch.setattr(_split_work, "write_chunks", refuse)
    dist = build_dist(fat_tree, tmp_path / "out")
    assert len(reads) > 20 and set(reads.values()) == {1}, reads.most_common(3)
    assert _digests(dist) == _digests(fat_dist)


def _family_named(fat_tree: Path, tmp_path: Path, family: str) -> Path:
    """The fat tree as TheRock writes ``artifacts-unsplit/``: every target-specific
    component (lib, dev, doc, test) carries the family name instead of ``generic``."""
    tree = _copy(fat_tree, tmp_path)
    for child in sorted(tree.iterdir()):
        name = child.name.rsplit("_", 1)[0]
        if name.split("_")[0] in ("rand", "fft", "prim") and child.name.endswith("_generic"):
            child.rename(tree / f"{name}_{family}")
    return tree


@pytest.mark.parametrize("family", ["gfx90a-dcgpu", "gfx94X-dcgpu"])
def test_family_named_unsplit_artifacts_give_the_same_packages(
    fat_tree: Path, fat_dist: Path, tmp_path: Path, family: str
) -> None:
    tree = _family_named(fat_tree, tmp_path, family)
    assert (tree / f"rand_lib_{family}").is_dir() and (tree / f"prim_doc_{family}").is_dir()
    dist = build_dist(tree, tmp_path / "out")
    assert _digests(dist) == _digests(fat_dist)


def test_database_files_of_an_unsplit_artifact_move_to_device_wheels(
    fat_tree: Path, tmp_path: Path
) -> None:
    """rocBLAS kernel databases in a family-named blas artifact leave the libraries wheel,
    whether or not the artifact also holds fat binaries."""
    from .treeutil import add_artifact

    tree = _copy(fat_tree, tmp_path)
    library = "lib/rocblas/library"
    add_artifact(
        tree,
        "blas_lib_gfx94X-dcgpu",
        "math-libs/BLAS/rocBLAS/stage",
        {
            f"{library}/TensileLibrary_lazy_gfx90a.dat": b"dat gfx90a",
            f"{library}/Kernels.so-000-gfx90a.hsaco": b"hsaco gfx90a",
            f"{library}/TensileLibrary_lazy_gfx1030.co": b"co gfx1030",
            f"{library}/TensileLibrary.dat": b"arch-neutral",
        },
    )
    dist = build_dist(tree, tmp_path / "out")
    libraries = _payload(dist / f"rocm_sdk_libraries{WHEEL}")
    gfx90a = _payload(dist / f"rocm_sdk_device_gfx90a{WHEEL}")
    gfx1030 = _payload(dist / f"rocm_sdk_device_gfx1030{WHEEL}")
    in_libraries = [n for n in libraries if "/rocblas/" in n]
    assert [n.rsplit("/", 1)[1] for n in in_libraries] == ["TensileLibrary.dat"]
    assert any(n.endswith("TensileLibrary_lazy_gfx90a.dat") for n in gfx90a)
    assert any(n.endswith("Kernels.so-000-gfx90a.hsaco") for n in gfx90a)
    assert any(n.endswith("TensileLibrary_lazy_gfx1030.co") for n in gfx1030)


def test_unsplit_and_presplit_forms_of_one_prefix_are_an_error(
    fat_tree: Path, presplit_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _family_named(fat_tree, tmp_path, "gfx90a-dcgpu")
    shutil.copytree(presplit_tree / "rand_lib_gfx1030", tree / "rand_lib_gfx1030")
    dest = tmp_path / "out"
    rc = main(["--artifact-dir", str(tree), "--dest-dir", str(dest), "--version", VERSION])
    err = capsys.readouterr().err
    assert rc == 1 and "rand_lib_gfx90a-dcgpu" in err and "mixes split and unsplit" in err
    assert not dest.exists()


# --- real ROCm 7 fat binaries with LLVM generic targets ----------------------------------


def test_family_named_tree_with_rocm7_generic_code(fat_tree: Path, tmp_path: Path) -> None:
    """TheRock's unsplit layout (family-named artifacts) holding real ROCm 7 fat binaries
    from PyPI: compressed CCOB v3 bundles for gfx908, gfx90a and four LLVM generic targets.
    Every code object lands byte-identical in a device wheel, generic targets get their
    own ``rocm-sdk-device-<generic>`` wheels, and a gfx942 user (no gfx942 code, only
    gfx9-4-generic) installs with ``rocm[libraries,device-gfx942]``: the generic wheel comes
    along, every kernel resolves, and ``rocm-sdk test`` passes."""
    from kpack.wheelsplit._bundles import served_targets
    from tests.kpack.bundle_fixtures import read_kpack_by_spec
    from tests.pypi_inputs import JAX_PLUGIN, fat_members, independent_code_objects, pypi_wheel

    from .treeutil import add_artifact

    fat = fat_members(pypi_wheel(JAX_PLUGIN), tmp_path / "jax")
    tree = _family_named(fat_tree, tmp_path, "gfx94X-dcgpu")
    stage = "ml-libs/hipDNN/stage"
    # Python extension modules (the self-test does not dlopen those on their own)
    files = {f"lib/jax/{files_name(so)}": so.read_bytes() for so in fat}
    add_artifact(tree, "hipdnn_lib_gfx94X-dcgpu", stage, files)
    dist = build_dist(tree, tmp_path / "out")

    generics = ["gfx10_3_generic", "gfx11_generic", "gfx12_generic", "gfx9_4_generic"]
    for name in generics:
        assert (dist / f"rocm_sdk_device_{name}{WHEEL}").is_file(), sorted(os.listdir(dist))
    expected: collections.Counter[tuple[str, str]] = collections.Counter()
    for so in fat:
        expected += independent_code_objects(so)
    archived: collections.Counter[tuple[str, str]] = collections.Counter()
    for wheel in sorted(dist.glob("rocm_sdk_device_*.whl")):
        with zipfile.ZipFile(wheel) as zf:
            for name in zf.namelist():
                if name.endswith(".kpack") and "/hipdnn_lib_" in name:
                    _, kernels = read_kpack_by_spec(zf.read(name))
                    for (key, target), data in kernels.items():
                        assert key.startswith(f"{stage}/lib/jax/")
                        archived[(target, hashlib.sha256(data).hexdigest())] += 1
    assert archived == expected and sum(expected.values()) >= 18

    report = json.loads((dist.parent / "report.json").read_text())
    rows = {r["target"]: r for r in report["targets"]}
    assert set(served_targets([r["target"] for r in report["device_wheels"]])) == set(rows)
    assert [w.split("-")[0] for w in rows["gfx942"]["device_wheels"]] == [
        "rocm_sdk_device_gfx9_4_generic"
    ]
    assert [w.split("-")[0] for w in rows["gfx90a"]["device_wheels"]] == ["rocm_sdk_device_gfx90a"]

    venv = tmp_path / "venv"
    site = install(dist, venv, f"rocm[libraries,device-gfx942]=={VERSION}")
    devices = sorted(p.name.split("-")[0] for p in site.glob("rocm_sdk_device_*.dist-info"))
    assert devices == ["rocm_sdk_device_gfx9_4_generic"]
    for so in fat:
        installed = site / "_rocm_sdk_libraries/lib/jax" / files_name(so)
        resolved = resolve_binary(installed, ["gfx942:sramecc+:xnack-"], env={})
        assert not resolved.missing, (installed, resolved.missing[:2])
    test = _self_test(venv)
    assert test.returncode == 0, test.stdout[-3000:] + test.stderr[-6000:]
    assert "testKernelsFoundForInstalledTargets" in test.stderr + test.stdout

    # the same tree split ahead of time by `kpack split-artifacts` (P_gfx9-4-generic ...)
    presplit = tmp_path / "presplit"
    shutil.copytree(tree, presplit, symlinks=True)
    source = tmp_path / "unsplit" / "hipdnn_lib_gfx94X-dcgpu"
    shutil.move(str(presplit / "hipdnn_lib_gfx94X-dcgpu"), source)
    split_artifact(source, presplit, prefix="hipdnn_lib")
    assert (presplit / "hipdnn_lib_gfx9-4-generic").is_dir()
    assert _digests(build_dist(presplit, tmp_path / "out2")) == _digests(dist)


def test_a_generic_target_outside_the_table_is_an_error(
    presplit_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _copy(presplit_tree, tmp_path)
    (tree / "rand_lib_gfx1030").rename(tree / "rand_lib_gfx10-7-generic")
    dest = tmp_path / "out"
    rc = main(["--artifact-dir", str(tree), "--dest-dir", str(dest), "--version", VERSION])
    err = capsys.readouterr().err
    assert rc == 1, err
    assert "rand_lib_gfx10-7-generic" in err and "generic-target table" in err
    assert not dest.exists()


def files_name(so: Path) -> str:
    """``_linalg.so`` as a CPython extension module is named."""
    return f"{so.stem}.cpython-311-x86_64-linux-gnu.so"


def test_every_wheel_passes_the_old_kernel_gate(
    fat_dist: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``kpack verify WHEEL`` on each built wheel: every ELF executable keeps its program
    headers where old kernels look (the split executables of the tree included)."""
    from kpack.cli import main as kpack_main
    from kpack.phdr_gate import scan_executables

    wheels = sorted(fat_dist.glob("*.whl"))
    for wheel in wheels:
        assert kpack_main(["verify", str(wheel)]) == 0, capsys.readouterr().err
    found = [f for w in wheels for f in scan_executables(w)]
    assert found and all(f.problem is None for f in found)
    assert any(f.path.endswith("bin/hip-sample-info") for f in found), [f.path for f in found]


def test_device_archives_store_each_code_object_once(fat_dist: Path) -> None:
    """The builder's archives share a frame among entries whose code objects are equal
    (the sample tree's wrappers pointing at one code object), and no two stored frames of
    an archive decode to the same bytes (decoded here, independently of kpack.archive)."""
    import struct

    import msgpack
    import zstandard

    entries = frames = 0
    for wheel in sorted(fat_dist.glob("rocm_sdk_device_*.whl")):
        with zipfile.ZipFile(wheel) as zf:
            for name in (n for n in zf.namelist() if n.endswith(".kpack")):
                raw = zf.read(name)
                (offset,) = struct.unpack_from("<Q", raw, 8)
                toc = msgpack.unpackb(raw[offset:], raw=False)
                entries += sum(len(targets) for targets in toc["toc"].values())
                pos = toc["zstd_offset"]
                (count,) = struct.unpack_from("<I", raw, pos)
                blobs = []
                for _ in range(count):
                    (size,) = struct.unpack_from("<I", raw, pos + 4)
                    blobs.append(
                        zstandard.ZstdDecompressor().decompress(raw[pos + 8 : pos + 8 + size])
                    )
                    pos += 4 + size
                assert len({hashlib.sha256(b).digest() for b in blobs}) == count, name
                frames += count
    assert 0 < frames < entries, (frames, entries)
