"""Fat binaries split with their kernels spooled (private to :mod:`kpack.split`): the path
of ``kpack split-artifacts`` and of the wheel splitter.

Run every job on the parallel runner (:mod:`._jobs`), turn the spooled kernels into
archives (:func:`~kpack.split._pipeline.plan_archives`), transform again each binary whose
kernels landed in a later archive part, and lay the archives out to stream from the
spools. The caller writes what it ships: the archives to their files, or into wheels.

A *shard* of a split (jobs with a ``scope``, and ``whole_plan``) plans its archives from
every kernel, the out-of-scope ones described and never spooled or compressed, so the
parts and the markers' search paths are the whole split's, whatever the shard; it lays out
the archives of its scope only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from kpack.artifact.planned import PlannedKernel
from kpack.common.frozen import frozen
from kpack.errors import ArchiveError
from kpack.split._archives import ArchiveJob, SpooledArchive, lay_out_archives
from kpack.split._jobs import FatJob, FatOutcome, retarget, run_fat_jobs
from kpack.split._pipeline import ArchivePlan, ArchiveSlot, ArchiveSpec, plan_archives
from kpack.split._spool import SpooledKernel

__all__ = ["FatSplit", "split_fat"]


@frozen(kw_only=True)
class FatSplit:
    """The fat binaries split: their outcomes (by kernel name; each marker names every
    archive part its binary has kernels in) and their archives, laid out in the plan's
    order, each at the path its placement gave."""

    outcomes: tuple[FatOutcome, ...]
    plan: ArchivePlan[AnyKernel, Path]
    archives: tuple[SpooledArchive, ...]


#: A kernel of the plan: spooled, or (out of a shard's scope) only described.
AnyKernel = SpooledKernel | PlannedKernel


def split_fat(
    jobs: Sequence[FatJob],
    *,
    workers: int,
    spec: ArchiveSpec,
    place: Callable[[ArchiveSlot], Path],
    per_stage: bool = False,
    whole_plan: bool = False,
) -> FatSplit:
    """Split every job's binary on ``workers`` processes; one archive set for all of them,
    or (``per_stage``) one per job stage (a wheel's archive roots). ``whole_plan``: the
    out-of-scope kernels take their places in the plan too (a shard, see above); only the
    archives of in-scope kernels are laid out."""
    outcomes = run_fat_jobs(jobs, workers)
    binaries = [
        o.job.binary(_planned(o, whole_plan), group=o.job.stage if per_stage else "")
        for o in outcomes
    ]
    plan = plan_archives(binaries, place, spec)
    retargeted = tuple(
        outcome if paths is None else retarget(outcome, paths)
        for outcome, paths in zip(outcomes, plan.search_paths, strict=True)
    )
    archive_jobs = [
        ArchiveJob(a.slot.target, a.place, spooled)
        for a in plan.archives
        if (spooled := _spooled(a.kernels))
    ]
    archives = tuple(lay_out_archives(archive_jobs, spec))
    return FatSplit(outcomes=retargeted, plan=plan, archives=archives)


def _planned(outcome: FatOutcome, whole_plan: bool) -> tuple[AnyKernel, ...]:
    return (*outcome.kernels, *outcome.out_of_scope) if whole_plan else outcome.kernels


def _spooled(
    entries: tuple[tuple[str, str, AnyKernel], ...],
) -> tuple[tuple[str, str, SpooledKernel], ...]:
    """An archive's entries if its kernels were spooled, else none (one target's kernels
    are all in scope or none are)."""
    spooled = tuple((s, n, k) for s, n, k in entries if isinstance(k, SpooledKernel))
    if spooled and len(spooled) != len(entries):  # pragma: no cover - scope is per target
        raise ArchiveError(f"archive of {entries[0][2].target} is partly out of scope")
    return spooled
