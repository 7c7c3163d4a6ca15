"""The installed runtime under the project's own lint and type settings.

The ``rocm_sdk`` runtime, the ``rocm`` sdist's build backend and the pure packages' Python
(``templates/``) ship to users stdlib-only. ``ruff check`` covers them from pyproject.toml as
it covers the rest; mypy needs the generated ``rocm_sdk/_dist_info.py``, so the tree is
rendered here for each sample context and checked with ``mypy --strict`` (the settings
pyproject.toml gives the rest of the project).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tpl_rendering import SAMPLE_CONTEXTS, TEMPLATES, render, render_tree

from tests.conftest import require

REPO = TEMPLATES.parent


def _have(module: str) -> bool:
    proc = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True)
    return proc.returncode == 0


@pytest.mark.parametrize("name", ["legacy2", "kpack"])
def test_rendered_runtime_is_mypy_strict_clean(name: str, tmp_path: Path) -> None:
    require(_have("mypy"), "mypy is not installed (pip install -e .[test])")
    context = SAMPLE_CONTEXTS[name]
    render_tree("rocm", context, tmp_path)
    dist_info = tmp_path / "src" / "rocm_sdk" / "_dist_info.py"
    dist_info.write_text(render("common/_dist_info.py.j2", context), encoding="utf-8")
    flags = ["--strict", "--python-version", "3.10", "--cache-dir", str(tmp_path / ".mypy")]
    targets = [str(tmp_path / "src" / "rocm_sdk"), str(tmp_path / "_backend")]
    command = [sys.executable, "-m", "mypy", *flags, *targets]
    proc = subprocess.run(command, cwd=tmp_path / "src", capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_templates_are_linted_like_the_rest() -> None:
    require(_have("ruff"), "ruff is not installed (pip install -e .[test])")
    sources = sorted(str(p) for p in TEMPLATES.rglob("*.py"))
    assert any(s.endswith("_kpack_check.py") for s in sources)
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", *sources], cwd=REPO, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
