"""The set-up scripts: a failed step says which one and how to retry; nothing is pip-installed
into the system interpreter."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIB = ROOT / ".ci" / "lib.sh"


def _bash(script: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f"set -euo pipefail; source {LIB}; {script}"],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_failed_step_names_itself_and_how_to_retry() -> None:
    proc = _bash('SETUP_SCRIPT=.ci/setup; step "apt-get install foo" sh -c "echo boom >&2; exit 3"')
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("setup failed at step: apt-get install foo")
    assert "re-run: bash .ci/setup" in last
    assert "boom" in proc.stderr  # the failing command's own output is kept


def test_failed_pip_install_leaves_the_venv_incomplete_and_system_untouched(
    tmp_path: Path,
) -> None:
    venv = tmp_path / "venv"
    env = {"ROCM_PACKAGING_VENV": str(venv), "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path)}
    proc = _bash("make_venv; venv_pip_install no-such-package-xyz==1.0", env)
    assert proc.returncode == 1
    assert "setup failed at step: pip install no-such-package-xyz==1.0" in proc.stderr
    assert (venv / "bin" / "python").exists()
    assert not (venv / ".complete").exists()  # the next run starts the venv over
    # a second run remakes the half-made venv rather than trusting it
    marker = venv / "stale-marker"
    marker.write_text("x")
    proc = _bash("make_venv", env)
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists()


def test_scripts_never_pip_install_into_the_system_interpreter() -> None:
    for script in (ROOT / ".ci").iterdir():
        text = script.read_text()
        for line in text.splitlines():
            if "pip install" in line and not line.lstrip().startswith("#"):
                assert "$VENV" in line or "venv/bin/python" in line or "step " in line, (
                    f"{script.name}: {line.strip()}"
                )
