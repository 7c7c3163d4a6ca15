"""libdeflate (PyPI ``deflate``), the wheel writer's compressor, imported when first used.

A wheel's bytes depend on the deflate engine that wrote them: zlib and libdeflate make
different (equally valid) streams of the same input. Every wheel this project writes is
deflated by libdeflate, so that it is the same on every machine; there is no fallback to
``zlib``. Without the module a wheel is not written, and the error names the module and how
to install it, before any output is staged.

Tools that write no wheels (``split-artifacts``, ``bulk_unbundle``, ``recombine_artifacts``:
rocm-kpack's tools TheRock runs by path in its own build venv, which has no ``deflate``)
never import it.
"""

from __future__ import annotations

import functools
import importlib
from typing import Protocol, cast

from kpack.errors import PackagingError

__all__ = ["MODULE", "LibDeflate", "libdeflate"]

#: The distribution and module name, and the version ``pyproject.toml`` pins.
MODULE = "deflate"
PIN = "deflate==0.9.0"


class LibDeflate(Protocol):
    """The part of the ``deflate`` module the writer calls."""

    def deflate_compress(self, data: bytes | bytearray, compresslevel: int = ...) -> bytes: ...
    def crc32(self, data: bytes | bytearray | memoryview, value: int = ..., /) -> int: ...


@functools.cache
def libdeflate() -> LibDeflate:
    """The ``deflate`` module; :class:`PackagingError` (one line) when it is not installed."""
    try:
        return cast(LibDeflate, importlib.import_module(MODULE))
    except ImportError:
        raise PackagingError(
            f"writing a wheel needs the Python module '{MODULE}' (libdeflate: wheel bytes "
            f"depend on it, zlib's would differ), which is not installed: "
            f"pip install '{PIN}'"
        ) from None
