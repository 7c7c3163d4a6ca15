"""benchmarks/bench_per_gpu.py on the sample tree: the figures it prints are what pip resolves.

pip (``--dry-run --report``) is the benchmark's own oracle; these tests hold its answer to the
package names the builder writes and the files' sizes on disk, and to the builder's report.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks.bench_per_gpu import main
from benchmarks.per_gpu.inputs import build_set, sample_trees
from benchmarks.per_gpu.measure import gpus_of
from benchmarks.per_gpu.pip import PackageSet, load_set, resolve
from tests.conftest import require

pytestmark = [pytest.mark.real, pytest.mark.compile, pytest.mark.slow]

V = "7.99.0.dev0"
WHEEL = f"-{V}-py3-none-linux_x86_64.whl"
SAMPLE_GPUS = ["gfx803", "gfx900", "gfx906", "gfx908", "gfx90a", "gfx1030"]


@pytest.fixture(scope="module")
def sets(tmp_path_factory: pytest.TempPathFactory) -> tuple[PackageSet, PackageSet]:
    require(shutil.which("hipcc") is not None, "hipcc is not installed")
    work = tmp_path_factory.mktemp("per-gpu")
    kpack_tree, legacy_tree = sample_trees(work, with_rocsparse=False)
    return build_set("kpack", kpack_tree, work), build_set("legacy", legacy_tree, work)


def _sizes(dist: Path, *names: str) -> int:
    return sum((dist / n).stat().st_size for n in names)


def _cli(kpack: PackageSet, legacy: PackageSet, *extra: str) -> list[str]:
    argv = ["--kpack-set", str(kpack.dist), str(kpack.index)]
    return [*argv, "--legacy-set", str(legacy.dist), str(legacy.index), *extra]


def test_figures_are_the_files_pip_would_download(
    sets: tuple[PackageSet, PackageSet], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kpack, legacy = sets
    out = tmp_path / "figures.json"
    assert main(_cli(kpack, legacy, "--targets", "gfx90a,gfx803", "--json", str(out))) == 0
    figures = json.loads(out.read_text())
    sdist = f"rocm-{V}.tar.gz"
    base = [sdist, f"rocm_sdk_core{WHEEL}", f"rocm_sdk_libraries{WHEEL}"]
    every = base + [f"rocm_sdk_device_{g}{WHEEL}" for g in SAMPLE_GPUS]
    assert sorted(f["name"] for f in figures["every"]["files"]) == sorted(every)
    assert sum(f["size"] for f in figures["every"]["files"]) == _sizes(kpack.dist, *every)
    rows = {r["gpu"]: r for r in figures["rows"]}
    assert list(rows) == ["gfx803", "gfx90a"]  # natural order, only those asked for
    for gpu, row in rows.items():
        one = [*base, f"rocm_sdk_device_{gpu}{WHEEL}"]
        assert sorted(f["name"] for f in row["one"]["files"]) == sorted(one)
        assert sum(f["size"] for f in row["one"]["files"]) == _sizes(kpack.dist, *one)
    legacy_files = [sdist, f"rocm_sdk_core{WHEEL}", f"rocm_sdk_libraries_gfx90a_dcgpu{WHEEL}"]
    assert rows["gfx90a"]["legacy_family"] == "gfx90a-dcgpu"
    assert sorted(f["name"] for f in rows["gfx90a"]["legacy"]["files"]) == sorted(legacy_files)
    assert rows["gfx803"]["legacy"] is None  # the one family of the legacy set is gfx90a's
    checks = figures["report_checks"]  # the builder's report.json says the same, sdist aside
    assert len(checks) == 5 and all(" == " in line for line in checks), checks
    table = capsys.readouterr().out
    gfx90a = next(line for line in table.splitlines() if line.startswith("gfx90a "))
    assert "(gfx90a-dcgpu)" in gfx90a
    gfx803 = next(line for line in table.splitlines() if line.startswith("gfx803 "))
    assert "no family of the set" in gfx803


def test_every_gpu_of_the_set_is_measured(
    sets: tuple[PackageSet, PackageSet], tmp_path: Path
) -> None:
    kpack, _legacy = sets
    every = resolve(kpack.index, f"rocm[libraries,device-all]=={V}", None, tmp_path)
    assert list(gpus_of(every)) == SAMPLE_GPUS
    assert load_set("kpack", kpack.dist, kpack.index).version == V


def test_a_dist_file_unlike_the_index_is_one_error(
    sets: tuple[PackageSet, PackageSet], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kpack, _legacy = sets
    dist = tmp_path / "dist"
    shutil.copytree(kpack.dist, dist)
    changed = dist / f"rocm_sdk_device_gfx90a{WHEEL}"
    changed.write_bytes(changed.read_bytes() + b"\0")
    argv = ["--kpack-set", str(dist), str(kpack.index), "--targets", "gfx90a"]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "differs from the index's file pip chose" in err[0], err
    assert str(changed) in err[0]


def test_a_gpu_the_set_has_no_extra_for_is_a_usage_error(
    sets: tuple[PackageSet, PackageSet], capsys: pytest.CaptureFixture[str]
) -> None:
    kpack, legacy = sets
    assert main(_cli(kpack, legacy, "--targets", "gfx942")) == 2
    err = capsys.readouterr().err
    assert "gfx942" in err and "gfx90a" in err


def test_a_legacy_set_given_as_the_kpack_set_is_a_usage_error(
    sets: tuple[PackageSet, PackageSet], capsys: pytest.CaptureFixture[str]
) -> None:
    _kpack, legacy = sets
    assert main(["--kpack-set", str(legacy.dist), str(legacy.index)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a kpack-split set" in err[0], err
    assert main(["--kpack-set", str(legacy.dist), str(legacy.index), "--with-rocsparse"]) == 2
