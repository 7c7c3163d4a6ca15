"""The per-binary jobs of a split, run by the parallel runner (:mod:`._pool`).

One job per fat binary, run in a worker process (or in-process for one worker): transform
the *input* straight into the generic output (or plan the verified transform for the wheel
writer to stream), then spool the in-scope kernels the transform extracted
(:mod:`._spool`), so the parent never holds the device code of the whole artifact. The
package builder only plans at first (:func:`plan_fat_jobs`: transforms verified, kernels
described) and spools when it applies its plan.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias, TypeVar

from kpack.artifact.output import copy_file, copy_meta
from kpack.artifact.planned import PlannedKernel
from kpack.common.cli import format_size
from kpack.common.frozen import frozen
from kpack.common.workers import thread_min_bytes
from kpack.databases import base_arch
from kpack.elf import ElfEdit
from kpack.errors import BundleError, TransformError
from kpack.split._pipeline import BinaryKernels, Kernel
from kpack.split._pool import run_jobs
from kpack.split._spool import Spool, SpooledKernel, spool_into
from kpack.transform import (
    AlreadyTransformed,
    ExtractedKernel,
    PlannedBinary,
    TransformPlan,
    plan_host_transform,
    transform_binary,
)

if TYPE_CHECKING:
    from kpack.transform import PeTransformPlan  # PE support loads on use

__all__ = [
    "FatJob",
    "FatOutcome",
    "HostContent",
    "PlannedFat",
    "plan_fat_job",
    "plan_fat_jobs",
    "retarget",
    "retarget_plan",
    "run_fat_job",
    "run_fat_jobs",
]

log = logging.getLogger(__name__)

HostContent: TypeAlias = "ElfEdit | PeTransformPlan | Path"
K = TypeVar("K", bound=Kernel)


@frozen(kw_only=True)
class FatJob:
    """Transform ``source`` into ``dest`` (``None``: planned, for the caller to stream) with
    a marker naming ``search_path``; spool its in-scope kernels to ``spool``."""

    stage: str  # its kernels' source prefix (a stage dir; a wheel's archive root)
    kernel_name: str  # its binary key without '#N'
    source: Path
    size: int
    depth: int  # directories ``search_path`` climbs to the archives
    search_path: str
    spool: Path | None  # None: only planned (plan_fat_jobs), nothing spooled
    dest: Path | None = None
    mode: int = 0o644
    scope: frozenset[str] | None = None  # base arches whose kernels are kept; None = all
    level: int | None = None  # spool each kernel as a zstd frame at this level; None: as is

    def binary(self, kernels: Sequence[K], *, group: str = "") -> BinaryKernels[K]:
        """This binary's ``kernels`` for :func:`~kpack.split._pipeline.plan_archives`."""
        return BinaryKernels(
            kernel_name=self.kernel_name,
            stage=self.stage,
            depth=self.depth,
            kernels=kernels,
            group=group,
        )


@frozen(kw_only=True)
class FatOutcome:
    job: FatJob
    kernels: tuple[SpooledKernel, ...]  # in scope, spooled
    skipped: int  # out-of-scope kernels (they still count for #N)
    #: The out-of-scope kernels, described, never spooled: a shard of a split plans its
    #: archives as the whole split does (:func:`~kpack.split.split_fat`'s ``whole_plan``).
    out_of_scope: tuple[PlannedKernel, ...] = ()
    removed_bytes: int
    notes: tuple[str, ...]
    passed_through: bool = False
    #: The host binary to ship when the job has no ``dest``: a verified edit streamed
    #: from the input, or the input itself (passed through).
    content: HostContent | None = None


@frozen(kw_only=True)
class PlannedFat:
    """A planned job: the verified transform (its kernels dropped: they are views of the
    input) and the in-scope kernels it would move out, described."""

    job: FatJob
    transform: PlannedBinary
    kernels: tuple[PlannedKernel, ...]


def run_fat_job(job: FatJob, keep_views: bool = False, threads: int = 1) -> FatOutcome:
    """Transform one fat binary and spool its in-scope kernels.

    The transform checks every bundle in full, decoding compressed ones as a stream; the
    in-scope code objects it decodes are spooled right then, so nothing is decoded twice.
    Plain bundles' code objects are zero-copy views of the mapped input. With frames
    (``job.level``) they are compressed afterwards, on ``threads`` threads, into the
    spool; without, a worker process spools them as they are and in-process
    (``keep_views``) they are kept as views, which saves writing and re-reading them.
    """
    if job.spool is None:
        raise TransformError("a job without a spool is only planned", path=job.source)
    log.info("splitting %s (%s)", job.kernel_name, format_size(job.size))
    content: HostContent | None = None
    with Spool(job.spool, job.level, threads) as spool:
        sink = spool.decoded_sink(job.scope)
        paths = [job.search_path]
        try:
            if job.dest is None:  # planned and verified, streamed later: never written here
                plan = plan_host_transform(
                    job.source, kernel_name=job.kernel_name, search_paths=paths, decoded=sink
                )
                content = _content(plan)
            else:
                plan = transform_binary(
                    job.source,
                    job.dest,
                    kernel_name=job.kernel_name,
                    search_paths=paths,
                    decoded=sink,
                )
                copy_meta(job.source, job.dest, job.mode)
        except AlreadyTransformed as exc:
            if job.dest is not None:
                copy_file(job.source, job.dest, job.mode)
            message = exc.message
            note = f"{job.kernel_name}: already transformed, passed through unchanged ({message})"
            return FatOutcome(
                job=job,
                kernels=(),
                skipped=0,
                removed_bytes=0,
                notes=(note,),
                passed_through=True,
                content=job.source,
            )
        kernels, skipped = _spool_kernels(job, plan.kernels, keep_views, spool, threads)
    return FatOutcome(
        job=job,
        kernels=kernels,
        skipped=len(skipped),
        out_of_scope=skipped,
        removed_bytes=plan.removed_bytes,
        notes=tuple(f"{job.kernel_name}: {n}" for n in plan.notes),
        content=content,
    )


def run_fat_jobs(jobs: Sequence[FatJob], workers: int) -> list[FatOutcome]:
    """Run every job (:func:`~kpack.split._pool.run_jobs`), sorted by kernel name on
    return; in-process, kernels stay zero-copy views of the mapped inputs, compressed on
    up to ``workers`` threads where the binary is large enough for threads to pay
    (:mod:`kpack.common.workers`)."""
    least = thread_min_bytes()

    def here(job: FatJob) -> FatOutcome:
        return run_fat_job(job, keep_views=True, threads=workers if job.size >= least else 1)

    outcomes = run_jobs(jobs, workers, work=run_fat_job, here=here)
    return sorted(outcomes, key=lambda o: o.job.kernel_name)


def plan_fat_job(job: FatJob) -> PlannedFat:
    """Plan and verify the transform of one fat binary and describe its in-scope kernels;
    nothing is spooled or written. An already transformed binary is an error here."""
    log.info("planning the split of %s (%s)", job.kernel_name, format_size(job.size))
    plan = plan_host_transform(
        job.source, kernel_name=job.kernel_name, search_paths=[job.search_path]
    )
    _check_unique(plan.kernels, job.source)
    kernels = tuple(
        _described(job, k)
        for k in plan.kernels
        if job.scope is None or base_arch(k.target) in job.scope
    )
    return PlannedFat(job=job, transform=replace(plan, kernels=()), kernels=kernels)


def plan_fat_jobs(jobs: Sequence[FatJob], workers: int) -> list[PlannedFat]:
    """Plan every job on the same runner as :func:`run_fat_jobs`, in the jobs' order."""
    planned = {
        p.job.source: p for p in run_jobs(jobs, workers, work=plan_fat_job, here=plan_fat_job)
    }
    return [planned[job.source] for job in jobs]


def retarget(outcome: FatOutcome, search_paths: Sequence[str]) -> FatOutcome:
    """``outcome`` with its binary transformed again, its marker naming ``search_paths``
    (archive parts: :mod:`kpack.split._parts`); the kernels spooled stay as they are."""
    job = outcome.job
    if job.dest is None:
        plan = plan_host_transform(
            job.source, kernel_name=job.kernel_name, search_paths=search_paths
        )
        return replace(outcome, content=_content(plan))
    transform_binary(job.source, job.dest, kernel_name=job.kernel_name, search_paths=search_paths)
    copy_meta(job.source, job.dest, job.mode)
    return outcome


def retarget_plan(planned: PlannedFat, search_paths: Sequence[str]) -> PlannedBinary:
    """The transform of ``planned`` again, its marker naming ``search_paths``."""
    job = planned.job
    plan = plan_host_transform(job.source, kernel_name=job.kernel_name, search_paths=search_paths)
    return replace(plan, kernels=())


def _content(plan: TransformPlan | PeTransformPlan) -> HostContent:
    """What a job without ``dest`` hands back to stream: the ELF edit, or the PE plan
    without its kernels (views of the input)."""
    return plan.edit if isinstance(plan, TransformPlan) else replace(plan, kernels=())


def _spool_kernels(
    job: FatJob,
    kernels: Sequence[ExtractedKernel],
    keep_views: bool,
    spool: Spool,
    threads: int,
) -> tuple[tuple[SpooledKernel, ...], tuple[PlannedKernel, ...]]:
    """Spool in-scope kernels not yet in ``spool``: each code object is written once
    (wrappers that share a bundle share its range); the others are only described."""
    _check_unique(kernels, job.source)
    wanted: list[ExtractedKernel] = []
    skipped: list[PlannedKernel] = []
    for kernel in kernels:
        if job.scope is not None and base_arch(kernel.target) not in job.scope:
            skipped.append(_described(job, kernel))
            continue
        wanted.append(kernel)
    return spool_into(wanted, spool, keep_views, threads), tuple(skipped)


def _described(job: FatJob, kernel: ExtractedKernel) -> PlannedKernel:
    return PlannedKernel(
        stage=job.stage,
        kernel_name=job.kernel_name,
        index=kernel.index,
        target=kernel.target,
        triple=kernel.triple,
        original_size=kernel.size,
    )


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
