"""Builder modes on the real sample tree: dry run, staging, re-runs, multi-family,
nonce + compressed devel tarball through a real install."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from build_tools import build as build_module
from build_tools.build_python_packages import main
from kpack.wheelfile import DeflateMemo
from kpack.wheelfile._deflate import CHUNK_SIZE
from tests.kpack.wheelfile.test_memo import joined_chunks, member_stream

from .conftest import VERSION, build_dist, install

pytestmark = [pytest.mark.real, pytest.mark.compile, pytest.mark.slow]


def test_dry_run_writes_nothing(
    sample_tree: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    dest = tmp_path / "out"
    rc = main(
        [
            "--artifact-dir",
            str(sample_tree),
            "--dest-dir",
            str(dest),
            "--version",
            VERSION,
            "--dry-run",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0 and not dest.exists()
    for name in (
        "rocm-sdk-core",
        "rocm-sdk-libraries-gfx90a-dcgpu",
        "rocm-sdk-devel",
        "rocm-profiler",
        "rocm ",
    ):
        assert name in out, out


def test_an_earlier_runs_packages_never_leak_and_other_files_stay(
    sample_tree: Path, tmp_path: Path
) -> None:
    dest = tmp_path / "out"
    (dest / "dist").mkdir(parents=True)
    theirs = dest / "dist" / "other-0.1-py3-none-any.whl"
    theirs.write_text("not the builder's")
    (dest / "keep.txt").write_text("unrelated")
    build_dist(sample_tree, dest, "--version", "7.98.0.dev0")  # the last --version counts
    dist = build_dist(sample_tree, dest)
    assert not list(dist.rglob("*7.98.0*"))  # the earlier run's packages went
    assert theirs.read_text() == "not the builder's"
    assert (dest / "keep.txt").read_text() == "unrelated"
    hidden = [p.name for p in dest.iterdir() if p.name.startswith(".")]
    assert hidden == [".build-python-packages.json"]  # no temp dirs left
    assert len(list(dist.glob(f"*-{VERSION}-*.whl"))) == 4


def test_no_build_packages_stages_trees(sample_tree: Path, tmp_path: Path) -> None:
    dest = tmp_path / "out"
    rc = main(
        [
            "--artifact-dir",
            str(sample_tree),
            "--dest-dir",
            str(dest),
            "--version",
            VERSION,
            "--no-build-packages",
        ]
    )
    assert rc == 0 and not (dest / "dist").exists()
    devel_tar = dest / "rocm-sdk-devel" / "rocm_sdk_devel" / "_devel.tar"
    with tarfile.open(devel_tar) as tar:
        names = tar.getnames()
    assert "_rocm_sdk_devel/__init__.py" in names
    assert (dest / "rocm-sdk-core" / "_rocm_sdk_core" / "lib" / "libamdhip64.so.5").is_file()
    assert not any(p.is_symlink() for p in (dest / "rocm-sdk-core").rglob("*"))
    assert (dest / "rocm" / "PKG-INFO").is_file()


def test_two_families(sample_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    memos: list[DeflateMemo] = []

    class Recorded(DeflateMemo):
        def __init__(self) -> None:
            super().__init__()
            memos.append(self)

    monkeypatch.setattr(build_module, "DeflateMemo", Recorded)
    tree = tmp_path / "artifacts"
    shutil.copytree(sample_tree, tree, symlinks=True)
    for name in ("rand", "fft"):
        shutil.copytree(
            tree / f"{name}_lib_gfx90a-dcgpu", tree / f"{name}_lib_gfx110X-all", symlinks=True
        )
    dist = build_dist(tree, tmp_path / "out")
    top = sorted(p.name for p in dist.iterdir())
    assert "gfx110X-all" in top and "gfx90a-dcgpu" in top
    wheels = sorted(p.name for p in dist.glob("*.whl"))
    assert [w.split("-")[0] for w in wheels] == [
        "rocm_profiler",
        "rocm_sdk_core",
        "rocm_sdk_libraries_gfx110x_all",
        "rocm_sdk_libraries_gfx90a_dcgpu",
    ]
    for family in ("gfx110X-all", "gfx90a-dcgpu"):
        names = sorted(p.name for p in (dist / family).iterdir())
        assert names == [
            f"rocm-{VERSION}.tar.gz",
            f"rocm_sdk_devel-{VERSION}-py3-none-linux_x86_64.whl",
        ]
    with tarfile.open(dist / "gfx110X-all" / f"rocm-{VERSION}.tar.gz") as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("_dist_info.py"))
        text = tar.extractfile(member).read().decode()  # type: ignore[union-attr]
    assert "'gfx110X-all'" in text and "'gfx90a-dcgpu'" not in text
    # each family's devel tarball is deflated in chunks; the chunks alike in both were
    # deflated once (the run's memo), and the bytes are those of a fresh compression
    contents = []
    for family in ("gfx110X-all", "gfx90a-dcgpu"):
        wheel = dist / family / f"rocm_sdk_devel-{VERSION}-py3-none-linux_x86_64.whl"
        raw, content = member_stream(wheel, "rocm_sdk_devel/_devel.tar")
        assert raw == joined_chunks(content)
        contents.append(content)
    chunks = [
        [(c[i : i + CHUNK_SIZE], i + CHUNK_SIZE >= len(c)) for i in range(0, len(c), CHUNK_SIZE)]
        for c in contents
    ]
    alike = sum(a == b for a, b in zip(*chunks, strict=False))
    assert len(memos) == 1 and memos[0].hits == alike > 0


def test_nonce_and_xz_devel_install(sample_tree: Path, tmp_path: Path) -> None:
    dist = build_dist(
        sample_tree, tmp_path / "out", "--version-suffix", "_v7", "--devel-tarball-compression"
    )
    devel = next(dist.glob("rocm_sdk_devel-*.whl"))
    with zipfile.ZipFile(devel) as zf:
        info = zf.getinfo("rocm_sdk_devel/_devel.tar.xz")
        assert info.compress_type == zipfile.ZIP_STORED  # already compressed
    venv = tmp_path / "venv"
    site = install(dist, venv, f"rocm[libraries,devel]=={VERSION}")
    assert (site / "_rocm_sdk_core_v7").is_dir() and not (site / "_rocm_sdk_core").exists()
    root = subprocess.run(
        [str(venv / "bin/rocm-sdk"), "path", "--root"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert Path(root) == site / "_rocm_sdk_devel_v7"
    assert not (site / "rocm_sdk_devel" / "_devel.tar.xz").exists()  # expanded, then removed
    env = {k: v for k, v in os.environ.items() if k != "ROCM_SDK_TARGET_FAMILY"}
    test = subprocess.run(
        [str(venv / "bin/rocm-sdk"), "test"], capture_output=True, text=True, env=env, timeout=900
    )
    assert test.returncode == 0, test.stdout[-3000:] + test.stderr[-6000:]
