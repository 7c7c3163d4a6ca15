"""Split the planned fat binaries and write one ``.kpack`` archive per target.

The per-binary work and the archive writer are the artifact splitter's
(:mod:`kpack._split_work`): each binary is transformed into ``host_dir`` and its kernels
spooled; the archives are then written from the spools, one target at a time.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from kpack._split_work import (
    ArchiveJob,
    FatJob,
    FatOutcome,
    frame_level,
    group_by_target,
    remove_spools,
    run_fat_jobs,
    write_archives,
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
                   spool_dir / f"{number}.spool", None, frame_level(scheme, level))
        )  # fmt: skip
    outcomes = run_fat_jobs(fat_jobs, jobs)
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


def _write_archives(
    plan: SplitPlan, outcomes: list[FatOutcome], kpack_dir: Path, scheme: Scheme, level: int,
    jobs: int,
) -> tuple[ArchiveFile, ...]:  # fmt: skip
    by_target = group_by_target(outcomes)
    archive_jobs = [
        ArchiveJob(t, kpack_dir / plan.archive_arcname(t).rsplit("/", 1)[-1], tuple(by_target[t]))
        for t in sorted(by_target)
    ]
    summaries = write_archives(
        archive_jobs, prefix=plan.group, scheme=scheme, level=level, workers=jobs
    )
    archives = []
    for job, summary in zip(archive_jobs, summaries, strict=True):
        arcname = plan.archive_arcname(job.target)
        archives.append(
            ArchiveFile(job.target, arcname, job.path, summary.kernel_count, summary.size)
        )
        log.info("wrote %s: %d kernels, %d bytes", arcname, summary.kernel_count, summary.size)
    return tuple(archives)
