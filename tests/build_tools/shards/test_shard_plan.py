"""``--print-shards`` on the real sample tree as TheRock's archives (issue 31, items 4 and
6), in kpack-split mode (a common shard and device shards, each reading part of the tree)
and in legacy mode (one shard): what each shard reads, and that a shard left without one
of its listed inputs fails or builds other bytes. The shards run as CI runs them, fed only
their inputs and assembled into the one-machine build, in ``tests/workflow/
test_simulation.py`` (the reusable workflow's own scripts)."""

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
from tests.build_tools.shards.trees import sample_archives

pytestmark = [pytest.mark.real, pytest.mark.compile, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[3]
BUILDER = REPO / "build_tools/build_python_packages.py"
VERSION = "7.99.0.dev0"


def _run(script: Path, *argv: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script), *map(str, argv)], capture_output=True, text=True, check=False
    )


@pytest.fixture(scope="module", params=[True, False], ids=["kpack", "legacy"])
def archives(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sample_archives(tmp_path_factory.mktemp("plan"), bool(request.param))


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
