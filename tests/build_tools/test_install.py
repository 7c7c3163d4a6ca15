"""`pip install .` gives a working `build-python-packages` that carries its data."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_project_wheel_carries_data_and_cli_works(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(tmp_path / "w"),
            str(REPO),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wheel = next((tmp_path / "w").glob("*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    for needed in (
        "build_tools/templates/rocm/src/rocm_sdk/__init__.py",
        "build_tools/templates/common/_dist_info.py.j2",
        "kpack/manifests/packages.yaml",
        "kpack/manifests/targets.yaml",
        "kpack/manifests/databases.yaml",
        "kpack/wheelfile/__init__.py",
        "build_tools/launcher.c",
        "kpack/elf/__init__.py",
    ):
        assert needed in names, needed
    assert not any("__pycache__" in n for n in names)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    subprocess.run(
        [
            str(venv / "bin/python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        check=True,
    )
    out = subprocess.run(
        [str(venv / "bin/build-python-packages"), "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    ).stdout
    assert "--artifact-dir" in out and "--version-suffix" in out
    # the installed copy finds its own data, not the checkout's
    for name in ("templates", "manifests"):
        code = f"from build_tools._data import data_dir; print(data_dir({name!r}))"
        where = subprocess.run(
            [str(venv / "bin/python"), "-c", code],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            check=True,
        ).stdout.strip()
        assert where.startswith(str(venv)), where
