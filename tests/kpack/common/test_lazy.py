"""Lazy package faces (kpack.common.lazy): each name the face's ``TYPE_CHECKING`` imports
give the type checker is the one it hands out at run time, imported from that module, and
importing the face alone imports none of those modules."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kpack.common.lazy import lazy_face

ROOT = Path(__file__).resolve().parents[3]
#: every package whose face is lazy, in all (split) or in part (transform: the PE transform;
#: wheelfile: the sdist writer; elf: the link edits and the old-kernel rule; pe: the reader;
#: wheelsplit: the shards' assembly)
LAZY_FACES = (
    "kpack.elf",
    "kpack.pe",
    "kpack.split",
    "kpack.transform",
    "kpack.wheelfile",
    "kpack.wheelsplit",
)


def _checked_imports(package: str) -> dict[str, str]:
    """name -> module of the ``from M import name`` lines under ``if TYPE_CHECKING:``."""
    path = ROOT / Path(*package.split(".")) / "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.module, ast.unparse(stmt)
                found.update({alias.name: stmt.module for alias in stmt.names})
    return found


def _fresh(code: str) -> object:
    """What ``code`` prints as JSON, run in a fresh interpreter (nothing imported yet)."""
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return json.loads(proc.stdout)


@pytest.mark.parametrize("package", LAZY_FACES)
def test_the_checked_names_are_public_names(package: str) -> None:
    face = importlib.import_module(package)
    checked = _checked_imports(package)
    assert checked and set(checked) <= set(face.__all__)
    assert set(face.__all__) <= set(dir(face))
    if package == "kpack.split":
        assert sorted(checked) == sorted(face.__all__)  # a face and nothing else


@pytest.mark.parametrize("package", LAZY_FACES)
def test_each_name_comes_from_its_checked_module(package: str) -> None:
    face = importlib.import_module(package)
    for name, module in _checked_imports(package).items():
        assert getattr(face, name) is getattr(importlib.import_module(module), name), name


@pytest.mark.parametrize("package", LAZY_FACES)
def test_the_face_alone_imports_none_of_its_lazy_modules(package: str) -> None:
    code = f"import json, sys, {package}\nprint(json.dumps(sorted(sys.modules)))"
    loaded = _fresh(code)
    assert isinstance(loaded, list)
    assert set(_checked_imports(package).values()).isdisjoint(loaded)


def test_one_name_imports_its_module_only() -> None:
    code = (
        "import json, sys\nfrom kpack.split import split_fat\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('kpack.split.'))))"
    )
    loaded = _fresh(code)
    assert isinstance(loaded, list) and "kpack.split._fat" in loaded
    for tool in ("_artifacts", "_recombine", "_inplan", "_write"):  # other tools' modules
        assert f"kpack.split.{tool}" not in loaded


def test_an_unknown_name_is_an_attribute_error() -> None:
    getattr_, dir_ = lazy_face("kpack.split", {"split_fat": "_fat"})
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        getattr_("nothing")
    assert "split_fat" in dir_()
    with pytest.raises(ImportError):
        from kpack.split import nothing  # type: ignore[attr-defined]  # noqa: F401
