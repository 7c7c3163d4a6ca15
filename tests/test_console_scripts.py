"""Every command the help texts and README name is an installed console script that runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _declared() -> dict[str, str]:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    section = text.split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    return dict(re.findall(r'^([\w-]+) = "([\w.:]+)"', section, re.MULTILINE))


def test_every_prog_name_is_declared() -> None:
    progs = set()
    for path in [*ROOT.glob("build_tools/*.py"), *ROOT.glob("kpack/**/*.py")]:
        progs.update(re.findall(r'prog="([\w-]+)"', path.read_text(encoding="utf-8")))
    assert progs, "no prog= names found: the scan is broken"
    assert progs <= set(_declared()), sorted(progs - set(_declared()))


@pytest.mark.parametrize("name", sorted(_declared()))
def test_console_script_is_installed_and_runs(name: str) -> None:
    script = Path(sys.executable).parent / name
    assert script.exists(), f"{script} missing: reinstall the project (bash .ci/setup)"
    proc = subprocess.run([str(script), "--help"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "usage:" in proc.stdout
