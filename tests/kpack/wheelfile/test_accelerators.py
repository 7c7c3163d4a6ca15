"""The optional accelerators: ISA-L (``isal``) inflates wheel members faster than ``zlib``
and gives the same bytes, so a wheel split without it writes the same wheels; libdeflate
(``deflate``) decides a written wheel's bytes, so without it no wheel is written and the error
names the module, before any work. Each side runs in a child process whose ``isal`` or
``deflate`` does not import (``tests/import_blocker``), as in a venv without them."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kpack.errors import PackagingError
from kpack.wheelfile import Member, libdeflate, write_wheel
from tests.pypi_inputs import JAX_PLUGIN, pypi_wheel

BLOCKER = Path(__file__).resolve().parents[2] / "import_blocker"


def run_without(blocked: str, *argv: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python *argv`` with the top-level modules ``blocked`` (comma-separated) missing."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(BLOCKER), os.environ.get("PYTHONPATH")])),
        "KPACK_TEST_BLOCKED_MODULES": blocked,
        "SOURCE_DATE_EPOCH": "1700000000",
    }
    return subprocess.run(
        [sys.executable, *map(str, argv)], cwd=cwd, env=env, capture_output=True, text=True
    )


def digests(root: Path) -> dict[str, str]:
    """relpath -> sha256 of every file below ``root`` but the tools' records (they name the
    output dir)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not any(part.startswith(".kpack-") for part in rel.split("/")):
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def test_the_blocker_blocks(tmp_path: Path) -> None:
    """The premise: a blocked module does not import in the child, nor in its children."""
    code = "import subprocess as s, sys; sys.exit(s.call([sys.executable, '-c', 'import isal']))"
    proc = run_without("isal", "-c", code, cwd=tmp_path)
    assert proc.returncode == 1 and "No module named 'isal'" in proc.stderr
    assert run_without("", "-c", "import isal, deflate, rich", cwd=tmp_path).returncode == 0
    uses_zlib = "import zlib, kpack.wheelfile._inflate as m; assert m._inflate_lib is zlib"
    proc = run_without("isal", "-c", uses_zlib, cwd=Path(__file__).resolve().parents[3])
    assert proc.returncode == 0, proc.stderr


def split_wheel(blocked: str, work: Path) -> subprocess.CompletedProcess[str]:
    """``kpack split-wheel`` of the real jax-rocm7-plugin wheel into ``work/out`` (its reports
    beside it, in ``work``)."""
    work.mkdir()
    return run_without(
        blocked, "-m", "kpack", "split-wheel", "--input", pypi_wheel(JAX_PLUGIN),
        "--output-dir", work / "out", "--overlay-root", JAX_PLUGIN.overlay_root,
        "--device-package-prefix", f"{JAX_PLUGIN.project}-device",
        cwd=work,
    )  # fmt: skip


def test_a_wheel_split_without_isal_writes_the_same_wheels(tmp_path: Path) -> None:
    """The real jax-rocm7-plugin wheel (deflated members, compressed bundles) split with
    ISA-L and without it: the same files, byte for byte (reports included)."""
    with_isal = split_wheel("", tmp_path / "with")
    assert with_isal.returncode == 0, with_isal.stderr
    without = split_wheel("isal", tmp_path / "without")
    assert without.returncode == 0, without.stderr
    written = digests(tmp_path / "with")
    assert sum(name.endswith(".whl") for name in written) >= 2
    assert any(name.endswith("split-report.json") for name in written)
    assert digests(tmp_path / "without") == written


def test_a_wheel_split_without_deflate_names_it_and_writes_nothing(tmp_path: Path) -> None:
    proc = split_wheel("deflate", tmp_path / "work")
    assert proc.returncode == 1, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "'deflate'" in line and "pip install 'deflate==" in line and "Traceback" not in line
    assert list((tmp_path / "work").iterdir()) == []


def test_write_wheel_without_deflate_refuses_before_staging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "deflate", None)  # import deflate: ImportError
    libdeflate.cache_clear()
    try:
        with pytest.raises(PackagingError, match=r"'deflate'.*not installed: pip install"):
            write_wheel(
                tmp_path, dist_name="a", version="1", tag="py3-none-any",
                members=[Member("a/x.txt", b"x" * 1000)],
                metadata=b"Metadata-Version: 2.1\nName: a\nVersion: 1\n",
            )  # fmt: skip
        assert list(tmp_path.iterdir()) == []
    finally:
        libdeflate.cache_clear()


def test_stored_wheels_need_no_deflate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "deflate", None)
    libdeflate.cache_clear()
    try:
        result = write_wheel(
            tmp_path, dist_name="a", version="1", tag="py3-none-any",
            members=[Member("a/x.txt", b"x" * 1000)], compression=False,
            metadata=b"Metadata-Version: 2.1\nName: a\nVersion: 1\n",
        )  # fmt: skip
        assert result.path.is_file()
    finally:
        libdeflate.cache_clear()
