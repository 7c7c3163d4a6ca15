"""Output files whose failed writes name them.

``write()`` on a full disk raises ``OSError(ENOSPC)`` without a file name: at the error
boundary that is a bare ``No space left on device``, and a reader boundary that wraps
whatever its block raises (a damaged-input check, say) would blame the *input*. An
:class:`OutputFile` gives every ``OSError`` of ``write``, ``flush``, ``truncate`` and
``close`` (``ENOSPC``, ``EDQUOT``, ``EFBIG``, ``EIO`` of the output's descriptor) the name of
the output it was writing, so the boundary prints ``error: <output>: No space left on
device``. Errors of reading the input are not touched: they keep naming the input.
"""

from __future__ import annotations

import io
import os
from typing import Any

__all__ = ["OutputFile", "named_write_error", "output_file"]


def named_write_error(exc: OSError, path: str | os.PathLike[str]) -> OSError:
    """``exc`` if it names a file already, else the same error naming ``path``."""
    if exc.filename is not None:
        return exc
    if exc.errno is None:
        return OSError(exc.strerror or str(exc), os.fspath(path))
    return OSError(exc.errno, exc.strerror or os.strerror(exc.errno), os.fspath(path))


class OutputFile(io.BufferedWriter):
    """A buffered binary file being written, whose write errors name ``path``."""

    def __init__(self, raw: io.RawIOBase, path: str | os.PathLike[str], buffer_size: int) -> None:
        super().__init__(raw, buffer_size)
        self.path = os.fspath(path)

    def write(self, data: Any) -> int:
        try:
            return super().write(data)
        except OSError as exc:
            raise named_write_error(exc, self.path) from exc

    def flush(self) -> None:
        try:
            super().flush()
        except OSError as exc:
            raise named_write_error(exc, self.path) from exc

    def truncate(self, size: int | None = None) -> int:
        try:
            return super().truncate(size)
        except OSError as exc:
            raise named_write_error(exc, self.path) from exc

    def close(self) -> None:
        try:
            super().close()
        except OSError as exc:
            raise named_write_error(exc, self.path) from exc


def output_file(
    fd: int, path: str | os.PathLike[str], *, buffer_size: int = io.DEFAULT_BUFFER_SIZE
) -> OutputFile:
    """The open descriptor ``fd`` of the output ``path`` as an :class:`OutputFile` (which
    closes ``fd``)."""
    return OutputFile(io.FileIO(fd, "wb", closefd=True), path, buffer_size)
