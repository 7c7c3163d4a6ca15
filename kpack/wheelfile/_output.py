"""Output conventions shared by the archive writers: fixed timestamps, atomic files.

Timestamps come from the caller, else ``SOURCE_DATE_EPOCH`` (read by
:func:`source_date_epoch`, the one reader of it), else 1980-01-01 (the earliest time a ZIP
entry can hold), and are clamped into the range both a ZIP entry and a gzip header hold.
Archives are written to a hidden temporary file next to the destination and renamed into
place; on any error the temporary file is removed.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO

from kpack.errors import PackagingError, UsageError

__all__ = ["DEFAULT_EPOCH", "MAX_EPOCH", "atomic_output", "resolve_epoch", "source_date_epoch"]

DEFAULT_EPOCH = 315532800  # 1980-01-01T00:00:00Z
#: The latest time every archive we write can hold: a gzip header's 32-bit MTIME (2106-02-07;
#: a ZIP entry could go to 2107-12-31).
MAX_EPOCH = 0xFFFFFFFF
_OUTPUT_BUFFER = 1 << 20


def source_date_epoch() -> int:
    """``SOURCE_DATE_EPOCH`` if set (clamped to the ZIP minimum, 1980), else 1980-01-01: the one
    reading of the variable for every archive the project writes.

    A value after 2106-02-07 is an error, not clamped: no gzip header can hold it, and it is
    surely a mistake (a time in milliseconds, say).
    """
    text = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if not text:
        return DEFAULT_EPOCH
    try:
        value = int(text)
    except ValueError as exc:
        raise UsageError(f"SOURCE_DATE_EPOCH={text[:30]!r} is not an integer") from exc
    if value > MAX_EPOCH:
        raise UsageError(
            f"SOURCE_DATE_EPOCH={text[:30]} is after 2106-02-07T06:28:15Z ({MAX_EPOCH}), the "
            "latest time a gzip header can hold (a time in milliseconds?)"
        )
    return max(value, DEFAULT_EPOCH)


def resolve_epoch(epoch: int | None) -> int:
    """The timestamp to stamp on every member: ``epoch``, else :func:`source_date_epoch`,
    clamped into the range a ZIP entry and a gzip header can both hold."""
    value = source_date_epoch() if epoch is None else int(epoch)
    return min(max(value, DEFAULT_EPOCH), MAX_EPOCH)


@contextmanager
def atomic_output(final: Path) -> Iterator[BinaryIO]:
    """Yield a buffered file that becomes ``final`` (mode 0644) only if the block succeeds."""
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        try:
            with os.fdopen(fd, "wb", buffering=_OUTPUT_BUFFER) as handle:
                yield handle
        except OSError as exc:
            if exc.filename is not None:
                raise
            # a failed write or flush (full disk, quota, file size limit) names no file
            raise PackagingError(f"cannot write: {exc.strerror or exc}", path=final) from exc
        tmp.chmod(0o644)
        os.replace(tmp, final)
    except BaseException:
        with suppress(FileNotFoundError):
            tmp.unlink()
        raise
