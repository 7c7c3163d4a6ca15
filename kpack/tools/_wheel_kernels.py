"""Split the planned fat binaries and write one ``.kpack`` archive per target.

The per-binary work and the archive writer are the artifact splitter's
(:mod:`kpack._split_work`): each binary is transformed into ``host_dir`` and its kernels
spooled; the archives are then written from the spools, one target at a time.
"""

from __future__ import annotations

import logging
import multiprocessing
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from kpack._split_work import (
    FatJob,
    FatOutcome,
    SpooledKernel,
    remove_spools,
    run_fat_job,
    write_target_archive,
)
from kpack.archive import Scheme
from kpack.tools._wheel_plan import SplitPlan

__all__ = ["ArchiveFile", "KernelResult", "split_binaries"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ArchiveFile:
    target: str
    arcname: str
    path: Path
    kernels: int
    size: int


@dataclass(frozen=True)
class KernelResult:
    stripped: dict[str, Path]  # arcname -> transformed file
    kernels: dict[str, int]  # arcname -> kernels moved out
    archives: tuple[ArchiveFile, ...]
    notes: tuple[str, ...]


def split_binaries(
    plan: SplitPlan, source_root: Path, work: Path, *, scheme: Scheme, level: int, jobs: int
) -> KernelResult:
    """Transform every fat binary of ``plan``; write the archives below ``work``."""
    host_dir, spool_dir, kpack_dir = work / "host", work / "spool", work / "kpack"
    for d in (host_dir, spool_dir, kpack_dir):
        d.mkdir(parents=True, exist_ok=True)
    fat_jobs = []
    for number, fat in enumerate(plan.fat):
        dest = host_dir / fat.entry.arcname
        dest.parent.mkdir(parents=True, exist_ok=True)
        mode = 0o755 if fat.entry.executable else 0o644
        fat_jobs.append(
            FatJob(plan.overlay_root.rstrip("/"), fat.kernel_name, source_root / fat.entry.arcname,
                   dest, mode, fat.entry.size, fat.kernel_name, fat.search_path,
                   spool_dir / f"{number}.spool", None)
        )  # fmt: skip
    outcomes = _run(fat_jobs, jobs)
    try:
        archives = _write_archives(plan, outcomes, kpack_dir, scheme, level, jobs)
    finally:
        remove_spools([job.spool for job in fat_jobs])
    by_name = {o.job.kernel_name: o for o in outcomes}
    stripped: dict[str, Path] = {}
    kernels: dict[str, int] = {}
    notes: list[str] = []
    for fat in plan.fat:
        outcome = by_name[fat.kernel_name]
        stripped[fat.entry.arcname] = outcome.job.dest
        kernels[fat.entry.arcname] = len(outcome.kernels)
        notes += outcome.notes
    return KernelResult(stripped, kernels, archives, tuple(notes))


def _run(jobs: list[FatJob], workers: int) -> list[FatOutcome]:
    """Largest first; in-process for one worker (kernels stay views of the mapped input)."""
    ordered = sorted(jobs, key=lambda j: (-j.size, j.kernel_name))
    if workers <= 1 or len(ordered) <= 1:
        return [run_fat_job(job, keep_views=True) for job in ordered]
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("forkserver" if "forkserver" in methods else None)
    with ProcessPoolExecutor(min(workers, len(ordered)), mp_context=context) as pool:
        futures = [pool.submit(run_fat_job, job) for job in ordered]
        try:
            return [f.result() for f in as_completed(futures)]
        except BaseException:
            for future in futures:
                future.cancel()
            raise


def _write_archives(
    plan: SplitPlan, outcomes: list[FatOutcome], kpack_dir: Path, scheme: Scheme, level: int,
    jobs: int,
) -> tuple[ArchiveFile, ...]:  # fmt: skip
    by_target: dict[str, list[tuple[str, str, SpooledKernel]]] = {}
    for outcome in outcomes:
        for kernel in outcome.kernels:
            entry = (outcome.job.stage, outcome.job.kernel_name, kernel)
            by_target.setdefault(kernel.target, []).append(entry)
    archives = []
    for target in sorted(by_target):
        arcname = plan.archive_arcname(target)
        path = kpack_dir / arcname.rsplit("/", 1)[-1]
        summary = write_target_archive(
            path, target, by_target[target], prefix=plan.group, scheme=scheme, level=level,
            jobs=jobs,
        )  # fmt: skip
        archives.append(ArchiveFile(target, arcname, path, summary.kernel_count, summary.size))
        log.info("wrote %s: %d kernels, %d bytes", arcname, summary.kernel_count, summary.size)
    return tuple(archives)
