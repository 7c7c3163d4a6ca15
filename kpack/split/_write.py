"""Writing one artifact's split (kpack.md §5): stage, transform, spool, archive, publish.

The plan (:mod:`._plan`) says what goes where; :func:`execute` writes it under
``OUT/.partial-*`` (:class:`kpack.artifact.output.Staging`): the generic output with every
fat binary transformed straight from the input by the parallel job runner (:mod:`._jobs`),
database files moved to ``P_<base arch>``, one archive per target streamed from the spools
to where :meth:`SplitPlan.archive_place` puts it, then every finished dir published
together.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kpack.artifact.output import Staging, copy_file, make_dirs, write_manifest
from kpack.common.safepath import Root, windows_name_problem
from kpack.errors import ArtifactError
from kpack.pe.image import is_pe_file
from kpack.split._archives import ArchiveJob, remove_spools, write_archives
from kpack.split._jobs import FatOutcome, group_by_target, retarget, run_fat_jobs
from kpack.split._parts import Parts, cut_entries, retarget_paths
from kpack.split._plan import GENERIC, SplitOptions, SplitPlan, fat_jobs
from kpack.split._scan import Kind, StageEntry

__all__ = ["ArchiveOutput", "BinaryReport", "SplitResult", "execute"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ArchiveOutput:
    target: str
    path: Path
    kernel_count: int
    original_bytes: int
    size: int


@dataclass(frozen=True)
class BinaryReport:
    kernel_name: str
    kernels: int  # written to archives
    skipped: int  # outside --gpu-targets
    removed_bytes: int
    notes: tuple[str, ...]


@dataclass(frozen=True)
class SplitResult:
    artifact_dir: Path
    prefix: str
    outputs: tuple[Path, ...]  # published artifact dirs, sorted
    archives: tuple[ArchiveOutput, ...]
    binaries: tuple[BinaryReport, ...]
    databases: tuple[tuple[str, Path], ...]  # (kernel_name, destination) of moved files
    notes: tuple[str, ...]


def _write_generic(plan: SplitPlan, root: Path) -> None:
    """Write the generic artifact: every path through :class:`~kpack.common.safepath.Root`, so no
    entry, symlink or symlink target can land outside ``root`` whatever the input held."""
    out = Root(root, error=ArtifactError)
    for stage in plan.scan.stages:
        out.mkdir(stage, what="stage directory")
    dirs: list[StageEntry] = []
    for entry in plan.generic:
        rel = f"{entry.stage}/{entry.relpath}"
        if entry.kind is Kind.DIR:
            out.mkdir(rel)
            dirs.append(entry)
        elif entry.kind is Kind.SYMLINK:
            out.symlink(rel, entry.link or "", what="symlink")
        else:
            copy_file(entry.source, out.mkdir_parent(rel), entry.mode)
    for entry in plan.fat:
        out.mkdir_parent(f"{entry.stage}/{entry.relpath}")
    for entry in reversed(dirs):  # modes last, children before parents
        os.chmod(out.join(f"{entry.stage}/{entry.relpath}"), entry.mode)
    write_manifest(root, plan.scan.stages)


def _write_database(entry: StageEntry, root: Path) -> Path:
    out = Root(root, error=ArtifactError)
    rel = f"{entry.stage}/{entry.relpath}"
    if entry.link is not None:
        return out.symlink(rel, entry.link, what="database symlink")
    dest = out.mkdir_parent(rel)
    copy_file(entry.source, dest, entry.mode)
    return dest


def _retarget_markers(
    plan: SplitPlan, outcomes: Sequence[FatOutcome], parts: Parts, used: dict[str, set[int]]
) -> list[str]:
    """Transform again, with a search path per further part, each binary that has kernels
    in a part after the first (the first transform named only the usual archive)."""
    notes = [
        f"{plan.out_name(t)}: {len(g)} archive parts, none over the limit every reader loads"
        for t, g in sorted(parts.items())
        if len(g) > 1
    ]
    for outcome in outcomes:
        job = outcome.job
        paths = retarget_paths(used, job.kernel_name, job.relpath.count("/"), plan.prefix)
        if paths is None:
            continue
        retarget(outcome, paths)  # writes job.dest again
        notes.append(f"{job.kernel_name}: its kernels are in archive parts; searches {paths}")
    return notes


def _write_archives(
    plan: SplitPlan,
    staging: Staging,
    parts: Parts,
    stages: dict[str, set[str]],
    options: SplitOptions,
) -> list[ArchiveOutput]:
    """One archive per target and part, where :meth:`SplitPlan.archive_place` puts it."""
    jobs = []
    for target in sorted(parts):
        for number, entries in enumerate(parts[target]):
            place = plan.archive_place(target, stages[target], number)
            path = staging.root / place.path
            jobs.append(ArchiveJob(target, path, tuple(entries)))
    summaries = write_archives(
        jobs,
        prefix=plan.prefix,
        scheme=options.scheme,
        level=options.level,
        max_size=options.max_archive_bytes,
    )
    return [
        ArchiveOutput(
            job.target,
            staging.output_dir / job.path.relative_to(staging.root),
            summary.kernel_count,
            summary.original_bytes,
            summary.size,
        )
        for job, summary in zip(jobs, summaries, strict=True)
    ]


def _report(outcome: FatOutcome) -> BinaryReport:
    return BinaryReport(
        outcome.job.kernel_name,
        len(outcome.kernels),
        outcome.skipped,
        outcome.removed_bytes,
        outcome.notes,
    )


def _check_windows_targets(outcomes: Sequence[FatOutcome]) -> None:
    """A Windows (PE) binary's kernels for a feature-qualified target would need
    ``P_gfx90a:xnack+`` and ``…_gfx90a:xnack+.kpack``, names Windows cannot create (``:``
    opens an NTFS stream); neither TheRock nor rocm-kpack defines another spelling, so the
    split stops (nothing is published) instead of writing names that install wrong."""
    problems = sorted(
        f"{o.job.kernel_name}: {target}"
        for o in outcomes
        if is_pe_file(o.job.source)
        for target in {k.target for k in o.kernels}
        if windows_name_problem(target) is not None
    )
    if problems:
        raise ArtifactError(
            "PE (Windows) binaries with code for feature-qualified targets: their artifact and "
            "archive names would hold ':', which Windows file systems reject",
            problems=problems,
        )


def execute(plan: SplitPlan, output_dir: Path, options: SplitOptions) -> SplitResult:
    generic_name = plan.out_name(GENERIC)
    staging = Staging(
        output_dir,
        force=options.force,
        protected=[plan.scan.path],
        record=output_dir / f".kpack-split-{plan.prefix}.json",
        owns=options.owns,
    )
    with staging:
        staging.check_free([generic_name])
        generic_root = staging.dir(generic_name)
        _write_generic(plan, generic_root)
        spool_dir = staging.dir(".spool")
        spool_dir.mkdir()
        jobs = fat_jobs(plan, generic_root, spool_dir, options)
        outcomes = run_fat_jobs(jobs, options.jobs)
        _check_windows_targets(outcomes)
        by_target = group_by_target(outcomes)
        parts, used = cut_entries(
            by_target,
            prefix=plan.prefix,
            scheme=options.scheme,
            limit=options.max_archive_bytes,
        )
        part_notes = _retarget_markers(plan, outcomes, parts, used)
        stages = plan.output_stages({t: {s for s, _, _ in e} for t, e in by_target.items()})
        contributors = {plan.out_name(t): s for t, s in stages.items()}
        staging.check_free([generic_name, *contributors])
        moved = [
            (
                db.entry.kernel_name,
                _write_database(db.entry, staging.dir(plan.out_name(db.match.base_arch))),
            )
            for db in plan.databases
        ]
        archives = _write_archives(plan, staging, parts, stages, options)
        remove_spools([j.spool for j in jobs])
        for name, given in contributors.items():
            for stage in given:  # a stage that only gave kernels has no files here
                make_dirs(staging.dir(name), stage)
            write_manifest(staging.dir(name), given)
        published = staging.publish([generic_name, *contributors])
    final_moved = tuple((k, output_dir / p.relative_to(staging.root)) for k, p in moved)
    notes = list(plan.notes) + [n for o in outcomes for n in o.notes] + part_notes
    return SplitResult(
        plan.scan.path,
        plan.prefix,
        tuple(published),
        tuple(archives),
        tuple(_report(o) for o in outcomes),
        final_moved,
        tuple(notes),
    )
