"""Output conventions shared by the archive writers: fixed timestamps, atomic files.

Timestamps come from the caller, else ``SOURCE_DATE_EPOCH``, else 1980-01-01 (the
earliest time a ZIP entry can hold), and are clamped into the ZIP range so an sdist built
into a wheel keeps working. Archives are written to a hidden temporary file next to the
destination and renamed into place; on any error the temporary file is removed.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO

from kpack.errors import PackagingError

__all__ = ["DEFAULT_EPOCH", "atomic_output", "resolve_epoch"]

DEFAULT_EPOCH = 315532800  # 1980-01-01T00:00:00Z
_MAX_EPOCH = 4354819199  # 2107-12-31T23:59:59Z, the last DOS timestamp
_MAX_GZIP_EPOCH = 0xFFFFFFFF  # 2106-02-07T06:28:15Z, a gzip header's 32-bit MTIME
_OUTPUT_BUFFER = 1 << 20


def resolve_epoch(epoch: int | None) -> int:
    """The timestamp to stamp on every member, clamped to 1980..2107."""
    if epoch is None:
        raw = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
        if not raw:
            return DEFAULT_EPOCH
        try:
            epoch = int(raw)
        except ValueError as exc:
            raise PackagingError(f"SOURCE_DATE_EPOCH is not an integer: {raw!r}") from exc
        if epoch > _MAX_GZIP_EPOCH:
            raise PackagingError(
                f"SOURCE_DATE_EPOCH={raw[:30]} is after 2106-02-07T06:28:15Z, the latest time a "
                "gzip header can hold (a time in milliseconds?)"
            )
    return min(max(int(epoch), DEFAULT_EPOCH), _MAX_EPOCH)


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
