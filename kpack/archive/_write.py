"""Stream a ``.kpack`` archive to disk (kpack.md §1): header, blob area, TOC, back-patch.

Private to :mod:`kpack.archive`, which validates the input and builds the TOC. Kernels are
compressed on a small thread pool (zstandard releases the GIL) with at most ``2 * jobs``
frames in flight, and written in ordinal order, so the output does not depend on ``jobs``.

Every frame is made the same way, by zstd's streaming compressor with the size pledged
(:class:`FrameWriter`): a kernel compressed whole here and one compressed piece by piece
while it is decoded (the splitter's spool) get the same bytes, so a frame made early is
stored as it is. (zstd's one-shot compressor gives other bytes for the same input.)
"""

from __future__ import annotations

import contextlib
import io
import os
import struct
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import BinaryIO

import msgpack
import zstandard

from kpack.common import cancel
from kpack.common.frozen import frozen
from kpack.common.outfile import output_file
from kpack.common.threadpool import ThreadPool
from kpack.errors import ArchiveError

MAGIC = b"KPAK"
VERSION = 1
BLOB_ALIGNMENT = 64
MAX_KERNELS = 1_000_000  # the C reader's cap on num_kernels
MAX_ZSTD_BLOB = 4 << 30  # the C reader's cap on the zstd blob
#: The largest archive every reader loads: HRX (libhrx's kpack.c, a second independent
#: reader) reads the whole file into memory and refuses one over 2 GiB, so an archive stays
#: within a signed 32-bit size. A splitter puts a target's kernels in parts instead.
MAX_ARCHIVE_BYTES = (1 << 31) - 1
#: The zstd level of our frames unless a caller names one. rocm-kpack writes level 3 with
#: zstd's own parameters. Level 6 with the whole code object as its window (below) makes
#: device code 0.89x-0.93x as large on real wheels (jax-rocm7-pjrt's 1.21 GB: 29.0 MB instead
#: of 32.5 MB; jax-rocm10-pjrt's 2.45 GB: 100.9 MB instead of 108.4 MB) for at most 1.22x the
#: whole split's time; level 8 saves another 1-3 % but costs up to 1.39x on the largest
#: (benchmarks/bench_device_compression.py). Every reader decodes any level.
DEFAULT_LEVEL = 6
#: Every frame's window: 128 MiB, the largest a default zstd decoder accepts. zstd shrinks it
#: to the code object's size (it knows the size), so the frame is a single segment and a
#: decoder needs no more memory than the code object itself; at the levels' own windows
#: (4-8 MiB) matches further back than that in a 40 MB code object are lost.
FRAME_WINDOW_LOG = 27
_HEADER = struct.Struct("<4sIQ")
U32 = struct.Struct("<I")


@frozen
class ZstdFrame:
    """A code object already compressed as an archive stores it (by :class:`FrameWriter`
    at ``level``): ``size`` is the code object's size."""

    frame: bytes | memoryview
    size: int
    level: int


Payload = bytes | memoryview | ZstdFrame


def compressor(level: int) -> zstandard.ZstdCompressor:
    """The compressor of every frame: ``level``'s parameters with a 128 MiB window
    (:data:`FRAME_WINDOW_LOG`), content size in the header, no checksum."""
    params = zstandard.ZstdCompressionParameters.from_level(
        level, window_log=FRAME_WINDOW_LOG, write_content_size=True, write_checksum=False
    )
    return zstandard.ZstdCompressor(compression_params=params)


class FrameWriter:
    """Compress one code object of ``size`` bytes into ``out`` as it arrives in pieces; the
    frame is complete (and :attr:`done`) once ``size`` bytes were written."""

    def __init__(self, cctx: zstandard.ZstdCompressor, out: BinaryIO, size: int) -> None:
        self._writer = cctx.stream_writer(out, size=size, closefd=False)
        self._left = size
        self.done = False
        if size == 0:
            self._finish()

    def write(self, data: bytes | memoryview) -> None:
        size = memoryview(data).nbytes
        if size > self._left:
            raise ArchiveError(f"{size} bytes written with {self._left} left of the code object")
        self._writer.write(data)
        self._left -= size
        if self._left == 0:
            self._finish()

    def _finish(self) -> None:
        self._writer.flush(zstandard.FLUSH_FRAME)
        self.done = True


def compress_frame(cctx: zstandard.ZstdCompressor, data: bytes | memoryview) -> bytes:
    """The frame of ``data``, made as :class:`FrameWriter` makes it."""
    out = io.BytesIO()
    size = memoryview(data).nbytes
    writer = FrameWriter(cctx, out, size)
    if size:
        writer.write(data)
    return out.getvalue()


def stored_bound(size: int, scheme: str) -> int:
    """The most bytes a code object of ``size`` bytes takes in the blob area: itself in
    scheme ``none``, else zstd's compress bound (``ZSTD_COMPRESSBOUND``) of its frame, which
    holds at every level. A splitter sizes its archive parts with this before it compresses."""
    if scheme == "none":
        return size
    small = ((128 << 10) - size) >> 11 if size < (128 << 10) else 0
    return size + (size >> 8) + small


def payload_size(data: Payload) -> int:
    """The code object's size."""
    return data.size if isinstance(data, ZstdFrame) else memoryview(data).nbytes


def plain(data: Payload) -> bytes | memoryview:
    """The code object itself (a frame is decoded)."""
    if not isinstance(data, ZstdFrame):
        return data
    try:
        decoded: bytes = zstandard.ZstdDecompressor().decompress(
            data.frame, max_output_size=max(data.size, 1)
        )
    except zstandard.ZstdError as exc:
        raise ArchiveError(f"a precompressed kernel frame does not decode: {exc}") from None
    if len(decoded) != data.size:
        raise ArchiveError(
            f"a precompressed kernel frame holds {len(decoded)} bytes, not {data.size}"
        )
    return decoded


def compressed(payloads: Sequence[Payload], level: int, jobs: int) -> Iterator[bytes | memoryview]:
    """zstd frames (content size, no checksum, no dictionary) for ``payloads``, in order;
    a payload compressed already at ``level`` is its own frame."""
    local = threading.local()

    def compress(data: Payload) -> bytes | memoryview:
        cancel.check()
        if isinstance(data, ZstdFrame) and data.level == level:
            return data.frame
        cctx = getattr(local, "cctx", None)
        if cctx is None:
            cctx = local.cctx = compressor(level)
        return compress_frame(cctx, plain(data))

    if jobs <= 1:
        yield from map(compress, payloads)
        return
    pool = ThreadPool(max_workers=jobs, thread_name_prefix="kpack-zstd")
    pending: deque[Future[bytes | memoryview]] = deque()
    try:
        for data in payloads:
            pending.append(pool.submit(compress, data))
            if len(pending) >= 2 * jobs:
                yield cancel.result(pending.popleft())
        while pending:
            yield cancel.result(pending.popleft())
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def header(toc_offset: int) -> bytes:
    """The archive header, zero-padded to the blob area."""
    return _HEADER.pack(MAGIC, VERSION, toc_offset).ljust(BLOB_ALIGNMENT, b"\0")


def too_large(size: int, max_size: int, path: Path) -> ArchiveError:
    return ArchiveError(
        f"the archive would exceed {max_size} bytes ({size} or more), more than every reader "
        "loads (HRX refuses archives over 2 GiB): put the kernels in more than one archive",
        path=path,
    )


def _write_zstd(
    out: BinaryIO,
    payloads: Sequence[Payload],
    *,
    level: int,
    jobs: int,
    max_blob: int,
    max_size: int,
    path: Path,
) -> dict[str, object]:
    out.write(U32.pack(len(payloads)))
    size = U32.size
    for frame in compressed(payloads, level, jobs):
        size += U32.size + memoryview(frame).nbytes
        if size > max_blob:
            raise ArchiveError(
                f"the zstd blob would exceed {max_blob} bytes, the C runtime's limit",
                path=path,
            )
        if BLOB_ALIGNMENT + size > max_size:
            raise too_large(BLOB_ALIGNMENT + size, max_size, path)
        out.write(U32.pack(memoryview(frame).nbytes))
        out.write(frame)
    return {"zstd_offset": BLOB_ALIGNMENT, "zstd_size": size}


def _write_none(out: BinaryIO, payloads: Sequence[Payload]) -> dict[str, object]:
    blobs = []
    offset = BLOB_ALIGNMENT
    for payload in payloads:
        data = plain(payload)
        size = memoryview(data).nbytes
        out.write(data)
        blobs.append({"offset": offset, "size": size})
        offset += size
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
    max_size: int,
    path: Path,
) -> int:
    out.write(header(0))
    if scheme == "none":
        location = _write_none(out, payloads)
    else:
        location = _write_zstd(
            out, payloads, level=level, jobs=jobs, max_blob=max_blob, max_size=max_size, path=path
        )
    toc_offset = out.tell()
    out.write(msgpack.packb({**toc, **location}, use_bin_type=True))
    size = out.tell()
    if size > max_size:
        raise too_large(size, max_size, path)
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
    max_size: int,
) -> int:
    """Write the archive to a temporary file next to ``path``, then rename; return its size."""

    def body(out: BinaryIO) -> int:
        return _write_body(
            out,
            payloads,
            toc,
            scheme=scheme,
            level=level,
            jobs=jobs,
            max_blob=max_blob,
            max_size=max_size,
            path=path,
        )

    return _atomic(path, body)


def write_chunks(path: Path, chunks: Iterable[bytes | memoryview]) -> int:
    """Write an archive streamed as ``chunks`` like :func:`write_file`; return its size."""

    def body(out: BinaryIO) -> int:
        for chunk in chunks:
            out.write(chunk)
        return out.tell()

    return _atomic(path, body)


def _atomic(path: Path, body: Callable[[BinaryIO], int]) -> int:
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise ArchiveError(f"cannot create a temporary file: {exc}", path=path) from exc
    try:
        with output_file(fd, path) as out:
            size = body(out)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise ArchiveError(f"cannot write archive: {exc.strerror or exc}", path=path) from exc
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return size
