"""Per-binary work of the splitters and their archives (private to :mod:`kpack`).

One job per fat binary, run in a worker process: transform the *input* straight into the
generic output, then append the in-scope kernels the transform extracted to a per-job
spool file (so the parent never holds the device code of the whole artifact). When the
archives are zstd-compressed, each kernel is spooled as its archive frame: compressed
while it is decoded (compressed bundles) or on the job's threads (plain ones). The
device code is never written out whole (1.2 GB of it compresses to 33 MB in
jax-rocm7-pjrt).

Each target's archive is then laid out from its spooled kernels (:class:`SpooledArchive`)
and streamed from the memory-mapped spools, once, to where it belongs: its file
(``kpack split-artifacts``) or straight into the wheels that ship it (the wheel splitter,
the package builder). Resident memory stays at a chunk, not a target's device code.
Used by :mod:`kpack.split`, :mod:`kpack.wheelsplit` and the builder.
"""

from __future__ import annotations

import logging
import mmap
import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import BrokenExecutor, Executor, Future, ProcessPoolExecutor, as_completed
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from kpack.archive import (
    FrameWriter,
    KpackLayout,
    KpackSummary,
    Scheme,
    StoredKernel,
    compressed,
    compressor,
    lay_out_kpack,
    write_chunks,
)
from kpack.bundle import BundleSink, CodeObjectRef
from kpack.databases import base_arch
from kpack.elf import ElfEdit
from kpack.errors import ArchiveError, BundleError, TransformError
from kpack.split._output import copy_file, copy_meta
from kpack.transform import (
    AlreadyTransformed,
    ExtractedKernel,
    TransformPlan,
    plan_host_transform,
    stream_kernels,
    transform_binary,
)
from kpack.wheelfile import Generated

__all__ = [
    "ArchiveJob",
    "FatJob",
    "FatOutcome",
    "SpooledArchive",
    "SpooledKernel",
    "frame_level",
    "group_by_target",
    "host_size",
    "host_source",
    "lay_out_archive",
    "lay_out_archives",
    "remove_spools",
    "run_fat_job",
    "run_fat_jobs",
    "spool_kernels",
    "write_archives",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FatJob:
    """Transform ``source`` into ``dest``; spool its in-scope kernels to ``spool``."""

    stage: str
    relpath: str
    source: Path
    dest: Path | None  # None: not written; the outcome's content streams the result
    mode: int
    size: int
    kernel_name: str
    search_path: str
    spool: Path
    scope: frozenset[str] | None  # base arches whose kernels are kept; None = all
    level: int | None = None  # spool each kernel as a zstd frame at this level; None: as is


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class FatOutcome:
    job: FatJob
    kernels: tuple[SpooledKernel, ...]  # in scope, spooled
    skipped: int  # out-of-scope kernels (they still count for #N)
    removed_bytes: int
    notes: tuple[str, ...]
    passed_through: bool = False
    #: The host binary to ship when the job has no ``dest``: a verified edit streamed
    #: from the input, or the input itself (passed through).
    content: HostContent | None = None


if TYPE_CHECKING:
    from kpack.transform import PeTransformPlan  # PE support loads on use

HostContent: TypeAlias = "ElfEdit | PeTransformPlan | Path"


def host_size(content: HostContent) -> int:
    return content.stat().st_size if isinstance(content, Path) else content.size


def host_source(content: HostContent) -> Path | Generated:
    """``content`` as a member source for the wheel writer."""
    return content if isinstance(content, Path) else Generated(content.size, content.iter_chunks)


def run_fat_job(job: FatJob, keep_views: bool = False, threads: int = 1) -> FatOutcome:
    """Transform one fat binary and spool its in-scope kernels.

    The transform checks every bundle in full, decoding compressed ones as a stream; the
    in-scope code objects it decodes are spooled right then, so nothing is decoded twice.
    Plain bundles' code objects are zero-copy views of the mapped input. With frames
    (``job.level``) they are compressed afterwards, on ``threads`` threads, into the
    spool; without, a worker process spools them as they are and in-process
    (``keep_views``) they are kept as views, which saves writing and re-reading them.
    """
    log.info("splitting %s (%d bytes)", job.kernel_name, job.size)
    content: HostContent | None = None
    with _Spool(job.spool, job.level) as spool:
        sink = spool.decoded_sink(job.scope)
        try:
            if job.dest is None:  # planned and verified, streamed later: never written here
                plan = plan_host_transform(
                    job.source, kernel_name=job.kernel_name, search_paths=[job.search_path],
                    decoded=sink,
                )  # fmt: skip
                content = (
                    plan.edit if isinstance(plan, TransformPlan) else replace(plan, kernels=())
                )
            else:
                plan = transform_binary(
                    job.source, job.dest, kernel_name=job.kernel_name,
                    search_paths=[job.search_path], decoded=sink,
                )  # fmt: skip
                copy_meta(job.source, job.dest, job.mode)
        except AlreadyTransformed as exc:
            if job.dest is not None:
                copy_file(job.source, job.dest, job.mode)
            note = (
                f"{job.kernel_name}: already transformed, passed through unchanged ({exc.message})"
            )
            return FatOutcome(job, (), 0, 0, (note,), passed_through=True, content=job.source)
        kernels, skipped = _spool_kernels(job, plan.kernels, keep_views, spool, threads)
    notes = tuple(f"{job.kernel_name}: {n}" for n in plan.notes)
    return FatOutcome(job, kernels, skipped, plan.removed_bytes, notes, content=content)


def frame_level(scheme: Scheme, level: int) -> int | None:
    """The level to spool kernels at for archives of ``scheme`` (``None``: uncompressed)."""
    return level if scheme == "zstd-per-kernel" else None


Location = tuple[int, int, str]  # ExtractedKernel.location: bundle offset, offset, target
_Write = Callable[[bytes | memoryview], object]


class _Spool:
    """A spool file being written: each code object once (as itself, or as its zstd frame
    at ``level``), its range recorded by location once complete."""

    def __init__(self, path: Path, level: int | None = None) -> None:
        self.path = path
        self.level = level
        self.ranges: dict[Location, tuple[int, int]] = {}
        self._started: set[Location] = set()
        self._cctx = compressor(level) if level is not None else None
        self._out = open(path, "wb")  # noqa: SIM115 - closed by __exit__

    def __enter__(self) -> _Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self._out.close()

    def writer(self, location: Location, size: int) -> _Write | None:
        """Where the ``size`` bytes at ``location`` go, appended; ``None`` if they are
        spooled already."""
        if location in self._started:
            return None
        self._started.add(location)
        out, start = self._out, self._out.tell()
        if self._cctx is None:
            written = 0

            def write(data: bytes | memoryview) -> None:
                nonlocal written
                out.write(data)
                written += memoryview(data).nbytes
                if written == size:
                    self.ranges[location] = (start, size)

            if size == 0:
                self.ranges[location] = (start, 0)
            return write
        frame = FrameWriter(self._cctx, out, size)

        def compress(data: bytes | memoryview) -> None:
            frame.write(data)
            if frame.done:
                self.ranges[location] = (start, out.tell() - start)

        if frame.done:  # an empty code object: its frame is written already
            self.ranges[location] = (start, out.tell() - start)
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
        dropper = _PageDropper()
        payloads = [k.data for k in todo.values() if k.data is not None]
        for (location, kernel), frame in zip(
            todo.items(), compressed(payloads, self.level, threads), strict=True
        ):
            self._started.add(location)
            start = self._out.tell()
            self._out.write(frame)
            self.ranges[location] = (start, memoryview(frame).nbytes)
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
            kernel.index, kernel.target, kernel.triple, self.path, offset, size, kernel.size,
            self.level,
        )  # fmt: skip


def _mapped_view(data: bytes | memoryview | None) -> memoryview | None:
    return data if isinstance(data, memoryview) and isinstance(data.obj, mmap.mmap) else None


def _spool_kernels(
    job: FatJob,
    kernels: Sequence[ExtractedKernel],
    keep_views: bool,
    spool: _Spool,
    threads: int,
) -> tuple[tuple[SpooledKernel, ...], int]:
    """Spool in-scope kernels not yet in ``spool``: each code object is written once
    (wrappers that share a bundle share its range)."""
    _check_unique(kernels, job.source)
    wanted: list[ExtractedKernel] = []
    skipped = 0
    for kernel in kernels:
        if job.scope is not None and base_arch(kernel.target) not in job.scope:
            skipped += 1
            continue
        wanted.append(kernel)
    return _spool_into(wanted, spool, keep_views, threads), skipped


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
    with _Spool(spool, level) as out:
        return _spool_into(kernels, out, keep_views, threads)


def _spool_into(
    kernels: Sequence[ExtractedKernel], spool: _Spool, keep_views: bool, threads: int = 1
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
    dropper = _PageDropper()

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
                    kernel.index, kernel.target, kernel.triple, spool.path, 0, size, size, view=view
                )
            )
        else:
            spooled.append(spool.spooled(kernel))
    return tuple(spooled)


class _PageDropper:
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


def _check_unique(kernels: Sequence[ExtractedKernel], source: Path) -> None:
    seen: set[tuple[int, str]] = set()
    for kernel in kernels:
        pair = (kernel.index, kernel.target)
        if pair in seen:
            raise BundleError(
                f"wrapper {pair[0]} holds two code objects for target {pair[1]!r}",
                path=source,
            )
        seen.add(pair)


@contextmanager
def _mapped(paths: Sequence[Path]) -> Iterator[dict[Path, memoryview]]:
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


@dataclass(frozen=True)
class SpooledArchive:
    """One target's archive, laid out from its spooled kernels and streamed from the spools
    on demand, as often as needed: into its file (``kpack split-artifacts``) or straight
    into the wheels that ship it (the wheel splitter, the package builder). Every kernel
    is stored as spooled: a zstd frame at the archive's level, or (scheme ``none``) the
    code object, from the spool or a view of the mapped input."""

    target: str
    path: Path  # where it is written, or what it is called inside a wheel
    layout: KpackLayout
    blobs: tuple[SpooledKernel, ...]  # per ordinal

    @property
    def size(self) -> int:
        return self.layout.size

    @property
    def kernel_count(self) -> int:
        return len(self.blobs)

    def summary(self) -> KpackSummary:
        return self.layout.summary(self.path)

    def source(self) -> Generated:
        """The archive as a member source for the wheel writer."""
        return Generated(self.size, self.chunks)

    def chunks(self) -> Iterator[bytes | memoryview]:
        """The archive's bytes. The spools are mapped for the walk and the pages it touched
        dropped after, so resident memory stays small whatever the archive's size."""
        spools = sorted({k.spool for k in self.blobs if k.view is None})
        dropper = _PageDropper()
        with _mapped(spools) as views:

            def blobs() -> Iterator[memoryview]:
                for k in self.blobs:
                    data = (
                        k.view
                        if k.view is not None
                        else views[k.spool][k.offset : k.offset + k.size]
                    )
                    yield data
                    dropper.add(data, k.size)

            yield from self.layout.chunks(blobs())
        dropper.drop()

    def write(self) -> KpackSummary:
        """Write the archive to :attr:`path` (a temporary sibling, then renamed)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_chunks(self.path, self.chunks())
        log.info(
            "wrote %s: %d kernels, %d -> %d bytes (%s)", self.path, self.kernel_count,
            self.layout.original_bytes, self.size, self.layout.scheme,
        )  # fmt: skip
        return self.summary()


def lay_out_archive(job: ArchiveJob, *, prefix: str, scheme: Scheme, level: int) -> SpooledArchive:
    """Lay out ``job``'s archive from its spooled kernels (nothing is read or written)."""
    stored: list[StoredKernel] = []
    for stage, name, k in job.entries:
        framed = k.level is not None and k.view is None
        if framed != (scheme != "none") or (framed and k.level != level):
            raise ArchiveError(
                f"kernel {name}#{k.index} ({k.target}) was spooled "
                f"{'as a zstd frame at level ' + str(k.level) if framed else 'uncompressed'}, "
                f"not as a {scheme} archive at level {level} stores it",
                path=job.path,
            )
        meta = {"target": k.triple, "source_prefix": stage}
        stored.append(StoredKernel(f"{name}#{k.index}", k.target, k.size, k.original_size, meta))
    layout = lay_out_kpack(
        stored, path=job.path, group_name=prefix, gfx_arch_family=job.target, scheme=scheme
    )
    return SpooledArchive(
        job.target, job.path, layout, tuple(job.entries[i][2] for i in layout.order)
    )


def remove_spools(spools: Sequence[Path]) -> None:
    for path in spools:
        with suppress(FileNotFoundError):
            path.unlink()


# --- orchestration shared by the artifact splitter and the wheel splitter -------------------

KernelEntry = tuple[str, str, SpooledKernel]  # (stage or overlay root, kernel_name, kernel)


def _pool(jobs: int, count: int) -> Executor | None:
    if jobs <= 1 or count <= 1:
        return None
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("forkserver" if "forkserver" in methods else None)
    return ProcessPoolExecutor(max_workers=min(jobs, count), mp_context=context)


def run_fat_jobs(jobs: Sequence[FatJob], workers: int) -> list[FatOutcome]:
    """Run every job, largest first, sorted by kernel name on return; the first failure
    cancels the rest and is raised. One worker (or one job) runs in-process, where kernels
    stay zero-copy views of the mapped inputs."""
    ordered = sorted(jobs, key=lambda j: (-j.size, j.kernel_name))
    pool = _pool(workers, len(ordered))
    if pool is None:
        outcomes = [run_fat_job(job, keep_views=True, threads=workers) for job in ordered]
    else:
        with pool:
            futures = {pool.submit(run_fat_job, job): job for job in ordered}
            outcomes = []
            try:
                for future in as_completed(futures):
                    outcomes.append(_result(future, futures[future]))
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
    return sorted(outcomes, key=lambda o: o.job.kernel_name)


def _result(future: Future[FatOutcome], job: FatJob) -> FatOutcome:
    """The outcome of ``job``; a worker that died (killed, out of memory) is one error
    naming the file it was splitting, not a stray ``BrokenProcessPool``."""
    try:
        return future.result()
    except BrokenExecutor as exc:
        raise TransformError(
            f"the worker process splitting it died ({exc}); killed, or out of memory?",
            path=job.source,
        ) from None


def group_by_target(outcomes: Sequence[FatOutcome]) -> dict[str, list[KernelEntry]]:
    """Spooled kernels per target, in kernel-name order."""
    by_target: dict[str, list[KernelEntry]] = {}
    for outcome in outcomes:
        for kernel in outcome.kernels:
            entry = (outcome.job.stage, outcome.job.kernel_name, kernel)
            by_target.setdefault(kernel.target, []).append(entry)
    return by_target


@dataclass(frozen=True)
class ArchiveJob:
    """One target's archive: where it goes and its kernels."""

    target: str
    path: Path
    entries: tuple[KernelEntry, ...]


def lay_out_archives(
    jobs: Sequence[ArchiveJob], *, prefix: str, scheme: Scheme, level: int
) -> list[SpooledArchive]:
    """Every archive of ``jobs``, laid out, in the order given."""
    return [lay_out_archive(j, prefix=prefix, scheme=scheme, level=level) for j in jobs]


def write_archives(
    jobs: Sequence[ArchiveJob], *, prefix: str, scheme: Scheme, level: int
) -> list[KpackSummary]:
    """Write every archive to its file, in the order given: the kernels are stored as
    spooled, so this only copies bytes."""
    return [a.write() for a in lay_out_archives(jobs, prefix=prefix, scheme=scheme, level=level)]
