"""The upload oracles, in one place: ``twine check --strict`` on every file of a dist/, and
``check-wheel-contents`` on every wheel, run with the repository's own configuration.

The checks we ignore, and why, live in ``[tool.check-wheel-contents]`` of pyproject.toml, so
``check-wheel-contents dist/*.whl`` run from the repository root gives what the tests give.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import tomllib

__all__ = [
    "CONFIG",
    "IGNORED_WHEEL_CHECKS",
    "check_dist_for_upload",
    "check_wheel_contents",
    "configured_ignores",
]

CONFIG = Path(__file__).resolve().parent.parent / "pyproject.toml"


def configured_ignores(config: Path = CONFIG) -> tuple[str, ...]:
    """The ``ignore`` list of ``[tool.check-wheel-contents]`` in ``config``."""
    table = tomllib.loads(config.read_text(encoding="utf-8"))["tool"]["check-wheel-contents"]
    return tuple(table["ignore"])


IGNORED_WHEEL_CHECKS = configured_ignores()


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *argv], capture_output=True, text=True, check=False
    )


def check_wheel_contents(wheels: list[str]) -> subprocess.CompletedProcess[str]:
    """``check-wheel-contents --config pyproject.toml WHEEL...``."""
    return _run("check_wheel_contents", "--config", str(CONFIG), *wheels)


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
    contents = check_wheel_contents(wheels)
    assert contents.returncode == 0, contents.stdout + contents.stderr
    return files
