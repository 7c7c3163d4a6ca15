"""Fat binaries split with their kernels spooled (private to :mod:`kpack.split`): the path
of ``kpack split-artifacts`` and of the wheel splitter.

Run every job on the parallel runner (:mod:`._jobs`), turn the spooled kernels into
archives (:func:`~kpack.split._pipeline.plan_archives`), transform again each binary whose
kernels landed in a later archive part, and lay the archives out to stream from the
spools. The caller writes what it ships: the archives to their files, or into wheels.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kpack.split._archives import ArchiveJob, SpooledArchive, lay_out_archives
from kpack.split._jobs import FatJob, FatOutcome, retarget, run_fat_jobs
from kpack.split._pipeline import ArchivePlan, ArchiveSlot, ArchiveSpec, plan_archives
from kpack.split._spool import SpooledKernel

__all__ = ["FatSplit", "split_fat"]


@dataclass(frozen=True, kw_only=True)
class FatSplit:
    """The fat binaries split: their outcomes (by kernel name; each marker names every
    archive part its binary has kernels in) and their archives, laid out in the plan's
    order, each at the path its placement gave."""

    outcomes: tuple[FatOutcome, ...]
    plan: ArchivePlan[SpooledKernel, Path]
    archives: tuple[SpooledArchive, ...]


def split_fat(
    jobs: Sequence[FatJob],
    *,
    workers: int,
    spec: ArchiveSpec,
    place: Callable[[ArchiveSlot], Path],
    per_stage: bool = False,
) -> FatSplit:
    """Split every job's binary on ``workers`` processes; one archive set for all of them,
    or (``per_stage``) one per job stage (a wheel's archive roots)."""
    outcomes = run_fat_jobs(jobs, workers)
    binaries = [o.job.binary(o.kernels, group=o.job.stage if per_stage else "") for o in outcomes]
    plan = plan_archives(binaries, place, spec)
    retargeted = tuple(
        outcome if paths is None else retarget(outcome, paths)
        for outcome, paths in zip(outcomes, plan.search_paths, strict=True)
    )
    archive_jobs = [ArchiveJob(a.slot.target, a.place, a.kernels) for a in plan.archives]
    archives = tuple(lay_out_archives(archive_jobs, spec))
    return FatSplit(outcomes=retargeted, plan=plan, archives=archives)
