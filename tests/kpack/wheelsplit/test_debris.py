"""A wheel split killed with SIGKILL half-way (a CI runner's timeout, the OOM killer): its
staging cannot be removed by the run itself; the next run into the same output removes it,
says so in one line per directory, and writes the outputs as a clean run would."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.kpack.wheel_fixtures import ROCRAND_LIB, make_fat_wheel

pytestmark = pytest.mark.real

_KILLABLE = """
import sys, time
from kpack import wheelsplit as spw
real = spw.write_split_wheel
def stall(*args, **kwargs):
    print("writing wheels", flush=True)  # the work dir and the spools are on disk now
    time.sleep(600)
spw.write_split_wheel = stall
sys.exit(spw.main(sys.argv[1:]))
"""


def _stagings(root: Path) -> list[Path]:
    return sorted(root.glob(".kpack-split-wheel.staging-*")) if root.is_dir() else []


def _size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def test_the_next_run_removes_a_killed_runs_staging(
    debian_package: Callable[[str], Path], tmp_path: Path
) -> None:
    wheel = make_fat_wheel(tmp_path / "in", debian_package("librocrand1") / ROCRAND_LIB)
    out = tmp_path / "dist"
    reports = tmp_path / "dist-split-reports"
    args = ["--input", str(wheel), "--output-dir", str(out), "--wheel-type", "torch-fat"]
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLABLE, *args], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    with proc.stdout:
        # the host wheel and the device wheels are written at once (-j: the CPU count)
        assert proc.stdout.readline().startswith("writing wheels")
        proc.kill()
        proc.wait()
    left = _stagings(out)
    dirs = {p.parent for p in left + _stagings(reports)}
    assert (
        dirs == {out, reports} and sum(_size(p) for p in left) > 1_000_000
    )  # the extracted input, the spools
    run = subprocess.run(
        [sys.executable, "-m", "kpack", "split-wheel", *args], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    notices = [line for line in run.stderr.splitlines() if "interrupted run" in line]
    assert len(notices) == len(dirs), run.stderr  # one line per directory
    assert all(str(out) in n or str(reports) in n for n in notices)
    assert _stagings(out) == [] and _stagings(reports) == []
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # nothing beside
    clean = tmp_path / "clean"
    again = ["--input", str(wheel), "--output-dir", str(clean), "--wheel-type", "torch-fat"]
    assert subprocess.run([sys.executable, "-m", "kpack", "split-wheel", *again]).returncode == 0
    names = sorted(n for n in os.listdir(out) if not n.startswith("."))
    assert names == sorted(n for n in os.listdir(clean) if not n.startswith("."))
    for name in names:
        assert (out / name).read_bytes() == (clean / name).read_bytes(), name
