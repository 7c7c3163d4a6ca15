"""The upload oracles, in one place: ``twine check --strict`` on every file of a dist/, and
``check-wheel-contents`` on every wheel, with each check we ignore named and justified here.

Ignored ``check-wheel-contents`` checks (all consequences of TheRock's package layout):

- **W002** duplicate files: runtime wheels hold no symlinks (packages spec §6), so a library
  and its SONAME alias are equal files.
- **W004** non-importable module path: legacy libraries packages keep the ``-`` of the GPU
  family name (``_rocm_sdk_libraries_gfx94X-dcgpu``), as TheRock names them (spec §1).
- **W009** several top-level entries: every wheel ships a pure package (``rocm_sdk_core``)
  next to its platform package (``_rocm_sdk_core``).
- **W010** top-level library directory without Python files: a device wheel overlays
  ``_rocm_sdk_libraries/`` with ``.kpack`` archives and database files only — by design it
  owns no ``.py`` (or ``__init__.py``) that the libraries wheel owns.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

__all__ = ["IGNORED_WHEEL_CHECKS", "check_dist_for_upload"]

IGNORED_WHEEL_CHECKS = ("W002", "W004", "W009", "W010")


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *argv], capture_output=True, text=True, check=False
    )


def check_dist_for_upload(dist: Path) -> list[Path]:
    """Assert that ``dist`` (and its per-family subdirs) holds distributions only, each of
    which passes ``twine check --strict``, and that every wheel passes check-wheel-contents.
    Returns the files checked."""
    files = sorted(p for p in dist.rglob("*") if p.is_file())
    others = [p.name for p in files if not p.name.endswith((".whl", ".tar.gz"))]
    assert not others, f"not distributions (twine upload dist/* would fail): {others}"
    assert files, f"{dist} is empty"
    twine = _run("twine", "check", "--strict", *map(str, files))
    assert twine.returncode == 0, twine.stdout + twine.stderr
    wheels = [str(p) for p in files if p.name.endswith(".whl")]
    contents = _run(
        "check_wheel_contents", "--no-config", "--ignore", ",".join(IGNORED_WHEEL_CHECKS), *wheels
    )
    assert contents.returncode == 0, contents.stdout + contents.stderr
    return files
