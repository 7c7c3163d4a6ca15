"""The splitter's size budget (``--max-wheel-size``, issue 32 item 4) on a real wheel, through
rocm-kpack's module name: a wheel over it is one error naming it, its size and its largest
members, and nothing is published; under it, the split report shows every wheel against it."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.pypi_inputs import JAX_PLUGIN, pypi_wheel

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[3]


def _split(wheel: Path, out: Path, budget: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "rocm_kpack.tools.split_python_wheels", "--input", str(wheel),
            "--output-dir", str(out), "--device-package-prefix", "jax-device",
            "--max-wheel-size", budget]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(argv, capture_output=True, text=True, env=env, check=False)


def test_over_the_budget_nothing_is_published(tmp_path: Path) -> None:
    wheel = pypi_wheel(JAX_PLUGIN)
    out = tmp_path / "out"
    proc = _split(wheel, out, "2MB")
    assert proc.returncode == 1, proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("error:")]
    assert line.startswith("error: jax_rocm7_plugin-0.10.0-cp311-cp311-manylinux_2_28_x86_64.whl: ")
    assert "over --max-wheel-size 2.0 MB; largest members: jax_rocm7_plugin/" in line
    assert not any(out.glob("*.whl")) and not any((tmp_path / "out-split-reports").glob("*"))


def test_the_report_shows_every_wheel_against_the_budget(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = _split(pypi_wheel(JAX_PLUGIN), out, "500MB")
    assert proc.returncode == 0, proc.stderr
    wheels = sorted(p.name for p in out.glob("*.whl"))
    (report,) = (tmp_path / "out-split-reports").glob("*.md")
    table = report.read_text().split("## Size budget", 1)[1]
    assert "| wheel | size | --max-wheel-size 500.0 MB |" in table
    for name in wheels:
        assert f"| {name} | " in table
        with zipfile.ZipFile(out / name):
            pass
