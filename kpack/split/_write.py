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
from kpack.artifact.tree import Entry, EntryKind
from kpack.common.safepath import Root, windows_name_problem
from kpack.errors import ArtifactError
from kpack.pe.image import is_pe_file
from kpack.split._archives import remove_spools
from kpack.split._fat import FatSplit, split_fat
from kpack.split._jobs import FatOutcome
from kpack.split._plan import GENERIC, SplitOptions, SplitPlan, fat_jobs

__all__ = ["ArchiveOutput", "BinaryReport", "SplitResult", "execute"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class ArchiveOutput:
    target: str
    path: Path
    kernel_count: int
    original_bytes: int
    size: int


@dataclass(frozen=True, kw_only=True)
class BinaryReport:
    kernel_name: str
    kernels: int  # written to archives
    skipped: int  # outside --gpu-targets
    removed_bytes: int
    notes: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
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
    dirs: list[Entry] = []
    for entry in plan.generic:
        rel = f"{entry.stage}/{entry.relpath}"
        if entry.kind is EntryKind.DIR:
            out.mkdir(rel)
            dirs.append(entry)
        elif entry.kind is EntryKind.SYMLINK:
            out.symlink(rel, entry.link or "", what="symlink")
        else:
            copy_file(entry.source, out.mkdir_parent(rel), entry.mode)
    for entry in plan.fat:
        out.mkdir_parent(f"{entry.stage}/{entry.relpath}")
    for entry in reversed(dirs):  # modes last, children before parents
        os.chmod(out.join(f"{entry.stage}/{entry.relpath}"), entry.mode)
    write_manifest(root, plan.scan.stages)


def _write_database(entry: Entry, root: Path) -> Path:
    out = Root(root, error=ArtifactError)
    rel = f"{entry.stage}/{entry.relpath}"
    if entry.link is not None:
        return out.symlink(rel, entry.link, what="database symlink")
    dest = out.mkdir_parent(rel)
    copy_file(entry.source, dest, entry.mode)
    return dest


def _part_notes(plan: SplitPlan, split: FatSplit) -> list[str]:
    """A line per target cut in archive parts and per binary whose marker names them."""
    notes = [
        f"{plan.out_name(t)}: {n} archive parts, none over the limit every reader loads"
        for t, n in split.plan.parted()
    ]
    for outcome, paths in zip(split.outcomes, split.plan.search_paths, strict=True):
        if paths is not None:
            name = outcome.job.kernel_name
            notes.append(f"{name}: its kernels are in archive parts; searches {list(paths)}")
    return notes


def _write_archives(split: FatSplit, staging: Staging) -> list[ArchiveOutput]:
    """Write every archive where :meth:`SplitPlan.archive_place` put it."""
    outputs = []
    for archive in split.archives:
        summary = archive.write()
        outputs.append(
            ArchiveOutput(
                target=archive.target,
                path=staging.output_dir / archive.path.relative_to(staging.root),
                kernel_count=summary.kernel_count,
                original_bytes=summary.original_bytes,
                size=summary.size,
            )
        )
    return outputs


def _report(outcome: FatOutcome) -> BinaryReport:
    return BinaryReport(
        kernel_name=outcome.job.kernel_name,
        kernels=len(outcome.kernels),
        skipped=outcome.skipped,
        removed_bytes=outcome.removed_bytes,
        notes=outcome.notes,
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
        split = split_fat(
            jobs,
            workers=options.jobs,
            spec=options.archive_spec(plan.prefix),
            place=lambda slot: staging.root / plan.archive_place(slot).path,
        )
        _check_windows_targets(split.outcomes)
        stages = plan.output_stages(split.plan.kernel_stages())
        contributors = {plan.out_name(t): s for t, s in stages.items()}
        staging.check_free([generic_name, *contributors])
        moved = [
            (db.kernel_name, _write_database(db.entry, staging.dir(plan.out_name(db.target))))
            for db in plan.databases
        ]
        archives = _write_archives(split, staging)
        remove_spools([j.spool for j in jobs if j.spool is not None])
        for name, given in contributors.items():
            for stage in given:  # a stage that only gave kernels has no files here
                make_dirs(staging.dir(name), stage)
            write_manifest(staging.dir(name), given)
        published = staging.publish([generic_name, *contributors])
    final_moved = tuple((k, output_dir / p.relative_to(staging.root)) for k, p in moved)
    outcomes = split.outcomes
    notes = [*plan.notes, *(n for o in outcomes for n in o.notes), *_part_notes(plan, split)]
    return SplitResult(
        artifact_dir=plan.scan.path,
        prefix=plan.prefix,
        outputs=tuple(published),
        archives=tuple(archives),
        binaries=tuple(_report(o) for o in outcomes),
        databases=final_moved,
        notes=tuple(notes),
    )
