"""Parallel, deterministic deflate of archive members, written to a ZIP in order.

Two engines, chosen by measurement (README, "Performance"):

- a member of at most :data:`WHOLE_MAX` bytes is compressed whole by libdeflate (PyPI
  ``deflate``): about 3x faster than the standard ``zlib`` at level 6 and a little smaller;
  members are compressed in parallel, one per task;
- a larger member is streamed in fixed-size chunks (:data:`CHUNK_SIZE`) compressed in
  parallel, pigz-style, by libdeflate too: each chunk is compressed on its own and every
  chunk but the last is left open and byte-aligned (:mod:`kpack.wheelfile._join`), so
  that concatenated they form one valid deflate stream. On the 495 MB host library of
  jax-rocm7-pjrt that is 0.43x the CPU time of the standard ``zlib`` at level 6 and 0.994x
  its size (``benchmarks/bench_deflate_engines.py``). Where no shared zlib is at hand to
  join the chunks (CPython on Windows), the standard library's ``zlib`` streams them
  instead: chunk *i* > 0 primed with the last 32 KiB of chunk *i-1* and ended with
  ``Z_SYNC_FLUSH``, the last with ``Z_FINISH``.
  zlib-ng streams too, but its output is larger (level 6: +2.8 % on that library, +6.2 %
  on Debian's librocsparse) or slower (level 9: 1.12x the time of zlib).

A member marked ``shared`` (its content repeats across the archives of a run) is always
streamed in chunks, and each chunk is looked up in the run's
:class:`~kpack.wheelfile._memo.DeflateMemo` before it is compressed; the bytes are the same
with or without a memo.

A member that carries a :class:`~kpack.wheelfile._reuse.Reuse` (a split wheel's copy of an
input member) is written by copying the input's deflate blocks where that pays
(:mod:`kpack.wheelfile._reuse`), after every member queued before it.

Every input byte is read once. The calling thread reads each member, updates its sha256
and CRC-32 and hands the work to a thread pool (both libraries and hashlib release the
GIL), started once the wheel's deflate work passes
:data:`~kpack.common.workers.THREAD_MIN_BYTES`: the first batches, and a small wheel's
all, are deflated by the calling thread. Small members are batched into one task to save
overhead. The output depends on libdeflate's version (pinned in ``pyproject.toml``), and in
the fallback on zlib's.

Chunk boundaries depend only on the content, so the archive is byte-identical whatever
the number of workers or the thread timing. At most a fixed window of input is in flight;
results are written strictly in order, so memory stays bounded for members of any size.
A member that fits in one chunk is written with its final header at once (and stored if
deflate does not shrink it); a longer one is streamed and its header patched afterwards.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from types import TracebackType
from typing import Protocol

from kpack.common import cancel
from kpack.common.threadpool import ThreadPool
from kpack.common.workers import done_future, thread_min_bytes
from kpack.errors import PackagingError
from kpack.wheelfile._engine import Task, crc32, deflate_batch
from kpack.wheelfile._member import Member, looks_compressed, open_source
from kpack.wheelfile._memo import DeflateMemo
from kpack.wheelfile._reuse import plan_reuse, write_reused
from kpack.wheelfile._zip import DEFLATED, STORED, ZipEntry, ZipWriter, needs_zip64_header

__all__ = [
    "CHUNK_SIZE",
    "WHOLE_MAX",
    "ByteProgress",
    "MemberStreamer",
    "WrittenMember",
    "default_jobs",
]

log = logging.getLogger(__name__)

CHUNK_SIZE = 4 << 20
#: Members up to this size are compressed whole by libdeflate (held in memory meanwhile).
WHOLE_MAX = 64 << 20
_DICT_SIZE = 32 << 10
_BATCH_BYTES = 1 << 20
_BATCH_COUNT = 64
_MAX_PENDING_MEMBERS = 4096
_MAX_WINDOW_CHUNKS = 24  # bounds memory (about 2 x 96 MiB) however many workers there are


class ByteProgress(Protocol):
    """Told about every member as it starts and every chunk as it is read."""

    def file_started(self, name: str, size: int) -> None: ...
    def advance(self, nbytes: int) -> None: ...


def default_jobs() -> int:
    """The number of CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class WrittenMember:
    """What RECORD needs about a written entry."""

    arcname: str
    sha256: bytes
    size: int
    compressed_size: int
    method: int


class _Batch:
    __slots__ = ("future", "nbytes", "tasks")

    def __init__(self) -> None:
        self.tasks: list[Task] = []
        self.nbytes = 0
        self.future: Future[list[bytes]] | None = None


@dataclass
class _Part:
    """One chunk in flight: stored bytes, or a slot in a compression batch."""

    nbytes: int
    data: bytes | bytearray | None = None
    batch: _Batch | None = None
    index: int = 0


@dataclass
class _Job:
    member: Member
    method: int
    zip64_header: bool
    whole: bool
    raw: bytes | bytearray = b""  # a whole deflated member's content (stored if deflate loses)
    sha: hashlib._Hash = field(default_factory=hashlib.sha256)
    crc: int = 0
    size: int = 0
    compressed_size: int = 0
    parts: deque[_Part] = field(default_factory=deque)
    read_done: bool = False
    entry: ZipEntry | None = None


class MemberStreamer:
    """Write members to a :class:`ZipWriter` in the order added; use as a context manager."""

    def __init__(
        self,
        writer: ZipWriter,
        *,
        jobs: int,
        level: int,
        compression: bool,
        progress: ByteProgress | None = None,
        memo: DeflateMemo | None = None,
    ) -> None:
        if jobs < 1:
            raise PackagingError(f"jobs must be at least 1, not {jobs}")
        if not 0 <= level <= 9:
            raise PackagingError(f"compression level must be 0..9, not {level}")
        self._writer = writer
        self._level = level
        self._compression = compression
        self._jobs = jobs
        self._pool: ThreadPool | None = None  # started once the work pays for it
        self._inline_left = thread_min_bytes()  # bytes deflated here before it starts
        self._window = min(max(4, 2 * jobs + 2), _MAX_WINDOW_CHUNKS) * CHUNK_SIZE
        self._queue: deque[_Job] = deque()
        self._inflight = 0
        self._batch = _Batch()
        self._written: list[WrittenMember] = []
        self._progress = progress
        self._memo = memo

    def __enter__(self) -> MemberStreamer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=exc_type is not None)

    def add(self, member: Member) -> None:
        """Read ``member`` once, queue its chunks and write whatever the window forces out."""
        reusable = self._compression and member.compress is not False
        if member.reuse is not None and reusable and self._add_reused(member):
            return
        with open_source(member, CHUNK_SIZE) as stream:
            job: _Job | None = None
            prev: bytes | None = None
            held: list[bytes] = []  # the chunks of a member that may still be compressed whole
            progress = self._progress
            if progress is not None and stream.size is not None:
                progress.file_started(member.arcname, stream.size)
            for data, last in stream.chunks:
                cancel.check()
                if progress is not None:
                    progress.advance(len(data))
                if job is None:
                    known = (
                        stream.size if stream.size is not None else (len(data) if last else None)
                    )
                    method = self._choose_method(member, data, last)
                    whole = method == DEFLATED and not member.shared
                    whole = whole and (known is None or known <= WHOLE_MAX)
                    job = _Job(member, method, zip64_header=needs_zip64_header(known), whole=whole)
                    self._queue.append(job)
                if job.whole:
                    held.append(data)  # joined once at the end: no copy per chunk
                    if last:
                        self._read_whole(job, held[0] if len(held) == 1 else b"".join(held))
                        held = []
                    elif len(held) * CHUNK_SIZE > WHOLE_MAX:  # the size was not known: stream it
                        job.whole = False
                        for i, piece in enumerate(held):  # every chunk but the last is full
                            self._read_chunk(job, piece, held[i - 1] if i else None, False)
                        prev, held = held[-1], []
                    continue
                self._read_chunk(job, data, prev, last)
                prev = data
                while self._inflight > self._window or len(self._queue) > _MAX_PENDING_MEMBERS:
                    self._drain_one()
            while self._inflight > self._window or len(self._queue) > _MAX_PENDING_MEMBERS:
                self._drain_one()

    def _add_reused(self, member: Member) -> bool:
        """Write ``member`` copying its input's deflate blocks, if that pays (after every
        member queued before it); ``False`` if it does not and nothing was written."""
        assert member.reuse is not None
        with open_source(member, CHUNK_SIZE) as stream:
            size = stream.size
            plan = None if size is None or not self._level else plan_reuse(member.reuse, size)
            if plan is None or size is None:
                return False
            while self._queue:
                self._drain_one()
            if self._progress is not None:
                self._progress.file_started(member.arcname, size)
            chunks = (data for data, _ in stream.chunks)
            advance = None if self._progress is None else self._progress.advance
            result = write_reused(
                self._writer,
                member.arcname,
                executable=member.executable,
                reuse=member.reuse,
                plan=plan,
                content=chunks,
                size=size,
                level=self._level,
                advance=advance,
            )
        written = (result.sha256, result.size, result.compressed_size, DEFLATED)
        self._written.append(WrittenMember(member.arcname, *written))
        return True

    def finish(self) -> list[WrittenMember]:
        """Write everything queued; return every member written so far, in order."""
        while self._queue:
            self._drain_one()
        return list(self._written)

    def _choose_method(self, member: Member, head: bytes, last: bool) -> int:
        if member.compress is not None:
            return DEFLATED if member.compress else STORED
        if not self._compression or (last and not head) or looks_compressed(head):
            return STORED
        return DEFLATED

    def _read_whole(self, job: _Job, data: bytes) -> None:
        """Queue a whole member for libdeflate (kept to be stored if deflate loses)."""
        job.raw = data
        self._read(job, data, None, True, whole=True)

    def _read_chunk(self, job: _Job, data: bytes, prev: bytes | None, last: bool) -> None:
        self._read(job, data, prev, last, whole=False)

    def _read(
        self, job: _Job, data: bytes | bytearray, prev: bytes | None, last: bool, *, whole: bool
    ) -> None:
        job.sha.update(data)
        job.crc = crc32(data, job.crc)
        job.size += len(data)
        job.read_done = last
        if job.method == STORED:
            job.parts.append(_Part(len(data), data=data))
        else:
            zdict = prev[-_DICT_SIZE:] if prev is not None else None
            batch = self._batch
            batch.tasks.append((data, zdict, last, whole, job.member.shared))
            batch.nbytes += len(data)
            job.parts.append(_Part(len(data), batch=batch, index=len(batch.tasks) - 1))
            if batch.nbytes >= _BATCH_BYTES or len(batch.tasks) >= _BATCH_COUNT:
                self._submit()
        self._inflight += len(data)

    def _submit(self) -> None:
        batch = self._batch
        if not batch.tasks:
            return
        if self._pool is None and batch.nbytes <= self._inline_left:
            self._inline_left -= batch.nbytes  # too little work yet for threads to pay
            batch.future = done_future(deflate_batch, batch.tasks, self._level, self._memo)
        else:
            if self._pool is None:
                self._pool = ThreadPool(self._jobs, thread_name_prefix="deflate")
            batch.future = self._pool.submit(deflate_batch, batch.tasks, self._level, self._memo)
        self._batch = _Batch()

    def _result(self, part: _Part) -> bytes | bytearray:
        if part.data is not None:
            return part.data
        batch = part.batch
        if batch is None:  # pragma: no cover - a part is always data or a batch slot
            raise PackagingError("internal error: chunk without data")
        if batch.future is None:
            self._submit()
        future = batch.future
        if future is None:  # pragma: no cover
            raise PackagingError("internal error: batch was not submitted")
        return cancel.result(future)[part.index]

    def _drain_one(self) -> None:
        cancel.check()
        job = self._queue[0]
        if job.entry is None and job.read_done:
            self._write_whole(job)
            return
        if job.entry is None:
            job.entry = self._writer.begin(
                job.member.arcname,
                method=job.method,
                executable=job.member.executable,
                zip64_header=job.zip64_header,
            )
        part = job.parts.popleft()
        data = self._result(part)
        self._writer.write(data)
        job.compressed_size += len(data)
        self._inflight -= part.nbytes
        if job.read_done and not job.parts:
            self._writer.end(
                job.entry, crc=job.crc, compressed_size=job.compressed_size, file_size=job.size
            )
            self._done(job, job.method)

    def _write_whole(self, job: _Job) -> None:
        """Write a fully read member whose header can carry its final values at once."""
        chunks: list[bytes | bytearray] = [self._result(part) for part in job.parts]
        method = job.method
        deflate_lost = job.whole and len(chunks[0]) >= job.size
        if deflate_lost and method == DEFLATED and job.member.compress is None:
            method, chunks = STORED, [job.raw]
        job.compressed_size = sum(len(c) for c in chunks)
        entry = self._writer.begin(
            job.member.arcname,
            method=method,
            executable=job.member.executable,
            zip64_header=job.zip64_header,
            crc=job.crc,
            compressed_size=job.compressed_size,
            file_size=job.size,
        )
        for chunk in chunks:
            self._writer.write(chunk)
        self._writer.end(
            entry, crc=job.crc, compressed_size=job.compressed_size, file_size=job.size
        )
        self._inflight -= sum(part.nbytes for part in job.parts)
        job.parts.clear()
        self._done(job, method)

    def _done(self, job: _Job, method: int) -> None:
        self._queue.popleft()
        self._written.append(
            WrittenMember(
                job.member.arcname, job.sha.digest(), job.size, job.compressed_size, method
            )
        )
        log.debug("wrote %s (%d -> %d bytes)", job.member.arcname, job.size, job.compressed_size)
