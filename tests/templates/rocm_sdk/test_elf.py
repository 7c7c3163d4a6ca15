"""rocm_sdk._elf against readelf and tiny compiled libraries."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.templates.tpl_kit import compile_library
from tests.templates.tpl_rendering import TEMPLATES

_spec = importlib.util.spec_from_file_location(
    "tpl_rocm_sdk_elf", TEMPLATES / "rocm" / "src" / "rocm_sdk" / "_elf.py"
)
assert _spec is not None and _spec.loader is not None
_elf = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _elf
_saved, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # keep templates/ clean
try:
    _spec.loader.exec_module(_elf)
finally:
    sys.dont_write_bytecode = _saved


def readelf_dynamic(path: Path) -> tuple[list[str], str | None]:
    out = subprocess.run(
        ["readelf", "-dW", str(path)], capture_output=True, text=True, check=True
    ).stdout
    needed, soname = [], None
    for line in out.splitlines():
        if "(NEEDED)" in line:
            needed.append(line.split("[", 1)[1].rstrip("]"))
        elif "(SONAME)" in line:
            soname = line.split("[", 1)[1].rstrip("]")
    return needed, soname


def test_tiny_library(tmp_path: Path) -> None:
    base = compile_library(
        tmp_path / "libbase.so.1", "int f(void){return 1;}", soname="libbase.so.1"
    )
    user = compile_library(
        tmp_path / "libuser.so.2",
        "int f(void); int g(void){return f();}",
        soname="libuser.so.2",
        link=[base],
        rpath="$ORIGIN",
    )
    info = _elf.read_dynamic(user)
    assert info.soname == "libuser.so.2" and info.e_type == _elf.ET_DYN
    assert "libbase.so.1" in info.needed
    assert _elf.read_dynamic(base).soname == "libbase.so.1"


@pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf is not installed")
@pytest.mark.parametrize(
    "path",
    [sys.executable, "/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"],
)
def test_matches_readelf(path: str) -> None:
    if not Path(path).exists():
        pytest.skip(f"{path} does not exist here")
    real = Path(path).resolve()
    info = _elf.read_dynamic(real)
    assert (list(info.needed), info.soname) == readelf_dynamic(real)


def test_not_elf(tmp_path: Path) -> None:
    text = tmp_path / "script.so"
    text.write_text("#!/bin/sh\n")
    assert not _elf.is_elf(text)
    with pytest.raises(_elf.ElfError):
        _elf.read_dynamic(text)
    truncated = tmp_path / "trunc.so"
    truncated.write_bytes(b"\x7fELF\x02\x01")
    with pytest.raises(_elf.ElfError):
        _elf.read_dynamic(truncated)
