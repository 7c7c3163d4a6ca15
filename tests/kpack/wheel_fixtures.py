"""Fat wheels for the wheel-splitter tests, written with our wheel writer.

:func:`make_fat_wheel` places Debian's real ``librocrand.so.1.1`` (or another fat library)
at ``torch/lib/<soname>`` next to a tiny ``torch/__init__.py`` that loads it by path with
ctypes, plus synthetic Tensile-style database files. :func:`rewrite_zip` rebuilds a wheel
with edited members, for the corrupted-input tests only.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

from kpack.wheelfile import Member, write_wheel

VERSION = "2.9.0"
TAG = "py3-none-linux_x86_64"
ROCRAND_LIB = "usr/lib/x86_64-linux-gnu/librocrand.so.1.1"

INIT_PY = b'''"""A stand-in for torch: loads its ROCm library by path."""
import ctypes
import os

_LIB = ctypes.CDLL(os.path.join(os.path.dirname(__file__), "lib", "librocrand.so.1"))


def rocrand_version() -> int:
    version = ctypes.c_int()
    status = _LIB.rocrand_get_version(ctypes.byref(version))
    if status != 0:
        raise RuntimeError(f"rocrand_get_version failed: {status}")
    return version.value
'''

#: arcname -> content of the synthetic Tensile files (the last one is arch-neutral)
DATABASES = {
    "torch/lib/rocblas/library/TensileLibrary_lazy_gfx90a.dat": b"lazy gfx90a\n",
    "torch/lib/rocblas/library/TensileLibrary_lazy_gfx1030.co": b"\x7fELF gfx1030 code\n",
    "torch/lib/rocblas/library/Kernels.so-000-gfx90a-xnack+.hsaco": b"\x7fELF gfx90a xnack+\n",
    "torch/lib/rocblas/library/TensileLibrary.dat": b"arch-neutral index\n",
}
NEUTRAL_DATABASE = "torch/lib/rocblas/library/TensileLibrary.dat"


def metadata(name: str = "torch") -> bytes:
    return (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {VERSION}\n"
        "Summary: A test stand-in for a fat ROCm wheel\nLicense: BSD-3-Clause\n"
        "Description-Content-Type: text/plain\n\nThe description body.\nSecond line.\n"
    ).encode()


def make_fat_wheel(dest: Path, library: Path, *, soname: str = "librocrand.so.1") -> Path:
    members = [
        Member("torch/__init__.py", INIT_PY),
        Member(f"torch/lib/{soname}", library, executable=True),
        Member("torch/version.py", b'__version__ = "2.9.0"\n'),
        *(Member(name, data) for name, data in DATABASES.items()),
    ]
    result = write_wheel(
        dest, dist_name="torch", version=VERSION, tag=TAG, members=members, metadata=metadata()
    )
    return result.path


#: two copies of one fat library in a torch wheel (a code object repeated across binaries)
TWIN_LIBS = ("torch/lib/librocrand.so.1", "torch/lib/more/librocrand_copy.so.1")


def make_twin_wheel(dest: Path, library: Path) -> Path:
    """A torch wheel holding ``library`` at both :data:`TWIN_LIBS` paths."""
    members = [
        Member("torch/__init__.py", INIT_PY),
        *(Member(name, library, executable=True) for name in TWIN_LIBS),
    ]
    result = write_wheel(
        dest, dist_name="torch", version=VERSION, tag=TAG, members=members, metadata=metadata()
    )
    return result.path


def make_plain_wheel(dest: Path) -> Path:
    members = [
        Member("torch/__init__.py", b"def rocrand_version() -> int:\n    return 0\n"),
        Member("torch/lib/README", b"no device code here\n"),
    ]
    result = write_wheel(
        dest, dist_name="torch", version=VERSION, tag=TAG, members=members, metadata=metadata()
    )
    return result.path


def rewrite_zip(
    source: Path, dest: Path, edit: Callable[[dict[str, bytes]], dict[str, bytes]]
) -> Path:
    """Copy ``source`` to ``dest`` with its members passed through ``edit``."""
    with zipfile.ZipFile(source) as zin:
        members = {info.filename: zin.read(info) for info in zin.infolist()}
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zout:
        for name, data in edit(members).items():
            zout.writestr(name, data)
    return dest


def record_name(members: dict[str, bytes]) -> str:
    return next(n for n in members if n.endswith(".dist-info/RECORD"))


def raw_member(path: Path, name: str) -> bytes:
    """The compressed bytes of member ``name`` of the zip at ``path``, as stored."""
    with zipfile.ZipFile(path) as z:
        info = z.getinfo(name)
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        head = f.read(30)
        skip = int.from_bytes(head[26:28], "little") + int.from_bytes(head[28:30], "little")
        f.seek(info.header_offset + 30 + skip)
        return f.read(info.compress_size)
