"""``--print-shards`` and the shards it plans, run as a CI matrix would run them (issue
31, items 4 and 6): each shard in its own process, its input dir holding only the
archives the plan lists, then ``assemble-shards``; the result equals the one-machine
build byte for byte (dist/ and the report), in kpack-split mode (a common shard and
device shards) and in legacy mode (one shard). A shard missing one listed input fails."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kpack.owners import owner_table
from tests.build_tools.archive_kit import pack_tree
from tests.conftest import require

pytestmark = [pytest.mark.real, pytest.mark.compile, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[3]
BUILDER = REPO / "build_tools/build_python_packages.py"
ASSEMBLE = REPO / "build_tools/assemble_shards.py"
VERSION = "7.99.0.dev0"


def _run(script: Path, *argv: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script), *map(str, argv)], capture_output=True, text=True, check=False
    )


def _tree(tmp: Path, kpack: bool) -> Path:
    """The real sample tree; in kpack mode pre-split as TheRock's split lays it out."""
    require(shutil.which("hipcc") is not None, "hipcc is not installed")
    from kpack.split import split_artifact
    from sample_tree.make_sample_tree import make_sample_tree

    tree = make_sample_tree(tmp / "tree", cache_dir=None, family="gfx90a-dcgpu", kpack_split=kpack)
    if kpack:
        for name in ("rand_lib_generic", "fft_lib_generic"):
            src = tmp / "fat" / name
            src.parent.mkdir(exist_ok=True)
            shutil.move(str(tree / name), src)
            split_artifact(src, tree, prefix=name.rsplit("_", 1)[0])
    return pack_tree(tree, tmp / "archives")


@pytest.fixture(scope="module", params=[True, False], ids=["kpack", "legacy"])
def archives(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _tree(tmp_path_factory.mktemp("plan"), bool(request.param))


def _plan(archives: Path, n: int) -> list[dict[str, Any]]:
    proc = _run(BUILDER, "--artifact-dir", archives, "--print-shards", str(n), "--version", VERSION)
    assert proc.returncode == 0, proc.stderr
    shards: list[dict[str, Any]] = json.loads(proc.stdout)
    return shards


def _outputs(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    }


def _feed(archives: Path, inputs: list[str], dest: Path) -> Path:
    dest.mkdir()
    for name in inputs:
        shutil.copy(archives / f"{name}.tar.zst", dest)
    return dest


def test_the_plan_names_what_each_shard_reads(archives: Path) -> None:
    shards = _plan(archives, 3)
    names = {p.name.removesuffix(".tar.zst") for p in archives.iterdir()}
    for shard in shards:
        assert set(shard["inputs"]) <= names and shard["read_bytes"] > 0
    if len(shards) == 1:  # legacy: one shard builds everything
        assert shards[0]["inputs"] == sorted(names) and "--only" not in shards[0]["args"]
        return
    common, *devices = shards
    assert common["args"][-4:-2] == ["--only", "common"]
    assert all(n.endswith("_generic") for n in common["inputs"])
    assert len(devices) == 2
    owned = [t for d in devices for t in d["targets"]]
    per_target = sorted({n.rsplit("_", 1)[1] for n in names if not n.endswith("_generic")})
    assert sorted(owned) == sorted({owner_table().owner(t) for t in per_target})  # each once
    for device in devices:
        mine = {n for n in device["inputs"] if not n.endswith("_generic")}
        assert mine and all(
            owner_table().owner(n.rsplit("_", 1)[1]) in device["targets"] for n in mine
        )
        assert "base_lib_generic" in device["inputs"]
        assert not any(
            n.startswith("rocprofiler-") or ("_dev_" in n and "core-" not in n)
            for n in device["inputs"]
        )
    assert _plan(archives, 1)[0]["name"] == "all"


def test_each_shard_alone_assembles_into_the_one_machine_build(
    archives: Path, tmp_path: Path
) -> None:
    one = tmp_path / "one"
    proc = _run(BUILDER, "--artifact-dir", archives, "--dest-dir", one, "--version", VERSION, "-q")
    assert proc.returncode == 0, proc.stderr
    shards = _plan(archives, 3)
    dists = []
    for shard in shards:
        inputs = _feed(archives, shard["inputs"], tmp_path / f"in-{shard['name']}")
        out = tmp_path / f"out-{shard['name']}"
        proc = _run(BUILDER, "--artifact-dir", inputs, "--dest-dir", out, "-q", *shard["args"])
        assert proc.returncode == 0, (shard["name"], proc.stderr)
        dists.append(out / "dist")
    merged = tmp_path / "merged"
    proc = _run(ASSEMBLE, "--input", *dists, "--dest-dir", merged, "-q")
    assert proc.returncode == 0, proc.stderr
    expected = _outputs(one)
    assert any(n.endswith(".whl") for n in expected) and "report.json" in expected
    assert _outputs(merged) == expected  # the assembled --dest-dir is one build's
    if len(dists) > 1:  # a device shard that never ran: caught without any family flag
        proc = _run(ASSEMBLE, "--input", *dists[:-1], "--dest-dir", tmp_path / "short")
        assert proc.returncode == 1
        missing = [f"rocm-sdk-device-{t}" for t in shards[-1]["targets"]]
        assert all(f"requires {m}, but no shard built it" in proc.stderr for m in missing)


def test_a_shard_missing_a_listed_input_fails(archives: Path, tmp_path: Path) -> None:
    """Left without one of its listed inputs (its largest per-target artifact; legacy: its
    largest one), a shard fails or builds other bytes: the comparison above would see an
    input the plan forgot."""
    shard = _plan(archives, 3)[-1]
    results = []
    sizes = {n: (archives / f"{n}.tar.zst").stat().st_size for n in shard["inputs"]}
    own = [n for n in shard["inputs"] if not n.endswith("_generic")]
    dropped = max(
        own or [n for n in shard["inputs"] if n != "base_lib_generic"], key=sizes.__getitem__
    )
    short = [n for n in shard["inputs"] if n != dropped]
    for name, inputs in (("full", shard["inputs"]), ("short", short)):
        fed = _feed(archives, inputs, tmp_path / f"in-{name}")
        out = tmp_path / f"out-{name}"
        proc = _run(BUILDER, "--artifact-dir", fed, "--dest-dir", out, "-q", *shard["args"])
        results.append(_outputs(out / "dist") if proc.returncode == 0 else proc.stderr)
    full, built = results
    assert isinstance(full, dict) and full
    assert built != full, f"{shard['name']} built the same without {dropped}"
