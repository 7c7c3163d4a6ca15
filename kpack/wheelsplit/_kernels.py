"""Split the planned fat binaries and lay out their ``.kpack`` archives, with wheel names.

The work is the split's (:func:`kpack.split.split_fat`): each binary's transform is planned
and verified and its kernels spooled as archive frames; each archive is then streamed from
the spools straight into the device wheels that ship it, never written as a file of its
own. This module only names things for the wheel: one archive set per archive root
(:mod:`kpack.wheelsplit._plan`), each archive at its arcname. The spools live in the work
directory until the wheels are written.
"""

from __future__ import annotations

import logging
from pathlib import Path

from kpack.archive import MAX_ARCHIVE_BYTES, Scheme
from kpack.common.cli import format_size
from kpack.common.frozen import frozen
from kpack.errors import PackagingError
from kpack.split import ArchiveSpec, FatJob, HostContent, SpooledArchive, split_fat
from kpack.wheelfile import Generated
from kpack.wheelsplit._plan import SplitPlan

__all__ = ["ArchiveFile", "KernelResult", "host_size", "host_source", "split_binaries"]

log = logging.getLogger(__name__)


@frozen
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


@frozen
class KernelResult:
    stripped: dict[str, HostContent]  # arcname -> the transformed binary, streamed
    kernels: dict[str, int]  # arcname -> kernels moved out
    archives: tuple[ArchiveFile, ...]  # those of the scope
    notes: tuple[str, ...]
    targets: frozenset[str] = frozenset()  # every kernel's target, in scope or not


def host_size(content: HostContent) -> int:
    return content.stat().st_size if isinstance(content, Path) else content.size


def host_source(content: HostContent) -> Path | Generated:
    """``content`` as a member source for the wheel writer."""
    return content if isinstance(content, Path) else Generated(content.size, content.iter_chunks)


def split_binaries(
    plan: SplitPlan,
    source_root: Path,
    work: Path,
    *,
    scheme: Scheme,
    level: int,
    jobs: int,
    scope: frozenset[str] | None = None,
) -> KernelResult:
    """Plan and verify the transform of every fat binary of ``plan`` and spool its kernels
    in ``work/spool``. Nothing else is written: the host binaries stream from the extracted
    input and the archives from the spools, straight into the wheels, so the input and
    ``work/spool`` must outlive them. ``scope`` (a shard: the base arches whose kernels
    it ships) spools and lays out only those kernels' archives; the others are planned all
    the same, so the host binaries are the whole split's."""
    spool_dir = work / "spool"
    spool_dir.mkdir(parents=True, exist_ok=True)
    spec = ArchiveSpec(prefix=plan.group, scheme=scheme, level=level, limit=MAX_ARCHIVE_BYTES)
    fat_jobs = [
        FatJob(
            stage=fat.root.rstrip("/"),
            kernel_name=fat.kernel_name,
            source=source_root / fat.entry.arcname,
            size=fat.entry.size,
            depth=fat.kernel_name.count("/"),
            search_path=fat.search_path,
            spool=spool_dir / f"{number}.spool",
            mode=0o755 if fat.entry.executable else 0o644,
            scope=scope,
            level=spec.frame_level,
        )
        for number, fat in enumerate(plan.fat)
    ]
    split = split_fat(
        fat_jobs,
        workers=jobs,
        spec=spec,
        place=lambda slot: Path(plan.archive_arcname(_root(slot.group), slot.file_name)),
        per_stage=True,
        whole_plan=True,
    )
    archives = tuple(ArchiveFile(a.target, a.path.as_posix(), a) for a in split.archives)
    for archive in archives:
        log.info("%s: %d kernels, %s", archive.arcname, archive.kernels, format_size(archive.size))
    by_name = {o.job.source: o for o in split.outcomes}
    stripped: dict[str, HostContent] = {}
    kernels: dict[str, int] = {}
    notes: list[str] = []
    for fat in plan.fat:
        outcome = by_name[source_root / fat.entry.arcname]
        if outcome.content is None:  # pragma: no cover - a job without dest always has one
            raise PackagingError("no transformed content", path=fat.entry.arcname)
        stripped[fat.entry.arcname] = outcome.content
        kernels[fat.entry.arcname] = len(outcome.kernels) + outcome.skipped
        notes += outcome.notes
    targets = frozenset(a.slot.target for a in split.plan.archives)
    return KernelResult(stripped, kernels, archives, tuple(notes), targets)


def _root(stage: str) -> str:
    """The archive root of a job's stage, as an install path ending in '/' ('' = site)."""
    return f"{stage}/" if stage else ""
