"""kpack is the lower layer: nothing under kpack/ may import build_tools."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_kpack_never_imports_build_tools() -> None:
    offenders = sorted(
        f"{path.relative_to(REPO)}: {name}"
        for path in (REPO / "kpack").rglob("*.py")
        for name in _imports(path)
        if name == "build_tools" or name.startswith("build_tools.")
    )
    assert not offenders, offenders


def test_the_check_sees_an_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from build_tools.wheel import Member\nimport build_tools\n")
    assert _imports(probe) == {"build_tools.wheel", "build_tools"}
