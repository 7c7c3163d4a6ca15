"""The installed runtime under the project's own lint and type settings.

The ``rocm_sdk`` runtime, the ``rocm`` sdist's build backend and the pure packages' Python
(``templates/``) ship to users stdlib-only. ``ruff check`` covers them from pyproject.toml as
it covers the rest. The project's mypy run (``python -m mypy``, pyproject.toml) checks the
runtime and the backend in place with ``--strict``, reading the generated
``rocm_sdk/_dist_info.py`` from its stub (``templates/common/stubs``). Here the stub is held
to the rendered module (mypy's stubtest), and every rendered package — the ``rocm`` sdist's
``rocm_sdk`` and backend, the pure packages and a platform package, each with its own
``_dist_info.py`` — is checked with ``mypy --strict`` for each sample context.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require
from tests.templates.tpl_kit import platform_init, pure_package_files, rocm_sdk_tree
from tests.templates.tpl_rendering import SAMPLE_CONTEXTS, TEMPLATES

REPO = TEMPLATES.parent
STUBS = TEMPLATES / "common" / "stubs"
#: the pure packages, by template directory, under importable names of their kind
PURE = {
    "core": "rocm_sdk_core",
    "libraries": "rocm_sdk_libraries",
    "devel": "rocm_sdk_devel",
    "profiler": "rocm_profiler",
}
PLATFORM = "_rocm_sdk_core_v7"
MYPY_FLAGS = ("--strict", "--python-version", "3.10")


def _have(module: str) -> bool:
    proc = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True)
    return proc.returncode == 0


def _render_site(context: dict[str, Any], site: Path) -> Path:
    """The rendered rocm sdist tree (returned) and the pure and platform packages at ``site``."""
    sdist: Path = rocm_sdk_tree(context, site.parent / "sdist")
    files = platform_init(PLATFORM)
    for kind, name in PURE.items():
        files.update(pure_package_files(kind, name, context))
    for rel, data in files.items():
        out = site / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
    return sdist


@pytest.mark.parametrize("name", ["legacy2", "kpack"])
def test_rendered_packages_are_mypy_strict_clean(name: str, tmp_path: Path) -> None:
    require(_have("mypy"), "mypy is not installed (pip install -e .[test])")
    site = tmp_path / "site"
    sdist = _render_site(SAMPLE_CONTEXTS[name], site)
    packages = [site / p for p in (*PURE.values(), PLATFORM)]
    targets = [sdist / "src" / "rocm_sdk", sdist / "_backend", *packages]
    flags = [*MYPY_FLAGS, "--cache-dir", str(tmp_path / ".mypy"), "--config-file="]
    command = [sys.executable, "-m", "mypy", *flags, *map(str, targets)]
    proc = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("name", ["legacy2", "kpack", "kpack-generic", "malicious"])
def test_dist_info_stub_matches_the_rendered_module(name: str, tmp_path: Path) -> None:
    """Every name, signature and type of templates/common/stubs/rocm_sdk/_dist_info.pyi is
    what the template renders: no name missing on either side."""
    require(_have("mypy"), "mypy is not installed (pip install -e .[test])")
    sdist = rocm_sdk_tree(SAMPLE_CONTEXTS[name], tmp_path / "sdist")
    command = [sys.executable, "-m", "mypy.stubtest", "rocm_sdk._dist_info", "--concise"]
    env = {**os.environ, "MYPYPATH": str(STUBS), "PYTHONPATH": str(sdist / "src")}
    proc = subprocess.run(
        [*command, "--mypy-config-file", str(tmp_path / "none.ini")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_project_mypy_run_covers_the_runtime() -> None:
    """``python -m mypy`` checks the runtime in place: its files and search path are in
    pyproject.toml (one command for kpack, build_tools and the runtime)."""
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    section = text.split("[tool.mypy]", 1)[1].split("\n[", 1)[0]
    for entry in ('"templates/rocm/src/rocm_sdk"', '"templates/rocm/_backend"'):
        assert entry in section
    assert '"templates/common/stubs"' in section


def test_templates_are_linted_like_the_rest() -> None:
    require(_have("ruff"), "ruff is not installed (pip install -e .[test])")
    sources = sorted(str(p) for p in TEMPLATES.rglob("*.py*") if p.suffix in (".py", ".pyi"))
    assert any(s.endswith("_kpack_check.py") for s in sources)
    assert any(s.endswith("_dist_info.pyi") for s in sources)
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", *sources], cwd=REPO, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
