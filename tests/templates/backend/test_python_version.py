"""An unsupported Python gets one clear line from the rocm sdist's backend, not a traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.conftest import require
from tests.templates.backend.test_hooks import CALL_HOOK
from tests.templates.tpl_kit import rocm_sdk_tree
from tests.templates.tpl_rendering import SAMPLE_CONTEXTS


def _python39() -> str | None:
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = sorted(pyenv.glob("3.9*/bin/python3.9")) if pyenv.is_dir() else []
    if candidates:
        return str(candidates[-1])
    found = shutil.which("python3.9")  # a pyenv shim is no interpreter of its own
    return found if found and "/shims/" not in found else None


def test_python_39_is_refused_in_one_line(tmp_path: Path) -> None:
    python = _python39()
    require(python is not None, "no Python 3.9 interpreter on this machine")
    assert python is not None
    tree = rocm_sdk_tree(SAMPLE_CONTEXTS["legacy1"], tmp_path / "rocm")
    for hook in ("get_requires_for_build_wheel", "prepare_metadata_for_build_wheel"):
        args = [str(tmp_path / "out")] if hook.startswith("prepare") else []
        proc = subprocess.run(
            [python, "-c", CALL_HOOK, hook, *args], cwd=tree, capture_output=True, text=True
        )
        assert proc.returncode == 1
        lines = proc.stderr.strip().splitlines()
        assert lines == [lines[0]], proc.stderr  # exactly one line, no traceback
        assert "requires Python >= 3.10" in lines[0] and "this is Python 3.9" in lines[0]
