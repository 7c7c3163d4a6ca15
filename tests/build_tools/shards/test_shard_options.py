"""The shard options of the builder on small synthetic trees: ``--print-shards`` from
names and sizes, and every misuse of ``--only`` / ``--tree-targets`` one usage error
(exit status 2) with nothing written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from build_tools.build_python_packages import main
from tests.build_tools.archive_kit import pack_artifact
from tests.build_tools.treeutil import add_artifact, write_manifest


def _tree(root: Path, *, kpack: bool = True, packed: bool = False) -> Path:
    write_manifest(root, kpack=kpack)
    add_artifact(root, "core-hip_lib_generic", "core/clr/stage", {"lib/x.so": b"x" * 10})
    add_artifact(root, "rocprofiler-systems_lib_generic", "p/stage", {"lib/p.so": b"p"})
    add_artifact(root, "blas_lib_generic", "b/stage", {"lib/b.so": b"b"})
    add_artifact(root, "blas_dev_generic", "b/stage", {"include/b.h": b"h"})
    for target, size in (
        ("gfx942", 9000),
        ("gfx942:xnack+", 100),
        ("gfx1201", 5000),
        ("gfx90a", 4000),
    ):
        add_artifact(
            root, f"blas_lib_{target}", "b/stage", {f".kpack/blas_lib_{target}.kpack": b"k" * size}
        )
    if packed:
        for art in sorted(p for p in root.iterdir() if p.is_dir() and p.name != "base_lib_generic"):
            pack_artifact(art, root)
            import shutil

            shutil.rmtree(art)
    return root


def _shards(
    tree: Path, n: int, capsys: pytest.CaptureFixture[str], *extra: str
) -> list[dict[str, Any]]:
    assert (
        main(["--artifact-dir", str(tree), "--print-shards", str(n), "--version", "1.0", *extra])
        == 0
    )
    shards: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
    return shards


@pytest.mark.parametrize("packed", [False, True], ids=["dirs", "archives"])
def test_targets_balanced_over_device_shards(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], packed: bool
) -> None:
    tree = _tree(tmp_path / "t", packed=packed)
    common, *devices = _shards(tree, 3, capsys, "--version-suffix", "_v7")
    assert common["name"] == "common"
    assert common["inputs"] == [
        "base_lib_generic",
        "blas_dev_generic",
        "blas_lib_generic",
        "core-hip_lib_generic",
        "rocprofiler-systems_lib_generic",
    ]
    tree_targets = "gfx90a,gfx942,gfx942:xnack+,gfx1201"
    assert common["args"] == [
        "--version",
        "1.0",
        "--version-suffix",
        "_v7",
        "--only",
        "common",
        "--tree-targets",
        tree_targets,
    ]
    # gfx942 (with its xnack+ slice) is the largest: a shard of its own; the others share
    assert [d["targets"] for d in devices] == [["gfx942"], ["gfx1201", "gfx90a"]]
    assert devices[0]["inputs"] == [
        "base_lib_generic",
        "blas_lib_generic",
        "blas_lib_gfx942",
        "blas_lib_gfx942:xnack+",
        "core-hip_lib_generic",
    ]
    assert devices[1]["args"][-4:] == [
        "--targets",
        "gfx1201,gfx90a",
        "--tree-targets",
        tree_targets,
    ]


def test_more_shards_than_targets_and_one_shard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _tree(tmp_path / "t")
    assert len(_shards(tree, 9, capsys)) == 4  # common + one per target owner
    (whole,) = _shards(tree, 1, capsys)
    assert whole["name"] == "all" and "--only" not in whole["args"]


def test_a_legacy_tree_is_one_shard(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = _tree(tmp_path / "t", kpack=False)
    (whole,) = _shards(tree, 4, capsys)
    assert whole["name"] == "all"


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--print-shards", "0"], "give at least 1"),
        (
            ["--print-shards", "2", "--targets", "gfx942"],
            "plans --only, --tree-targets and --targets itself",
        ),
        (["--only", "device"], "--only device needs --targets"),
        (["--tree-targets", "gfx942,oops"], "'oops' is not a gfx target"),
        (
            ["--only", "common", "--tree-targets", "gfx942"],
            "--tree-targets lacks targets this shard's input holds",
        ),
    ],
)
def test_misuse_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], needle: str
) -> None:
    tree = _tree(tmp_path / "t")
    dest = tmp_path / "out"
    assert (
        main(["--artifact-dir", str(tree), "--dest-dir", str(dest), "--version", "1.0", *extra])
        == 2
    )
    err = capsys.readouterr().err
    assert needle in err, err
    assert not dest.exists()


def test_only_in_a_legacy_tree_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _tree(tmp_path / "t", kpack=False)
    argv = [
        "--artifact-dir",
        str(tree),
        "--dest-dir",
        str(tmp_path / "o"),
        "--version",
        "1.0",
        "--only",
        "common",
    ]
    assert main(argv) == 2
    assert "--only and --tree-targets apply to kpack-split trees only" in capsys.readouterr().err


def test_a_device_shard_without_its_targets_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _tree(tmp_path / "t")
    import shutil

    shutil.rmtree(tree / "blas_lib_gfx90a")
    argv = [
        "--artifact-dir",
        str(tree),
        "--dest-dir",
        str(tmp_path / "o"),
        "--version",
        "1.0",
        "--only",
        "device",
        "--targets",
        "gfx90a",
        "--tree-targets",
        "gfx90a,gfx942,gfx942:xnack+,gfx1201",
    ]
    assert main(argv) == 1
    assert "no per-target artifacts for gfx90a in this shard's input" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
