"""The per-binary jobs of a split and the runner that runs them in parallel.

One job per fat binary, run in a worker process (or in-process for one worker): transform
the *input* straight into the generic output (or plan the verified transform for the wheel
writer to stream), then spool the in-scope kernels the transform extracted
(:mod:`._spool`), so the parent never holds the device code of the whole artifact. The
runner is shared by ``kpack split-artifacts``, the wheel splitter and the package builder.
"""

from __future__ import annotations

import logging
import multiprocessing
from collections.abc import Sequence
from concurrent.futures import BrokenExecutor, Future, ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from kpack.archive import (
    Scheme,
)
from kpack.artifact.output import copy_file, copy_meta
from kpack.common import cancel
from kpack.databases import base_arch
from kpack.elf import ElfEdit
from kpack.errors import BundleError, TransformError
from kpack.split._archives import KernelEntry
from kpack.split._spool import SpooledKernel, _Spool, _spool_into
from kpack.transform import (
    AlreadyTransformed,
    ExtractedKernel,
    TransformPlan,
    plan_host_transform,
    transform_binary,
)
from kpack.wheelfile import Generated

__all__ = [
    "FatJob",
    "FatOutcome",
    "HostContent",
    "frame_level",
    "group_by_target",
    "host_size",
    "host_source",
    "run_fat_job",
    "run_fat_jobs",
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
    with _Spool(job.spool, job.level, threads) as spool:
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


def retarget(outcome: FatOutcome, search_paths: Sequence[str]) -> FatOutcome:
    """``outcome`` with its binary transformed again, its marker naming ``search_paths``
    (archive parts: :mod:`kpack.split._parts`); the kernels spooled stay as they are."""
    job = outcome.job
    if job.dest is None:
        plan = plan_host_transform(
            job.source, kernel_name=job.kernel_name, search_paths=search_paths
        )
        content = plan.edit if isinstance(plan, TransformPlan) else replace(plan, kernels=())
        return replace(outcome, content=content)
    transform_binary(job.source, job.dest, kernel_name=job.kernel_name, search_paths=search_paths)
    copy_meta(job.source, job.dest, job.mode)
    return outcome


def frame_level(scheme: Scheme, level: int) -> int | None:
    """The level to spool kernels at for archives of ``scheme`` (``None``: uncompressed)."""
    return level if scheme == "zstd-per-kernel" else None


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


def _stop(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and end the workers now: a worker in the middle of a
    large binary would otherwise finish it while the caller waits (a signal, a failure)."""
    pool.shutdown(wait=False, cancel_futures=True)
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14
    if terminate is not None:
        terminate()
        return
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.terminate()


def _pool(jobs: int, count: int) -> ProcessPoolExecutor | None:
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
                for future in cancel.completed(futures):
                    outcomes.append(_result(future, futures[future]))
            except BaseException:
                _stop(pool)
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
