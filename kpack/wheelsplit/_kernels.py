"""Split the planned fat binaries and lay out one ``.kpack`` archive per target.

The per-binary work and the archive layout are the artifact splitter's
(:mod:`kpack.split`): each binary is transformed into ``host_dir`` and its kernels
spooled as archive frames; each archive is then streamed from the spools straight into
the device wheels that ship it, never written as a file of its own. The spools live in
the work directory until the wheels are written.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from kpack.archive import MAX_ARCHIVE_BYTES, Scheme
from kpack.errors import PackagingError
from kpack.split import (
    ArchiveJob,
    FatJob,
    FatOutcome,
    HostContent,
    SpooledArchive,
    cut_entries,
    frame_level,
    group_by_target,
    lay_out_archives,
    retarget,
    retarget_paths,
    run_fat_jobs,
)
from kpack.wheelsplit._plan import SplitPlan

__all__ = ["ArchiveFile", "KernelResult", "split_binaries"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ArchiveFile:
    """One target's archive, streamed into its wheels by ``archive.source()``."""

    target: str
    arcname: str
    archive: SpooledArchive

    @property
    def kernels(self) -> int:
        return self.archive.kernel_count

    @property
    def size(self) -> int:
        return self.archive.size


@dataclass(frozen=True)
class KernelResult:
    stripped: dict[str, HostContent]  # arcname -> the transformed binary, streamed
    kernels: dict[str, int]  # arcname -> kernels moved out
    archives: tuple[ArchiveFile, ...]
    notes: tuple[str, ...]


def split_binaries(
    plan: SplitPlan, source_root: Path, work: Path, *, scheme: Scheme, level: int, jobs: int
) -> KernelResult:
    """Plan and verify the transform of every fat binary of ``plan`` and spool its kernels
    in ``work/spool``. Nothing else is written: the host binaries stream from the extracted
    input and the archives from the spools, straight into the wheels, so the input and
    ``work/spool`` must outlive them."""
    spool_dir = work / "spool"
    spool_dir.mkdir(parents=True, exist_ok=True)
    fat_jobs = []
    for number, fat in enumerate(plan.fat):
        mode = 0o755 if fat.entry.executable else 0o644
        fat_jobs.append(
            FatJob(fat.root.rstrip("/"), fat.kernel_name, source_root / fat.entry.arcname,
                   None, mode, fat.entry.size, fat.kernel_name, fat.search_path,
                   spool_dir / f"{number}.spool", None, frame_level(scheme, level))
        )  # fmt: skip
    outcomes = run_fat_jobs(fat_jobs, jobs)
    archives, outcomes = _lay_out_archives(plan, outcomes, scheme, level)
    by_name = {o.job.source: o for o in outcomes}
    stripped: dict[str, HostContent] = {}
    kernels: dict[str, int] = {}
    notes: list[str] = []
    for fat in plan.fat:
        outcome = by_name[source_root / fat.entry.arcname]
        if outcome.content is None:  # pragma: no cover - a job without dest always has one
            raise PackagingError("no transformed content", path=fat.entry.arcname)
        stripped[fat.entry.arcname] = outcome.content
        kernels[fat.entry.arcname] = len(outcome.kernels)
        notes += outcome.notes
    return KernelResult(stripped, kernels, archives, tuple(notes))


def _lay_out_archives(
    plan: SplitPlan, outcomes: list[FatOutcome], scheme: Scheme, level: int
) -> tuple[tuple[ArchiveFile, ...], list[FatOutcome]]:
    """One archive per archive root and target (kpack.wheelsplit._plan), in root order;
    a target whose archive would pass what every reader loads gets parts, and the binaries
    with kernels in them a transform naming those too (kpack.split's archive-part rule)."""
    by_root: dict[str, list[FatOutcome]] = {}
    for outcome in outcomes:
        by_root.setdefault(outcome.job.stage, []).append(outcome)
    archives = []
    retargeted: dict[Path, FatOutcome] = {}
    limit = MAX_ARCHIVE_BYTES
    for stage in sorted(by_root):
        root = f"{stage}/" if stage else ""
        parts, used = cut_entries(
            group_by_target(by_root[stage]), prefix=plan.group, scheme=scheme, limit=limit
        )
        for outcome in by_root[stage]:
            name = outcome.job.kernel_name
            paths = retarget_paths(used, name, name.count("/"), plan.group)
            if paths is not None:
                retargeted[outcome.job.source] = retarget(outcome, paths)
        named = [
            (plan.archive_arcname(root, t, n), t, entries)
            for t in sorted(parts)
            for n, entries in enumerate(parts[t])
        ]
        archive_jobs = [ArchiveJob(t, Path(a), tuple(e)) for a, t, e in named]
        laid = lay_out_archives(
            archive_jobs, prefix=plan.group, scheme=scheme, level=level, max_size=limit
        )
        for (arcname, _, _), archive in zip(named, laid, strict=True):
            archives.append(ArchiveFile(archive.target, arcname, archive))
            log.info("%s: %d kernels, %d bytes", arcname, archive.kernel_count, archive.size)
    return tuple(archives), [retargeted.get(o.job.source, o) for o in outcomes]
