"""A split planned as values: what splitting an artifact would write, with nothing written.

A consumer that ships the split's outputs itself (the package builder streams host binaries
and archives straight into its wheels) plans an artifact's split here: the scanned entries
become output artifacts of the one entry model (:mod:`kpack.artifact.tree`), host binaries
carrying their verified transform (:class:`~kpack.artifact.planned.TransformedBinary`),
archives their planned kernels (:class:`~kpack.artifact.planned.PlannedArchive`), placed
where :meth:`SplitPlan.archive_place` puts them. :func:`spool_planned` later spools each
archive's kernels (each compressed bundle decoded once, as a stream) and lays the archives
out to be streamed from the spools. A target whose archive would pass the limit every
reader loads gets archive parts, and the binaries with kernels in them a transform planned
with those search paths too (:mod:`kpack.split._parts`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from kpack.archive import MAX_ARCHIVE_BYTES, Scheme
from kpack.artifact.names import ArtifactId
from kpack.artifact.planned import PlannedArchive, PlannedKernel, TransformedBinary
from kpack.artifact.tree import Artifact, Entry, EntryKind
from kpack.hipfmt import search_path
from kpack.split._archives import ArchiveJob, KernelEntry, SpooledArchive, lay_out_archives
from kpack.split._jobs import frame_level
from kpack.split._parts import PartKernel, cut_grouped, retarget_paths
from kpack.split._plan import GENERIC, SplitOptions, SplitPlan, plan_split
from kpack.split._scan import StageEntry, classify_entries
from kpack.split._spool import spool_kernels
from kpack.transform import FatBinaryInfo, PeTransformPlan, TransformPlan, plan_host_transform

__all__ = ["PlannedSplit", "plan_in_place", "spool_planned"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlannedSplit:
    """One fat artifact and the artifacts its split would write, as values."""

    artifact: Artifact
    plan: SplitPlan
    transformed: tuple[tuple[StageEntry, TransformedBinary], ...]
    archives: tuple[PlannedArchive, ...]
    outputs: tuple[Artifact, ...]  # P_generic first, then P_<target> by target
    notes: tuple[str, ...]
    max_archive_bytes: int = MAX_ARCHIVE_BYTES  # the archives' limit, as the parts were cut

    def describe(self) -> list[str]:
        """The split as lines, for a dry run."""
        host = sum(t.size for _, t in self.transformed)
        before = sum(e.size for e, _ in self.transformed)
        lines = [
            f"split {self.artifact.id.dirname}: {len(self.transformed)} fat binaries "
            f"({before / 1e6:.1f} MB -> {host / 1e6:.1f} MB host code), "
            f"{len(self.archives)} archives, {len(self.plan.databases)} database files"
        ]
        lines += [
            f"  {a.key}: {len(a.kernels)} kernels, "
            f"{a.original_bytes / 1e6:.1f} MB before compression"
            for a in self.archives
        ]
        lines += [
            f"  {db.entry.kernel_name} -> {self.plan.out_name(db.match.base_arch)}"
            for db in self.plan.databases
        ]
        return lines + [f"  note: {n}" for n in self.notes]


def _dirs(art: ArtifactId, stage: str, relpath: str, source: Path) -> list[Entry]:
    """Directory entries for the parents of ``relpath`` (as a walk of the output finds)."""
    parents = list(PurePosixPath(relpath).parents)[:-1]
    return [Entry(str(p), EntryKind.DIR, source, art, stage, mode=0o755) for p in reversed(parents)]


def plan_in_place(
    artifact: Artifact,
    options: SplitOptions,
    *,
    fat_of: Callable[[Path], FatBinaryInfo | None],
) -> PlannedSplit | None:
    """The split of ``artifact`` as output artifacts, or ``None`` if it has nothing to
    split. Each fat binary's transform is planned and verified; nothing is written."""
    scan = classify_entries(
        artifact.path, artifact.stages, artifact.entries, options.handlers, fat_of=fat_of
    )
    prefix = f"{artifact.id.name}_{artifact.id.component}"
    plan = plan_split(scan, prefix, options)
    if not plan.fat and not plan.databases:
        return None

    def out(target: str) -> ArtifactId:
        return ArtifactId(artifact.id.name, artifact.id.component, target)

    generic = out(GENERIC)
    entries = [e.as_entry(generic) for e in plan.generic]
    transforms: list[TransformPlan | PeTransformPlan] = []
    kernels: dict[str, list[PlannedKernel]] = {}
    for fat in plan.fat:
        search = search_path(fat.depth, prefix)
        transform = plan_host_transform(
            fat.source, kernel_name=fat.kernel_name, search_paths=[search]
        )
        transforms.append(transform)
        for kernel in transform.kernels:
            planned = PlannedKernel(fat.stage, fat.kernel_name, kernel)
            kernels.setdefault(kernel.target, []).append(planned)
    parts, used = _cut(kernels, prefix, options)
    transformed: list[tuple[StageEntry, TransformedBinary]] = []
    for fat, transform in zip(plan.fat, transforms, strict=True):
        paths = retarget_paths(used, fat.kernel_name, fat.depth, prefix)
        if paths is not None:  # kernels in later parts: name them too
            transform = plan_host_transform(
                fat.source, kernel_name=fat.kernel_name, search_paths=paths
            )
        content = TransformedBinary(transform)
        transformed.append((fat, content))
        entries.append(fat.as_entry(generic, size=content.size, planned=content))
    stages = plan.output_stages({t: {k.stage for k in p} for t, p in kernels.items()})
    by_target: dict[str, list[Entry]] = {}
    archives: list[PlannedArchive] = []
    for target in sorted(parts):
        for number, ordered in enumerate(parts[target]):
            place = plan.archive_place(target, stages[target], number)
            archive = PlannedArchive(str(place.path), prefix, target, tuple(ordered))
            archives.append(archive)
            source = artifact.path / place.stage / place.relpath  # a label only: planned
            size = archive.original_bytes
            file = Entry(
                place.relpath,
                EntryKind.FILE,
                source,
                out(target),
                place.stage,
                size=size,
                planned=archive,
            )
            by_target.setdefault(target, []).extend(
                [*_dirs(out(target), place.stage, place.relpath, source), file]
            )
    for db in plan.databases:
        art, e = out(db.match.base_arch), db.entry
        by_target.setdefault(db.match.base_arch, []).extend(
            [*_dirs(art, e.stage, e.relpath, e.source), e.as_entry(art)]
        )
    outputs = [Artifact(generic, artifact.path, scan.stages, tuple(entries))]
    for target, target_entries in sorted(by_target.items()):
        unique = {(e.stage, e.relpath): e for e in target_entries}
        ordered_entries = tuple(sorted(unique.values(), key=lambda e: (e.stage, e.relpath)))
        outputs.append(
            Artifact(out(target), artifact.path, tuple(sorted(stages[target])), ordered_entries)
        )
    notes = tuple(plan.notes) + tuple(
        f"{fat.kernel_name}: {note}" for fat, t in transformed for note in t.transform.notes
    )
    notes += tuple(
        f"{plan.out_name(t)}: {len(g)} archive parts, none over {options.max_archive_bytes} bytes"
        for t, g in sorted(parts.items())
        if len(g) > 1
    )
    return PlannedSplit(
        artifact,
        plan,
        tuple(transformed),
        tuple(archives),
        tuple(outputs),
        notes,
        options.max_archive_bytes,
    )


def _cut(
    kernels: dict[str, list[PlannedKernel]], prefix: str, options: SplitOptions
) -> tuple[dict[str, list[list[PlannedKernel]]], dict[str, set[int]]]:
    """Each target's kernels, in archive order, cut in archive parts
    (:mod:`kpack.split._parts`); and the parts each binary's kernels are in."""

    def describe(target: str, k: PlannedKernel) -> tuple[str, PartKernel]:
        toc = {"target": k.kernel.triple, "source_prefix": k.stage}
        name = f"{k.kernel_name}#{k.kernel.index}"
        return k.kernel_name, PartKernel(name, target, k.kernel.size, toc)

    ordered = {
        target: sorted(planned, key=lambda k: (k.kernel_name, k.kernel.index))
        for target, planned in kernels.items()
    }
    limit = options.max_archive_bytes
    return cut_grouped(ordered, describe, prefix=prefix, scheme=options.scheme, limit=limit)


def spool_planned(
    splits: Sequence[PlannedSplit], spool_dir: Path, *, scheme: Scheme, level: int, jobs: int
) -> dict[str, SpooledArchive]:
    """Spool every planned archive's kernels below ``spool_dir`` (each kernel as its archive
    frame, a compressed bundle decoded once, as a stream) and lay the archives out, by key.
    They stream from the spools, never written as files of their own: ``spool_dir`` must
    outlive their consumers."""
    laid: dict[str, SpooledArchive] = {}
    frames = frame_level(scheme, level)
    for number, split in enumerate(splits):
        if not split.archives:
            continue
        spooled: dict[tuple[str, int, str], KernelEntry] = {}
        for index, (fat, content) in enumerate(split.transformed):
            spool = spool_dir / f"{number:04d}-{index:05d}.spool"
            kernels = content.transform.kernels
            written = spool_kernels(kernels, spool, keep_views=True, level=frames, threads=jobs)
            for kernel, sk in zip(kernels, written, strict=True):
                key = (fat.kernel_name, kernel.index, kernel.target)
                spooled[key] = (fat.stage, fat.kernel_name, sk)
        archive_jobs = [
            ArchiveJob(
                a.target,
                Path(a.key),
                tuple(spooled[(k.kernel_name, k.kernel.index, k.kernel.target)] for k in a.kernels),
            )
            for a in split.archives
        ]
        laid_out = lay_out_archives(
            archive_jobs,
            prefix=split.plan.prefix,
            scheme=scheme,
            level=level,
            max_size=split.max_archive_bytes,
        )
        for archive in laid_out:
            laid[str(archive.path)] = archive
            log.info(
                "%s: %d kernels, %d bytes", archive.path.name, archive.kernel_count, archive.size
            )
    return laid
