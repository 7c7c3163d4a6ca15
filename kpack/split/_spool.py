"""Spools: where the kernels of a split wait for their archives.

Each fat binary's in-scope code objects are appended to a per-job spool file once (wrappers
that share a bundle share its range): as they are, or, for zstd archives, as their archive
frame, compressed while the transform's check decodes them (compressed bundles) or on the
job's threads (plain ones). The device code is never written out whole (1.2 GB of it
compresses to 33 MB in jax-rocm7-pjrt). In-process, kernels of plain bundles may stay
zero-copy views of the mapped input; the pages such views touch are dropped as they go.
"""

from __future__ import annotations

import logging
import mmap
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import field
from pathlib import Path

from kpack.archive import (
    FrameWriter,
    compressed,
    compressor,
)
from kpack.bundle import BundleSink, CodeObjectRef
from kpack.common import cancel
from kpack.common.frozen import frozen
from kpack.common.outfile import output_file
from kpack.common.workers import thread_min_bytes
from kpack.databases import base_arch
from kpack.errors import BundleError
from kpack.split._frames import FrameWorkers
from kpack.transform import (
    ExtractedKernel,
    stream_kernels,
)

__all__ = [
    "Location",
    "PageDropper",
    "Spool",
    "SpooledKernel",
    "mapped",
    "spool_into",
    "spool_kernels",
]

log = logging.getLogger(__name__)


@frozen(kw_only=True)
class SpooledKernel:
    """Where one kernel's bytes wait for the archive writer: a spool range (the code object,
    or its zstd frame at ``level``), or (in-process only) a zero-copy view of the mapped
    input."""

    index: int  # wrapper index = co_index
    target: str
    triple: str
    spool: Path
    offset: int
    size: int  # bytes in the spool (or the view)
    original_size: int  # the code object's size
    level: int | None = None  # the range is a zstd frame compressed at this level
    view: memoryview | None = field(default=None, compare=False, repr=False)


Location = tuple[int, int, str]  # ExtractedKernel.location: bundle offset, offset, target


_Write = Callable[[bytes | memoryview], object]


class Spool:
    """A spool file being written: each code object once (as itself, or as its zstd frame
    at ``level``), its range recorded by location once complete."""

    def __init__(self, path: Path, level: int | None = None, threads: int = 1) -> None:
        self.path = path
        self.level = level
        self._ranges: dict[Location, tuple[int, int]] = {}
        self._started: set[Location] = set()
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0)
        self._out = output_file(os.open(path, flags, 0o644), path)  # closed by __exit__
        self._threads = threads if level is not None else 1
        self._workers: FrameWorkers | None = None  # started by the first frame written
        self._cctx = compressor(level) if level is not None and threads <= 1 else None

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        try:
            if self._workers is not None:
                self._workers.close(unwinding=exc_type is not None)
        finally:
            self._out.close()

    @property
    def ranges(self) -> dict[Location, tuple[int, int]]:
        """Each complete code object's range in the spool (waits for frames in flight)."""
        if self._workers is not None:
            self._workers.join()
        return self._ranges

    def writer(self, location: Location, size: int) -> _Write | None:
        """Where the ``size`` bytes at ``location`` go, appended; ``None`` if they are
        spooled already."""
        if location in self._started:
            return None
        self._started.add(location)
        if self.level is not None and self._threads > 1:
            if self._workers is None:
                self._workers = FrameWorkers(self._out, self.level, self._threads, self._ranges)
            return self._workers.writer(location, size)
        out, start = self._out, self._out.tell()
        if self._cctx is None:
            written = 0

            def write(data: bytes | memoryview) -> None:
                nonlocal written
                cancel.check()
                out.write(data)
                written += memoryview(data).nbytes
                if written == size:
                    self._ranges[location] = (start, size)

            if size == 0:
                self._ranges[location] = (start, 0)
            return write
        frame = FrameWriter(self._cctx, out, size)

        def compress(data: bytes | memoryview) -> None:
            cancel.check()
            frame.write(data)
            if frame.done:
                self._ranges[location] = (start, out.tell() - start)

        if frame.done:  # an empty code object: its frame is written already
            self._ranges[location] = (start, out.tell() - start)
        return compress

    def write_frames(self, kernels: Sequence[ExtractedKernel], threads: int) -> None:
        """Append the frames of in-memory code objects not spooled yet, compressed on
        ``threads`` threads and written in order."""
        todo: dict[Location, ExtractedKernel] = {}
        for kernel in kernels:
            if kernel.location not in self._started and kernel.data is not None:
                todo.setdefault(kernel.location, kernel)
        if not todo or self.level is None:
            return
        if self._workers is not None:
            self._workers.join()  # the spool file is appended to by one writer at a time
        dropper = PageDropper()
        payloads = [k.data for k in todo.values() if k.data is not None]
        if sum(k.size for k in todo.values()) < thread_min_bytes():
            threads = 1  # too little to compress for threads to pay
        for (location, kernel), frame in zip(
            todo.items(), compressed(payloads, self.level, threads), strict=True
        ):
            self._started.add(location)
            start = self._out.tell()
            self._out.write(frame)
            self._ranges[location] = (start, memoryview(frame).nbytes)
            dropper.add(kernel.data, kernel.size)
        dropper.drop()

    def decoded_sink(self, scope: frozenset[str] | None) -> BundleSink:
        """A sink for the transform's decode: the in-scope code objects of compressed
        bundles are spooled as they are checked."""

        def sink(bundle: int, ref: CodeObjectRef) -> _Write | None:
            if scope is not None and base_arch(ref.target) not in scope:
                return None
            return self.writer((bundle, ref.offset, ref.target), ref.size)

        return sink

    def spooled(self, kernel: ExtractedKernel) -> SpooledKernel:
        """Where ``kernel`` was spooled; a code object not spooled in full is an error."""
        found = self.ranges.get(kernel.location)
        if found is None:
            raise BundleError(
                f"wrapper {kernel.index}'s code object for {kernel.target} was not spooled in full",
                path=self.path,
            )
        offset, size = found
        return SpooledKernel(
            index=kernel.index,
            target=kernel.target,
            triple=kernel.triple,
            spool=self.path,
            offset=offset,
            size=size,
            original_size=kernel.size,
            level=self.level,
        )


def _mapped_view(data: bytes | memoryview | None) -> memoryview | None:
    return data if isinstance(data, memoryview) and isinstance(data.obj, mmap.mmap) else None


def spool_kernels(
    kernels: Sequence[ExtractedKernel],
    spool: Path,
    *,
    keep_views: bool,
    level: int | None = None,
    threads: int = 1,
) -> tuple[SpooledKernel, ...]:
    """Write ``kernels`` to the file ``spool`` (created), each code object once (as its
    zstd frame at ``level`` if given, compressed on ``threads`` threads); without frames
    and with ``keep_views``, kernels of plain bundles stay zero-copy views of the mapped
    input."""
    with Spool(spool, level, threads) as out:
        return spool_into(kernels, out, keep_views, threads)


def spool_into(
    kernels: Sequence[ExtractedKernel], spool: Spool, keep_views: bool, threads: int = 1
) -> tuple[SpooledKernel, ...]:
    """Append the ``kernels`` not in ``spool`` yet (compressed bundles decoded as a
    stream); without frames and with ``keep_views``, kernels of plain bundles stay
    zero-copy views."""
    wanted = list(kernels)
    views: dict[Location, memoryview] = {}
    if spool.level is not None:
        spool.write_frames([k for k in wanted if k.data is not None], threads)
    for kernel in wanted:
        view = _mapped_view(kernel.data) if keep_views and spool.level is None else None
        if view is not None:
            views[kernel.location] = view
    dropper = PageDropper()

    def sink(kernel: ExtractedKernel) -> _Write | None:
        write = spool.writer(kernel.location, kernel.size)
        if write is None:
            return None
        source = kernel.section if kernel.data is None else kernel.data

        def tracked(data: bytes | memoryview) -> None:
            write(data)
            dropper.add(source, len(data))

        return tracked

    rest = [k for k in wanted if k.location not in views and k.location not in spool.ranges]
    stream_kernels(rest, sink)  # only what the transform's decode did not spool already
    dropper.drop()
    spooled: list[SpooledKernel] = []
    for kernel in wanted:
        view = views.get(kernel.location)
        if view is not None:
            size = view.nbytes
            spooled.append(
                SpooledKernel(
                    index=kernel.index,
                    target=kernel.target,
                    triple=kernel.triple,
                    spool=spool.path,
                    offset=0,
                    size=size,
                    original_size=size,
                    view=view,
                )
            )
        else:
            spooled.append(spool.spooled(kernel))
    return tuple(spooled)


class PageDropper:
    """Let go of mapped input pages that spooled views touched, every ``every`` bytes.

    The transform hands out zero-copy views of a read-only ``mmap`` of the input; without
    this, every page of a 1.3 GB library would count in the worker's RSS until the map
    goes away. The pages stay in the page cache, and the input is not read again through
    this map. ``madvise`` covers the whole map, so it is batched.
    """

    def __init__(self, every: int = 64 << 20) -> None:
        self.every = every
        self.pending: dict[int, mmap.mmap] = {}
        self.touched = 0

    def add(self, data: bytes | memoryview | None, size: int) -> None:
        view = _mapped_view(data)
        owner = view.obj if view is not None else None
        if isinstance(owner, mmap.mmap):
            self.pending[id(owner)] = owner
            self.touched += size
        if self.touched >= self.every:
            self.drop()

    def drop(self) -> None:
        for owner in self.pending.values():
            with suppress(OSError, ValueError, AttributeError):
                owner.madvise(mmap.MADV_DONTNEED)
        self.pending.clear()
        self.touched = 0


@contextmanager
def mapped(paths: Sequence[Path]) -> Iterator[dict[Path, memoryview]]:
    """Read-only maps of the spool files (empty files get an empty view)."""
    maps: list[mmap.mmap] = []
    views: dict[Path, memoryview] = {}
    try:
        for path in paths:
            if os.path.getsize(path) == 0:
                views[path] = memoryview(b"")
                continue
            with open(path, "rb") as f:
                maps.append(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
            views[path] = memoryview(maps[-1])
        yield views
    finally:
        for view in views.values():
            with suppress(BufferError):
                view.release()
        for mm in maps:
            with suppress(BufferError):  # a view still alive (e.g. in a traceback): let GC unmap
                mm.close()
