"""Fixtures shared by the builder's real-input tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from build_tools.build_python_packages import main

from ..conftest import require

VERSION = "7.99.0.dev0"


@pytest.fixture(scope="session")
def sample_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real legacy-mode sample tree (Debian ROCm binaries + hipcc-compiled ones)."""
    require(shutil.which("hipcc") is not None, "hipcc is not installed")
    from build_tools.make_sample_tree import make_sample_tree

    out = tmp_path_factory.mktemp("sample") / "artifacts"
    return make_sample_tree(out, cache_dir=None, family="gfx90a-dcgpu", kpack_split=False)


def build_dist(tree: Path, dest: Path, *extra: str) -> Path:
    """Run the builder's CLI entry point; return DEST/dist."""
    argv = ["--artifact-dir", str(tree), "--dest-dir", str(dest), "--version", VERSION, *extra]
    assert main(argv) == 0
    return dest / "dist"
