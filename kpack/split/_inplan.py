"""A split planned as values: what splitting an artifact would write, with nothing written.

A consumer that ships the split's outputs itself (the package builder streams host binaries
and archives straight into its wheels) plans an artifact's split here: the scanned entries
become output artifacts of the one entry model (:mod:`kpack.artifact.tree`), host binaries
carrying their verified transform (:class:`~kpack.artifact.planned.TransformedBinary`),
archives their planned kernels (:class:`~kpack.artifact.planned.PlannedArchive`), placed
where :meth:`SplitPlan.archive_place` puts them. The transforms are planned and verified
on the split's parallel runner, the kernels become archives by the one pipeline of every
split (:func:`~kpack.split._pipeline.plan_archives`: a target whose archive would pass the
limit every reader loads gets archive parts, and the binaries with kernels in them a
transform planned with those search paths too). :func:`spool_planned` later runs the jobs
again to spool each archive's kernels (each compressed bundle decoded once, as a stream)
and lays the archives out to be streamed from the spools.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import islice
from pathlib import Path, PurePosixPath

from kpack.artifact.names import ArtifactId
from kpack.artifact.planned import PlannedArchive, PlannedKernel, TransformedBinary
from kpack.artifact.tree import Artifact, Entry, EntryKind
from kpack.common.cli import format_size
from kpack.errors import TransformError
from kpack.hipfmt import search_path
from kpack.split._archives import ArchiveJob, KernelEntry, SpooledArchive, lay_out_archives
from kpack.split._jobs import FatJob, PlannedFat, plan_fat_jobs, retarget_plan, run_fat_jobs
from kpack.split._pipeline import ArchivePart, ArchiveSpec, BinaryKernels, plan_archives
from kpack.split._plan import GENERIC, ArchivePlace, SplitOptions, SplitPlan, plan_split
from kpack.split._scan import classify_entries, kernel_name
from kpack.targets import target_order
from kpack.transform import FatBinaryInfo

__all__ = ["PlannedSplit", "plan_in_place", "spool_planned"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class PlannedSplit:
    """One fat artifact and the artifacts its split would write, as values."""

    artifact: Artifact
    plan: SplitPlan
    transformed: tuple[tuple[Entry, TransformedBinary], ...]
    archives: tuple[PlannedArchive, ...]
    outputs: tuple[Artifact, ...]  # P_generic first, then P_<target> by target
    notes: tuple[str, ...]
    spec: ArchiveSpec  # how the archives are made (the parts were cut for its limit)

    def describe(self) -> list[str]:
        """The split as lines for a dry run, short enough for 80 columns: the stage directory
        every binary shares is said once, each archive is named by its target (its artifact
        is ``<name>_<component>_<target>``), and each file's notes stand under its name."""
        host = sum(t.size for _, t in self.transformed)
        before = sum(e.size for e, _ in self.transformed)
        stages = {e.stage for e, _ in self.transformed} | {
            d.entry.stage for d in self.plan.databases
        }
        stage = f"{stages.pop()}/" if len(stages) == 1 else ""
        lines = [
            f"split {self.artifact.id.dirname}" + (f" (in {stage[:-1]})" if stage else "") + ":",
            f"  {_count(len(self.transformed), 'fat binary', 'fat binaries')}, "
            f"{format_size(before)} -> {format_size(host)} host code; "
            f"{_count(len(self.archives), 'archive')}, "
            f"{_count(len(self.plan.databases), 'database file')}",
        ]
        lines += [
            f"  {a.target}: {_count(len(a.kernels), 'kernel')}, "
            f"{format_size(a.original_bytes)} uncompressed"
            + ("" if stage else f", in {_archive_stage(a)}")
            for a in self.archives
        ]
        lines += [
            f"  {db.kernel_name.removeprefix(stage)} -> {self.plan.out_name(db.match.base_arch)}"
            for db in self.plan.databases
        ]
        subjects: dict[str, list[str]] = {}
        for note in self.notes:
            subject, sep, text = note.partition(": ")
            if not sep:
                subject, text = "", note
            subjects.setdefault(subject.removeprefix(stage), []).append(text)
        for subject, texts in subjects.items():
            lines += [f"  {subject}:"] if subject else []
            lines += [f"    {t}" if subject else f"  note: {t}" for t in texts]
        return lines


def _archive_stage(archive: PlannedArchive) -> str:
    """The stage directory an archive is written in (its key: ``<artifact>/<stage>/.kpack/…``)."""
    return archive.key.split("/", 1)[-1].rpartition("/.kpack/")[0]


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _dirs(art: ArtifactId, stage: str, relpath: str, source: Path) -> list[Entry]:
    """Directory entries for the parents of ``relpath`` (as a walk of the output finds)."""
    parents = list(PurePosixPath(relpath).parents)[:-1]
    return [
        Entry(
            relpath=str(p), kind=EntryKind.DIR, source=source, artifact=art, stage=stage, mode=0o755
        )
        for p in reversed(parents)
    ]


def _job(entry: Entry, prefix: str) -> FatJob:
    """The job that plans ``entry``'s transform (every kernel kept, nothing spooled)."""
    depth = entry.relpath.count("/")
    return FatJob(
        stage=entry.stage,
        kernel_name=kernel_name(entry),
        source=entry.source,
        size=entry.size,
        depth=depth,
        search_path=search_path(depth, prefix),
        spool=None,
    )


def plan_in_place(
    artifacts: Sequence[tuple[Artifact, SplitOptions]],
    *,
    fat_of: Callable[[Path], FatBinaryInfo | None],
    jobs: int,
) -> list[PlannedSplit | None]:
    """The split of each artifact (with its options) as output artifacts, or ``None`` for
    one with nothing to split. Every fat binary's transform is planned and verified, all
    of them together on ``jobs`` processes; nothing is written."""
    plans = [_plan(artifact, options, fat_of) for artifact, options in artifacts]
    fat_jobs = [_job(e, plan.prefix) for plan in plans if plan is not None for e in plan.fat]
    planned = iter(plan_fat_jobs(fat_jobs, jobs))
    return [
        None
        if plan is None
        else _split(artifact, options, plan, list(islice(planned, len(plan.fat))))
        for (artifact, options), plan in zip(artifacts, plans, strict=True)
    ]


def _plan(
    artifact: Artifact, options: SplitOptions, fat_of: Callable[[Path], FatBinaryInfo | None]
) -> SplitPlan | None:
    """What splitting ``artifact`` would do, ``None`` if nothing: its catalog entries
    classified (headers read by ``fat_of``), nothing transformed yet."""
    scan = classify_entries(
        artifact.path, artifact.stages, artifact.entries, options.handlers, fat_of=fat_of
    )
    plan = plan_split(scan, f"{artifact.id.name}_{artifact.id.component}", options)
    return plan if plan.fat or plan.databases else None


def _split(
    artifact: Artifact, options: SplitOptions, plan: SplitPlan, planned: Sequence[PlannedFat]
) -> PlannedSplit:
    """The planned split of ``artifact``: its planned transforms (``planned``, one per fat
    binary) retargeted where parts need it, its archives, its output artifacts."""
    prefix = plan.prefix
    spec = options.archive_spec(prefix)
    archive_plan = plan_archives([_binary(p) for p in planned], plan.archive_place, spec)
    transformed = tuple(
        (fat, TransformedBinary(p.transform if paths is None else retarget_plan(p, paths)))
        for fat, p, paths in zip(plan.fat, planned, archive_plan.search_paths, strict=True)
    )
    generic = _out(artifact, GENERIC)
    entries = [replace(e, artifact=generic) for e in plan.generic]
    entries += [replace(e, artifact=generic, size=t.size, planned=t) for e, t in transformed]
    archives = [(a.place, _archive(a, prefix)) for a in archive_plan.archives]
    stages = plan.output_stages(archive_plan.kernel_stages())
    outputs = [
        Artifact(generic, artifact.path, plan.scan.stages, tuple(entries)),
        *_target_outputs(artifact, plan, archives, stages),
    ]
    notes = plan.notes + tuple(
        f"{kernel_name(fat)}: {note}" for fat, t in transformed for note in t.transform.notes
    )
    notes += tuple(
        f"{plan.out_name(t)}: {n} archive parts, none over {format_size(spec.limit)}"
        for t, n in archive_plan.parted()
    )
    return PlannedSplit(
        artifact=artifact,
        plan=plan,
        transformed=transformed,
        archives=tuple(a for _, a in archives),
        outputs=tuple(outputs),
        notes=notes,
        spec=spec,
    )


def _out(artifact: Artifact, target: str) -> ArtifactId:
    return ArtifactId(artifact.id.name, artifact.id.component, target)


def _binary(planned: PlannedFat) -> BinaryKernels[PlannedKernel]:
    job = planned.job
    return BinaryKernels(
        kernel_name=job.kernel_name, stage=job.stage, depth=job.depth, kernels=planned.kernels
    )


def _archive(part: ArchivePart[PlannedKernel, ArchivePlace], prefix: str) -> PlannedArchive:
    kernels = sorted(
        (kernel for _, _, kernel in part.kernels), key=lambda k: (k.kernel_name, k.index)
    )
    return PlannedArchive(str(part.place.path), prefix, part.slot.target, tuple(kernels))


def _target_outputs(
    artifact: Artifact,
    plan: SplitPlan,
    archives: Sequence[tuple[ArchivePlace, PlannedArchive]],
    stages: dict[str, set[str]],
) -> list[Artifact]:
    """``P_<target>`` for every target: its archives and database files, with the
    directories above them."""
    by_target: dict[str, list[Entry]] = {}
    for place, archive in archives:
        art = _out(artifact, place.target)
        source = artifact.path / place.stage / place.relpath  # a label only: planned
        file = Entry(
            relpath=place.relpath,
            kind=EntryKind.FILE,
            source=source,
            artifact=art,
            stage=place.stage,
            size=archive.original_bytes,
            planned=archive,
        )
        dirs = _dirs(art, place.stage, place.relpath, source)
        by_target.setdefault(place.target, []).extend([*dirs, file])
    for db in plan.databases:
        art, e = _out(artifact, db.match.base_arch), db.entry
        # a claimed file ships as a file (a claimed symlink: the file it names)
        file = replace(e, artifact=art, kind=EntryKind.FILE)
        by_target.setdefault(db.match.base_arch, []).extend(
            [*_dirs(art, e.stage, e.relpath, e.source), file]
        )
    outputs = []
    for target, entries in sorted(by_target.items(), key=lambda item: target_order(item[0])):
        unique = {(e.stage, e.relpath): e for e in entries}
        ordered = tuple(sorted(unique.values(), key=lambda e: (e.stage, e.relpath)))
        outputs.append(
            Artifact(_out(artifact, target), artifact.path, tuple(sorted(stages[target])), ordered)
        )
    return outputs


def spool_planned(
    splits: Sequence[PlannedSplit], spool_dir: Path, *, jobs: int
) -> dict[str, SpooledArchive]:
    """Spool every planned archive's kernels below ``spool_dir`` (the planned jobs run
    again on the split's runner, each kernel spooled as its archive frame, a compressed
    bundle decoded once, as a stream) and lay the archives out, by key. They stream from
    the spools, never written as files of their own: ``spool_dir`` must outlive their
    consumers."""
    fat_jobs: list[FatJob] = []
    owner: dict[Path, int] = {}  # source -> its split
    for number, split in enumerate(splits):
        if not split.archives:
            continue
        for index, (fat, _) in enumerate(split.transformed):
            spool = spool_dir / f"{number:04d}-{index:05d}.spool"
            job = _job(fat, split.plan.prefix)
            fat_jobs.append(replace(job, spool=spool, level=split.spec.frame_level))
            owner[fat.source] = number
    spooled: dict[tuple[int, str, int, str], KernelEntry] = {}
    for outcome in run_fat_jobs(fat_jobs, jobs):
        job = outcome.job
        for sk in outcome.kernels:
            key = (owner[job.source], job.kernel_name, sk.index, sk.target)
            spooled[key] = (job.stage, job.kernel_name, sk)
    laid: dict[str, SpooledArchive] = {}
    for number, split in enumerate(splits):
        archive_jobs = [
            ArchiveJob(a.target, Path(a.key), _spooled(spooled, number, a)) for a in split.archives
        ]
        for archive in lay_out_archives(archive_jobs, split.spec):
            laid[str(archive.path)] = archive
            log.info(
                "%s: %d kernels, %d bytes", archive.path.name, archive.kernel_count, archive.size
            )
    return laid


def _spooled(
    spooled: dict[tuple[int, str, int, str], KernelEntry], number: int, archive: PlannedArchive
) -> tuple[KernelEntry, ...]:
    """The spooled kernels of a planned archive (the transform found them all when planned)."""
    entries = []
    for k in archive.kernels:
        entry = spooled.get((number, k.kernel_name, k.index, k.target))
        if entry is None:
            raise TransformError(
                f"wrapper {k.index}'s code object for {k.target} was planned but not spooled",
                path=k.kernel_name,
            )
        entries.append(entry)
    return tuple(entries)
