"""Fixtures shared by the builder's real-input tests."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from build_tools.build_python_packages import main

from ..conftest import require

VERSION = "7.99.0.dev0"


@pytest.fixture(scope="session")
def sample_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real legacy-mode sample tree (Debian ROCm binaries + hipcc-compiled ones)."""
    require(shutil.which("hipcc") is not None, "hipcc is not installed")
    from sample_tree.make_sample_tree import make_sample_tree

    out = tmp_path_factory.mktemp("sample") / "artifacts"
    return make_sample_tree(out, cache_dir=None, family="gfx90a-dcgpu", kpack_split=False)


def build_dist(tree: Path, dest: Path, *extra: str) -> Path:
    """Run the builder's CLI entry point; return DEST/dist."""
    argv = ["--artifact-dir", str(tree), "--dest-dir", str(dest), "--version", VERSION, *extra]
    assert main(argv) == 0
    return dest / "dist"


def install(dist: Path, venv: Path, requirement: str) -> Path:
    """Create a fresh venv and pip-install ``requirement`` from ``dist`` only (never an
    index: PyPI holds empty placeholders under our names). Returns its site-packages."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin/python"), "-m", "pip", "--disable-pip-version-check"]
    proc = subprocess.run(
        [*pip, "install", "--no-cache-dir", "--no-index", "--find-links", str(dist), requirement],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return next(venv.glob("lib/python*/site-packages"))
