"""The deflate engines of the wheel writer, chosen by measurement (README, "Performance").

- :func:`deflate_whole`: a whole member by libdeflate (PyPI ``deflate``), about 3x faster
  than the standard ``zlib`` at level 6 and a little smaller;
- :func:`deflate_chunk`: one chunk of a streamed member, by libdeflate too, left open and
  byte-aligned unless it is the last (:mod:`kpack.wheelfile._join`), so that chunks made in
  parallel concatenate into one stream; where no shared zlib is at hand to join them
  (CPython on Windows) the standard library's ``zlib`` instead, primed with the previous
  chunk's last 32 KiB and ended with ``Z_SYNC_FLUSH``.

Both release the GIL, so the writer runs them on a thread pool, in batches.
"""

from __future__ import annotations

import zlib

from kpack.common import cancel
from kpack.wheelfile._join import joiner
from kpack.wheelfile._libdeflate import libdeflate

__all__ = ["Task", "deflate_batch", "deflate_chunk", "deflate_task", "deflate_whole"]

Task = tuple[bytes | bytearray, bytes | None, bool, bool]  # data, zdict, final, whole member


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


def deflate_task(task: Task, level: int) -> bytes:
    cancel.check()  # a cancelled build stops between chunks
    data, zdict, final, whole = task
    return deflate_whole(data, level) if whole else deflate_chunk(data, zdict, final, level)


def deflate_batch(tasks: list[Task], level: int) -> list[bytes]:
    return [deflate_task(task, level) for task in tasks]
