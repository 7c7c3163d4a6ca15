"""Tests for kpack.wheelfile._sdist: layout, ownership, timestamps, reproducibility, oracles."""

from __future__ import annotations

import gzip
import importlib.util
import io
import shutil
import struct
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kpack.errors import PackagingError
from kpack.wheelfile import Member
from kpack.wheelfile._sdist import sdist_filename, write_sdist

EPOCH = 1_700_000_000
PKG_INFO = (
    b"Metadata-Version: 2.1\r\nName: rocm\r\nVersion: 7.0.0rc1\r\nSummary: ROCm meta package\r\n"
)


def sample_files(tmp_path: Path) -> list[Member]:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "setup.py").write_bytes(b"from setuptools import setup\r\nsetup()\r\n")
    (src / "blob.bin").write_bytes(b"\r\n\x00binary\r\n" * 100)

    def generated() -> Iterator[bytes]:
        yield b"VERSION = '7.0.0rc1'\r\n"
        yield b"FAMILIES = ['gfx94X-dcgpu']\r\n"

    return [
        Member("setup.py", src / "setup.py"),
        Member("pyproject.toml", b'[build-system]\r\nrequires = ["setuptools"]\r\n'),
        Member("src/rocm_sdk/__init__.py", b"from ._dist_info import VERSION\n"),
        Member("src/rocm_sdk/_dist_info.py", generated),
        Member("src/rocm_sdk/tests/__init__.py", b""),
        Member("src/rocm_sdk/data/blob.bin", src / "blob.bin"),
        Member("src/rocm_sdk/data/tool.sh", b"#!/bin/sh\r\necho\r\n", executable=True),
    ]


def build(dest: Path, files: list[Member], **kwargs: object) -> Path:
    options: dict[str, object] = {
        "dist_name": "rocm",
        "version": "7.0.0rc1",
        "pkg_info": PKG_INFO,
        "epoch": EPOCH,
    }
    options.update(kwargs)
    return write_sdist(dest, files=files, **options)  # type: ignore[arg-type]


def test_filename_normalizes() -> None:
    assert sdist_filename("ROCm_SDK.core", "7.0.0-RC1") == "rocm_sdk_core-7.0.0rc1.tar.gz"


def test_layout_owner_mtime_and_order(tmp_path: Path) -> None:
    path = build(tmp_path / "dist", sample_files(tmp_path))
    assert path == tmp_path / "dist" / "rocm-7.0.0rc1.tar.gz"
    with tarfile.open(path) as tar:
        members = tar.getmembers()
        assert tar.pax_headers == {}
    names = [m.name for m in members]
    top = "rocm-7.0.0rc1"
    assert names == [
        top,
        f"{top}/PKG-INFO",
        f"{top}/pyproject.toml",
        f"{top}/setup.py",
        f"{top}/src",
        f"{top}/src/rocm_sdk",
        f"{top}/src/rocm_sdk/__init__.py",
        f"{top}/src/rocm_sdk/_dist_info.py",
        f"{top}/src/rocm_sdk/data",
        f"{top}/src/rocm_sdk/data/blob.bin",
        f"{top}/src/rocm_sdk/data/tool.sh",
        f"{top}/src/rocm_sdk/tests",
        f"{top}/src/rocm_sdk/tests/__init__.py",
    ]
    for m in members:
        assert (m.uid, m.gid, m.uname, m.gname, m.mtime) == (0, 0, "", "", EPOCH), m.name
        if m.isdir():
            assert m.mode == 0o755
        else:
            assert m.isfile()
            assert m.mode == (0o755 if m.name.endswith("tool.sh") else 0o644), m.name


def test_gzip_header_is_fixed(tmp_path: Path) -> None:
    raw = build(tmp_path, sample_files(tmp_path)).read_bytes()
    magic, method, flags, mtime = struct.unpack("<2sBBI", raw[:8])
    assert (magic, method) == (b"\x1f\x8b", 8)
    assert flags & 0x08 == 0  # no FNAME
    assert mtime == EPOCH


def test_crlf_to_lf_for_text_only(tmp_path: Path) -> None:
    files = sample_files(tmp_path)
    path = build(tmp_path / "dist", files)
    with tarfile.open(path) as tar:

        def read(name: str) -> bytes:
            handle = tar.extractfile(f"rocm-7.0.0rc1/{name}")
            assert handle is not None
            return handle.read()

        assert read("PKG-INFO") == PKG_INFO.replace(b"\r\n", b"\n")
        assert read("setup.py") == b"from setuptools import setup\nsetup()\n"
        assert read("pyproject.toml") == b'[build-system]\nrequires = ["setuptools"]\n'
        assert read("src/rocm_sdk/_dist_info.py") == (
            b"VERSION = '7.0.0rc1'\nFAMILIES = ['gfx94X-dcgpu']\n"
        )
        assert read("src/rocm_sdk/data/blob.bin") == b"\r\n\x00binary\r\n" * 100
        assert read("src/rocm_sdk/data/tool.sh") == b"#!/bin/sh\r\necho\r\n"


def test_reproducible_and_order_independent(tmp_path: Path) -> None:
    files = sample_files(tmp_path)
    first = build(tmp_path / "a", files).read_bytes()
    second = build(tmp_path / "b", files).read_bytes()
    third = build(tmp_path / "c", list(reversed(files))).read_bytes()
    assert first == second == third


def test_source_date_epoch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1600000000")
    path = build(tmp_path, [Member("a.py", b"x")], epoch=None)
    with tarfile.open(path) as tar:
        assert {m.mtime for m in tar.getmembers()} == {1_600_000_000}
    assert gzip.GzipFile(fileobj=io.BytesIO(path.read_bytes())).read()
    assert struct.unpack("<I", path.read_bytes()[4:8]) == (1_600_000_000,)


def test_long_and_unicode_names(tmp_path: Path) -> None:
    long_name = "src/" + "d" * 120 + "/módulo.py"
    path = build(tmp_path, [Member(long_name, b"x = 1\n")])
    with tarfile.open(path) as tar:
        names = tar.getnames()
        assert f"rocm-7.0.0rc1/{long_name}" in names
        handle = tar.extractfile(f"rocm-7.0.0rc1/{long_name}")
        assert handle is not None and handle.read() == b"x = 1\n"


def test_large_binary_member_streams(tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(bytes(range(256)) * 40_000)
    path = build(tmp_path / "dist", [Member("data/big.bin", big)], level=1)
    with tarfile.open(path) as tar:
        handle = tar.extractfile("rocm-7.0.0rc1/data/big.bin")
        assert handle is not None and handle.read() == big.read_bytes()


def test_rejects_bad_members(tmp_path: Path) -> None:
    dest = tmp_path / "dist"
    with pytest.raises(PackagingError) as info:
        build(
            dest,
            [
                Member("a.py", b"1"),
                Member("a.py", b"2"),
                Member("PKG-INFO", b""),
                Member("b", b""),
                Member("b/c", b""),
            ],
        )
    assert len(info.value.problems) == 3
    with pytest.raises(PackagingError):
        Member("../escape.py", b"")
    with pytest.raises(PackagingError, match="level"):
        build(dest, [], level=11)
    with pytest.raises(PackagingError, match="cannot read"):
        build(dest, [Member("missing.py", tmp_path / "nope.py")])
    with pytest.raises(PackagingError, match="cannot read"):
        build(dest, [Member("missing.bin", tmp_path / "nope.bin")])

    def failing() -> Iterator[bytes]:
        yield b"partial"
        raise RuntimeError("broken generator")

    with pytest.raises(RuntimeError):
        build(dest, [Member("gen.bin", failing)])
    assert not dest.exists() or list(dest.iterdir()) == []


def test_extract_with_data_filter(tmp_path: Path) -> None:
    path = build(tmp_path / "dist", sample_files(tmp_path))
    out = tmp_path / "out"
    with tarfile.open(path) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(out, filter="data")
        else:  # pragma: no cover - Python without extraction filters
            tar.extractall(out)
    tool = out / "rocm-7.0.0rc1" / "src" / "rocm_sdk" / "data" / "tool.sh"
    assert tool.stat().st_mode & 0o111


def test_twine_check(tmp_path: Path) -> None:
    path = build(tmp_path, sample_files(tmp_path))
    proc = subprocess.run(
        ["twine", "check", str(path)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_pip_builds_a_wheel_from_it(tmp_path: Path) -> None:
    """pip (offline, with the installed setuptools) turns our sdist into a wheel.

    Needs a setuptools that provides ``bdist_wheel`` (>= 70.1, or the ``wheel`` package).
    """
    setuptools = pytest.importorskip("setuptools")
    major, minor = (int(x) for x in setuptools.__version__.split(".")[:2])
    if (major, minor) < (70, 1) and importlib.util.find_spec("wheel") is None:
        pytest.skip(
            f"setuptools {setuptools.__version__} has no bdist_wheel and 'wheel' is missing"
        )
    setup_py = b"from setuptools import setup\nsetup(name='rocm', version='7.0.0rc1', "
    setup_py += b"package_dir={'': 'src'}, packages=['rocm_sdk'])\n"
    files = [
        Member("setup.py", setup_py),
        Member("pyproject.toml", b'[build-system]\nrequires = ["setuptools"]\n'),
        Member("src/rocm_sdk/__init__.py", b"VERSION = '7.0.0rc1'\n"),
    ]
    path = build(tmp_path / "dist", files)
    wheels = tmp_path / "wheels"
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index"),
            *("--no-build-isolation", "-w", str(wheels), str(path)),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [p.name for p in wheels.iterdir()] == ["rocm-7.0.0rc1-py3-none-any.whl"]
    shutil.rmtree(wheels)
