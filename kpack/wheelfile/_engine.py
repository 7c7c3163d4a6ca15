"""The deflate engines of the wheel writer, chosen by measurement (README, "Performance").

- :func:`deflate_whole`: a whole member by libdeflate (PyPI ``deflate``), about 3x faster
  than the standard ``zlib`` at level 6 and a little smaller;
- :func:`deflate_chunk`: one chunk of a streamed member, by libdeflate too, left open and
  byte-aligned unless it is the last (:mod:`kpack.wheelfile._join`), so that chunks made in
  parallel concatenate into one stream; where no shared zlib is at hand to join them
  (CPython on Windows) the standard library's ``zlib`` instead, primed with the previous
  chunk's last 32 KiB and ended with ``Z_SYNC_FLUSH``.

Both release the GIL, so the writer runs them on a thread pool, in batches. A chunk of a
member whose content repeats across the archives of a run (``Member.shared``) is looked up
in the run's :class:`~kpack.wheelfile._memo.DeflateMemo` first.

:func:`crc32` is libdeflate's where it is installed (several times as fast as ``zlib``'s,
the same value), else ``zlib``'s (a wheel written without compression needs no libdeflate).
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable

from kpack.common import cancel
from kpack.errors import PackagingError
from kpack.wheelfile._join import joiner
from kpack.wheelfile._libdeflate import libdeflate
from kpack.wheelfile._memo import DeflateMemo

__all__ = [
    "Task",
    "crc32",
    "deflate_batch",
    "deflate_chunk",
    "deflate_task",
    "deflate_whole",
]

#: data, zdict, final, whole member, shared (looked up in the memo)
Task = tuple[bytes | bytearray, bytes | None, bool, bool, bool]
Crc32 = Callable[[bytes | bytearray | memoryview, int], int]


@functools.cache
def _crc32() -> Crc32:
    try:
        return libdeflate().crc32
    except PackagingError:
        return zlib.crc32


def crc32(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """The CRC-32 of ``data`` continuing from ``value`` (as :func:`zlib.crc32`)."""
    return _crc32()(data, value)


def deflate_whole(data: bytes | bytearray, level: int) -> bytes:
    """Raw deflate of a whole member (libdeflate)."""
    if level == 0:  # libdeflate's level 0 is stored blocks, as zlib's
        return deflate_chunk(data, None, True, 0)
    return bytes(libdeflate().deflate_compress(data, level))


def deflate_chunk(data: bytes | bytearray, zdict: bytes | None, final: bool, level: int) -> bytes:
    """Raw deflate of one chunk of a streamed member, ended open and byte-aligned unless
    ``final``: libdeflate's, joined; else zlib's, primed with ``zdict`` (the previous
    chunk's tail)."""
    join = joiner() if level > 0 else None
    if join is not None:
        return join.compress(data, level, final=final)
    if zdict:
        comp = zlib.compressobj(level, zlib.DEFLATED, -15, zdict=zdict)
    else:
        comp = zlib.compressobj(level, zlib.DEFLATED, -15)
    head = comp.compress(data)
    tail = comp.flush(zlib.Z_FINISH if final else zlib.Z_SYNC_FLUSH)
    return head + tail if head else tail


def deflate_task(task: Task, level: int, memo: DeflateMemo | None = None) -> bytes:
    cancel.check()  # a cancelled build stops between chunks
    data, zdict, final, whole, shared = task
    if whole:
        return deflate_whole(data, level)
    if shared and memo is not None and level > 0 and joiner() is not None:
        # a joined chunk's bytes depend on its own bytes alone, not on the one before
        return memo.deflate(
            data, level=level, final=final, compress=lambda: deflate_chunk(data, None, final, level)
        )
    return deflate_chunk(data, zdict, final, level)


def deflate_batch(tasks: list[Task], level: int, memo: DeflateMemo | None = None) -> list[bytes]:
    return [deflate_task(task, level, memo) for task in tasks]
