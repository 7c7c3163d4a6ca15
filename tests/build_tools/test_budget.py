"""build-python-packages --max-wheel-size (issue 32 item 4) on the real sample tree: a wheel
over the budget is one error naming it, its size and its largest members, before anything is
published; report.json and report.md show every wheel against the budget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from build_tools.build_python_packages import main
from kpack.common.cli import format_size

from .conftest import VERSION

pytestmark = [pytest.mark.real, pytest.mark.compile]


def _argv(tree: Path, dest: Path, budget: str) -> list[str]:
    return ["--artifact-dir", str(tree), "--dest-dir", str(dest), "--version", VERSION, "-q",
            "--max-wheel-size", budget]  # fmt: skip


def test_a_wheel_over_the_budget_publishes_nothing(
    sample_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "out"
    assert main(_argv(sample_tree, dest, "20MB")) == 1
    line = capsys.readouterr().err.splitlines()[0]
    assert f"rocm_sdk_core-{VERSION}-py3-none-linux_x86_64.whl: " in line
    assert "over --max-wheel-size 20.0 MB; largest members: _rocm_sdk_core/lib/" in line
    assert not dest.exists() or not any(dest.rglob("*.whl"))


def test_report_shows_every_wheel_against_the_budget(sample_tree: Path, tmp_path: Path) -> None:
    dest = tmp_path / "out"
    assert main(_argv(sample_tree, dest, "1GB")) == 0
    table = (dest / "report.md").read_text().split("## Size budget", 1)[1]
    assert "| wheel | size | --max-wheel-size 1.0 GB |" in table
    wheels = {p.name: p.stat().st_size for p in (dest / "dist").glob("*.whl")}
    assert wheels and all(
        f"| {w} | {format_size(size)} | {100 * size / 1e9:.0f} % of 1.0 GB |" in table
        for w, size in wheels.items()
    )
    # report.json too, as kpack split-wheel's has them: each wheel, its size, the budget
    rows = json.loads((dest / "report.json").read_text())["budget"]
    assert rows == [{"budget": 10**9, "name": w, "size": wheels[w]} for w in sorted(wheels)]


def test_no_budget_no_budget_rows(sample_tree: Path, tmp_path: Path) -> None:
    dest = tmp_path / "out"
    argv = ["--artifact-dir", str(sample_tree), "--dest-dir", str(dest), "--version", VERSION]
    assert main([*argv, "-q"]) == 0
    assert json.loads((dest / "report.json").read_text())["budget"] == []
    assert "Size budget" not in (dest / "report.md").read_text()
