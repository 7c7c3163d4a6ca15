"""``kpack split-artifacts`` and rocm-kpack's ``split_artifacts`` face take TheRock's
artifact archives where they take artifact dirs (issue 31, item 3): the same outputs, byte
for byte; the same artifact twice, or a bad archive, is one error naming it and nothing
is written."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kpack.cli import main
from tests.build_tools.archive_kit import pack_artifact
from tests.kpack.split.test_split import BlasTree, blas_tree, listing

ROCM_KPACK = Path(__file__).resolve().parents[3] / "python"


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> BlasTree:
    tmp = tmp_path_factory.mktemp("blas")
    return blas_tree(tmp / "artifacts", tmp / "build")


@pytest.fixture(scope="module")
def from_dir(tree: BlasTree, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("from-dir")
    assert (
        main(
            [
                "split-artifacts",
                "--artifact-dir",
                str(tree.artifact),
                "--output-dir",
                str(out),
                "-q",
            ]
        )
        == 0
    )
    return out


@pytest.mark.parametrize("compression", ["zstd", "xz", "none"])
def test_an_archive_splits_as_its_directory(
    tree: BlasTree, from_dir: Path, tmp_path: Path, compression: str
) -> None:
    packed = pack_artifact(tree.artifact, tmp_path, compression)
    out = tmp_path / "out"
    argv = ["split-artifacts", "--artifact-dir", str(packed), "--output-dir", str(out), "-q"]
    assert main(argv) == 0
    assert listing(out) == listing(from_dir)
    assert not [p for p in out.iterdir() if "staging" in p.name]


def test_rocm_kpacks_face_takes_an_archive(tree: BlasTree, from_dir: Path, tmp_path: Path) -> None:
    packed = pack_artifact(tree.artifact, tmp_path)
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROCM_KPACK / "rocm_kpack/tools/split_artifacts.py"),
            "--artifact-dir",
            str(packed),
            "--output-dir",
            str(out),
            "--artifact-prefix",
            "blas_lib",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert listing(out) == listing(from_dir)


def test_a_batch_reads_archives_and_refuses_twins(
    tree: BlasTree, from_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parent = tmp_path / "unsplit"
    parent.mkdir()
    pack_artifact(tree.artifact, parent, sidecar=True)
    out = tmp_path / "out"
    assert (
        main(
            [
                "split-artifacts",
                "--batch-artifact-parent-dir",
                str(parent),
                "--output-dir",
                str(out),
                "-q",
            ]
        )
        == 0
    )
    assert listing(out) == listing(from_dir)
    shutil.copytree(tree.artifact, parent / tree.artifact.name, symlinks=True)
    assert (
        main(
            [
                "split-artifacts",
                "--batch-artifact-parent-dir",
                str(parent),
                "--output-dir",
                str(tmp_path / "o2"),
                "-q",
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert f"{tree.artifact.name}.tar.zst: the same artifact as {tree.artifact.name}" in err
    assert not (tmp_path / "o2").exists()


def test_a_truncated_archive_is_one_error_and_no_output(
    tree: BlasTree, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    packed = pack_artifact(tree.artifact, tmp_path)
    packed.write_bytes(packed.read_bytes()[: packed.stat().st_size // 2])
    out = tmp_path / "out"
    assert main(["split-artifacts", "--artifact-dir", str(packed), "--output-dir", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(packed) in err[0] and "truncated or corrupt" in err[0], err
    assert not out.exists()
