"""``--print-shards N --artifact-listing FILE``: the plan of a tree known by a listing of its
archives (what a CI plan job has: the bucket's listing and ``base_lib_generic``) equals the
plan of the archives themselves; each shard names the ``files`` to fetch; a bad listing is
one error naming the file and every bad line; a plan of one shard where more were asked for
says why."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from build_tools.build_python_packages import main
from build_tools.shards.plan import FAT_REASON, LEGACY_REASON
from tests.build_tools.archive_kit import pack_artifact, pack_tree
from tests.build_tools.treeutil import add_artifact, write_manifest


def _tree(
    root: Path, *, kpack: bool = True, per_target: tuple[str, ...] = ("gfx942", "gfx90a")
) -> Path:
    write_manifest(root, kpack=kpack)
    add_artifact(root, "core-hip_lib_generic", "core/clr/stage", {"lib/x.so": b"x" * 10})
    add_artifact(root, "blas_lib_generic", "b/stage", {"lib/b.so": b"b"})
    add_artifact(root, "blas_dev_generic", "b/stage", {"include/b.h": b"h"})
    for n, target in enumerate(per_target):
        blob = b"k" * (1000 * (n + 1))
        add_artifact(root, f"blas_lib_{target}", "b/stage", {f".kpack/b_{target}.kpack": blob})
    return root


def _plan(
    capsys: pytest.CaptureFixture[str], artifact_dir: Path, n: int, *extra: str
) -> tuple[list[dict[str, Any]], str]:
    argv = ["--artifact-dir", str(artifact_dir), "--print-shards", str(n), "--version", "1.0"]
    assert main([*argv, *extra]) == 0
    out, err = capsys.readouterr()
    shards: list[dict[str, Any]] = json.loads(out)
    return shards, err


def _s3_ls(archives: Path) -> str:
    """``aws s3 ls`` lines of ``archives``: date, time, size, name."""
    return "".join(
        f"2026-11-28 10:00:00 {p.stat().st_size:>10} {p.name}\n" for p in sorted(archives.iterdir())
    )


@pytest.mark.parametrize("base_form", ["archive", "dir"])
def test_a_listing_plans_as_the_archives_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], base_form: str
) -> None:
    archives = pack_tree(_tree(tmp_path / "t"), tmp_path / "bucket")
    expected, _ = _plan(capsys, archives, 3)
    assert len(expected) == 3
    for shard in expected:  # files: the archives to fetch, one per input, nothing else
        assert shard["files"] == [f"{name}.tar.zst" for name in shard["inputs"]]
    base = tmp_path / "base"
    base.mkdir()
    if base_form == "archive":
        shutil.copy(archives / "base_lib_generic.tar.zst", base)
    else:
        shutil.copytree(tmp_path / "t" / "base_lib_generic", base / "base_lib_generic")
    # what a bucket holds besides: prefixes, sidecars, an index page, the .tar.xz twin
    noise = (
        "                           PRE logs/\n"
        "2026-11-28 10:00:00        65 blas_lib_gfx942.tar.zst.sha256sum\n"
        "2026-11-28 10:00:00      4096 index.html\n"
        "2026-11-28 10:00:00   9999999 blas_lib_gfx942.tar.xz\n"
        "\n"
    )
    listing = tmp_path / "listing.txt"
    listing.write_text(noise + _s3_ls(archives))
    planned, _ = _plan(capsys, base, 3, "--artifact-listing", str(listing))
    assert planned == expected


def test_a_listing_of_size_and_name_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archives = pack_tree(_tree(tmp_path / "t"), tmp_path / "bucket")
    listing = tmp_path / "listing.txt"
    listing.write_text("".join(f"{p.stat().st_size}\t{p.name}\n" for p in archives.iterdir()))
    base = tmp_path / "base"
    base.mkdir()
    shutil.copy(archives / "base_lib_generic.tar.zst", base)
    planned, _ = _plan(capsys, base, 2, "--artifact-listing", str(listing))
    expected, _ = _plan(capsys, archives, 2)
    assert planned == expected
    sizes = {p.name: p.stat().st_size for p in archives.iterdir()}
    assert planned[1]["read_bytes"] == sum(sizes[f] for f in planned[1]["files"])


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        (
            "blas_lib_gfx942.tar.zst\n12 sub/blas_lib_gfx90a.tar.zst\n7 blas-lib.tar.zst\n",
            [
                "line 1: no byte size before blas_lib_gfx942.tar.zst",
                "line 2: sub/blas_lib_gfx90a.tar.zst is a path, not a file name",
                "line 3: blas-lib.tar.zst does not parse as {name}_{component}_{target}",
            ],
        ),
        (
            "1 a_lib_generic.tar.zst\n2 a_lib_generic.tar.zst\n",
            ["line 2: a_lib_generic.tar.zst is listed twice"],
        ),
        ("4096 index.html\n", ["no artifact archive"]),
        ("", ["no artifact archive"]),
    ],
    ids=["bad-lines", "twice", "no-archive", "empty"],
)
def test_a_bad_listing_is_one_error_naming_every_bad_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, needles: list[str]
) -> None:
    base = _tree(tmp_path / "t")
    listing = tmp_path / "listing.txt"
    listing.write_text(text)
    argv = ["--artifact-dir", str(base), "--print-shards", "2", "--version", "1.0"]
    assert main([*argv, "--artifact-listing", str(listing)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"error: {listing}: not a listing of artifact archives"), err
    for needle in needles:
        assert f"  - {needle}" in err, err


def test_a_listing_needs_base_lib_generic_beside_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archives = pack_tree(_tree(tmp_path / "t"), tmp_path / "bucket")
    listing = tmp_path / "listing.txt"
    listing.write_text(_s3_ls(archives))
    empty = tmp_path / "empty"
    empty.mkdir()
    argv = ["--artifact-dir", str(empty), "--print-shards", "2", "--version", "1.0"]
    assert main([*argv, "--artifact-listing", str(listing)]) == 1
    err = capsys.readouterr().err
    assert f"{empty}: --artifact-listing: the mode is read from base_lib_generic's" in err, err


def test_a_listing_is_for_the_plan_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = _tree(tmp_path / "t")
    listing = tmp_path / "listing.txt"
    listing.write_text("1 base_lib_generic.tar.zst\n")
    argv = ["--artifact-dir", str(tree), "--dest-dir", str(tmp_path / "o"), "--version", "1.0"]
    assert main([*argv, "--artifact-listing", str(listing)]) == 2
    assert "--artifact-listing goes with --print-shards only" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_files_of_a_directory_tree_are_its_directories(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _tree(tmp_path / "t")
    pack_artifact(tree / "blas_lib_gfx90a", tree)  # one artifact as an archive, the rest dirs
    shutil.rmtree(tree / "blas_lib_gfx90a")
    shards, err = _plan(capsys, tree, 3)
    assert err == ""
    files = {f for s in shards for f in s["files"]}
    assert "blas_lib_gfx90a.tar.zst" in files and "blas_lib_gfx942" in files
    assert all("reason" not in s for s in shards)


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("legacy", LEGACY_REASON),
        ("fat", FAT_REASON),  # kpack mode, device code still inside P_generic
        ("family", FAT_REASON),  # kpack mode, fat artifacts named for a family
        ("no-mode", "the tree's mode is unknown: no base_lib_generic with a therock_manifest.json"),
    ],
)
def test_one_shard_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, reason: str
) -> None:
    per_target = {"fat": (), "family": ("gfx94X-dcgpu",)}.get(kind, ("gfx942",))
    tree = _tree(tmp_path / "t", kpack=kind != "legacy", per_target=per_target)
    if kind == "no-mode":
        shutil.rmtree(tree / "base_lib_generic")
    (whole,) = _plan(capsys, tree, 3)[0]
    assert whole["name"] == "all" and whole["reason"] == reason
    assert whole["files"] == sorted(p.name for p in tree.iterdir())
    assert _plan(capsys, tree, 3)[1] == f"notice: one shard: {reason}\n"
    assert _plan(capsys, tree, 3, "-q")[1] == ""
    (asked_one,) = _plan(capsys, tree, 1)[0]
    assert "reason" not in asked_one  # one shard was asked for: nothing to explain
