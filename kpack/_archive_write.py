"""Stream a ``.kpack`` archive to disk (kpack.md §1): header, blob area, TOC, back-patch.

Private to :mod:`kpack.archive`, which validates the input and builds the TOC. Kernels are
compressed on a small thread pool (zstandard releases the GIL) with at most ``2 * jobs``
frames in flight, and written in ordinal order, so the output does not depend on ``jobs``.
"""

from __future__ import annotations

import contextlib
import os
import struct
import tempfile
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO

import msgpack
import zstandard

from kpack.errors import ArchiveError

MAGIC = b"KPAK"
VERSION = 1
BLOB_ALIGNMENT = 64
_HEADER = struct.Struct("<4sIQ")
_U32 = struct.Struct("<I")

Payload = bytes | memoryview


def _compressed(payloads: Sequence[Payload], level: int, jobs: int) -> Iterator[bytes]:
    """zstd frames (content size, no checksum, no dictionary) for ``payloads``, in order."""
    local = threading.local()

    def compress(data: Payload) -> bytes:
        cctx = getattr(local, "cctx", None)
        if cctx is None:
            cctx = local.cctx = zstandard.ZstdCompressor(
                level=level, write_content_size=True, write_checksum=False
            )
        frame: bytes = cctx.compress(data)
        return frame

    if jobs <= 1:
        yield from map(compress, payloads)
        return
    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="kpack-zstd")
    pending: deque[Future[bytes]] = deque()
    try:
        for data in payloads:
            pending.append(pool.submit(compress, data))
            if len(pending) >= 2 * jobs:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _write_zstd(
    out: BinaryIO, payloads: Sequence[Payload], level: int, jobs: int, max_blob: int, path: Path
) -> dict[str, object]:
    out.write(_U32.pack(len(payloads)))
    size = _U32.size
    for frame in _compressed(payloads, level, jobs):
        size += _U32.size + len(frame)
        if size > max_blob:
            raise ArchiveError(
                f"the zstd blob would exceed {max_blob} bytes, the C runtime's limit",
                path=path,
            )
        out.write(_U32.pack(len(frame)))
        out.write(frame)
    return {"zstd_offset": BLOB_ALIGNMENT, "zstd_size": size}


def _write_none(out: BinaryIO, payloads: Sequence[Payload]) -> dict[str, object]:
    blobs = []
    offset = BLOB_ALIGNMENT
    for data in payloads:
        out.write(data)
        blobs.append({"offset": offset, "size": len(data)})
        offset += len(data)
    return {"blobs": blobs}


def _write_body(
    out: BinaryIO,
    payloads: Sequence[Payload],
    toc: dict[str, object],
    *,
    scheme: str,
    level: int,
    jobs: int,
    max_blob: int,
    path: Path,
) -> int:
    out.write(_HEADER.pack(MAGIC, VERSION, 0).ljust(BLOB_ALIGNMENT, b"\0"))
    if scheme == "none":
        location = _write_none(out, payloads)
    else:
        location = _write_zstd(out, payloads, level, jobs, max_blob, path)
    toc_offset = out.tell()
    out.write(msgpack.packb({**toc, **location}, use_bin_type=True))
    size = out.tell()
    out.seek(0)
    out.write(_HEADER.pack(MAGIC, VERSION, toc_offset))
    return size


def write_file(
    path: Path,
    payloads: Sequence[Payload],
    toc: dict[str, object],
    *,
    scheme: str,
    level: int,
    jobs: int,
    max_blob: int,
) -> int:
    """Write the archive to a temporary file next to ``path``, then rename; return its size."""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise ArchiveError(f"cannot create a temporary file: {exc}", path=path) from exc
    try:
        with os.fdopen(fd, "wb") as out:
            size = _write_body(
                out,
                payloads,
                toc,
                scheme=scheme,
                level=level,
                jobs=jobs,
                max_blob=max_blob,
                path=path,
            )
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise ArchiveError(f"cannot write archive: {exc}", path=path) from exc
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return size
