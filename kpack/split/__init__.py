"""Artifact splitter: fat artifacts -> host-only ``P_generic`` + per-target ``P_<target>``.

Spec: kpack.md §5 and artifact-tree.md §6. For an artifact with prefix ``P``:

- ``P_generic/<stage>/...``: everything except database files; every fat binary is
  transformed straight from the input (HIPK wrappers, ``.rocm_kpack_ref`` marker whose
  search path is ``'../' x depth + '.kpack/P_@GFXARCH@.kpack'``). Its manifest lists every
  processed stage dir.
- ``P_<target>/<first contributing stage>/.kpack/P_<target>.kpack``: one archive per full
  target id for the whole artifact, keys ``<stage>/<relpath>#<wrapper index>``.
- ``P_<base arch>/<stage>/<relpath>``: database files claimed by a handler.

Scan and classify first (a frozen value), then write everything under ``OUT/.partial-*``
and publish the finished dirs together. Inputs are never modified.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kpack.archive import Scheme
from kpack.artifact.names import ArtifactId
from kpack.common.safepath import Root, windows_name_problem
from kpack.databases import Handler
from kpack.errors import ArtifactError, RocmPackagingError, UsageError
from kpack.pe.image import is_pe_file
from kpack.split._archives import (
    ArchiveJob,
    KernelEntry,
    SpooledArchive,
    lay_out_archives,
    remove_spools,
    write_archives,
)
from kpack.split._inplan import PlannedSplit, plan_in_place, spool_planned
from kpack.split._jobs import (
    FatJob,
    FatOutcome,
    HostContent,
    frame_level,
    group_by_target,
    host_size,
    host_source,
    run_fat_jobs,
)
from kpack.split._output import Staging, copy_file, make_dirs, write_manifest
from kpack.split._plan import (
    GENERIC,
    DatabaseFile,
    SplitOptions,
    SplitPlan,
    check_prefix,
    fat_jobs,
    plan_split,
    prefix_of,
)
from kpack.split._scan import Kind, StageEntry, classify_entries, scan_artifact
from kpack.split._spool import spool_kernels
from kpack.split._verify import VerifyReport, find_archives, verify_binary

__all__ = [
    "ArchiveJob",
    "ArchiveOutput",
    "BatchResult",
    "BinaryReport",
    "DatabaseFile",
    "FatJob",
    "FatOutcome",
    "HostContent",
    "KernelEntry",
    "Kind",
    "PlannedSplit",
    "SplitOptions",
    "SplitPlan",
    "SplitResult",
    "SpooledArchive",
    "StageEntry",
    "VerifyReport",
    "batch_inputs",
    "classify_entries",
    "find_archives",
    "frame_level",
    "group_by_target",
    "host_size",
    "host_source",
    "lay_out_archives",
    "plan_in_place",
    "plan_split",
    "prefix_of",
    "run_fat_jobs",
    "split_artifact",
    "split_artifacts",
    "spool_kernels",
    "spool_planned",
    "verify_binary",
]

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


@dataclass(frozen=True)
class BatchResult:
    results: tuple[SplitResult, ...]
    failures: tuple[tuple[Path, str], ...]

    def raise_for_failures(self) -> None:
        if self.failures:
            raise ArtifactError(
                f"{len(self.failures)} of {len(self.failures) + len(self.results)} artifacts "
                "failed to split",
                problems=[f"{path}: {message}" for path, message in self.failures],
            )


# --- writing --------------------------------------------------------------------------------


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


def _write_archives(
    plan: SplitPlan,
    staging: Staging,
    by_target: dict[str, list[KernelEntry]],
    stages: dict[str, set[str]],
    options: SplitOptions,
) -> list[ArchiveOutput]:
    """One archive per target, where :meth:`SplitPlan.archive_place` puts it."""
    jobs = []
    for target in sorted(by_target):
        place = plan.archive_place(target, stages[target])
        path = staging.root / place.path
        jobs.append(ArchiveJob(target, path, tuple(by_target[target])))
    summaries = write_archives(jobs, prefix=plan.prefix, scheme=options.scheme, level=options.level)
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


def _execute(plan: SplitPlan, output_dir: Path, options: SplitOptions) -> SplitResult:
    generic_name = plan.out_name(GENERIC)
    with Staging(output_dir, force=options.force, protected=[plan.scan.path]) as staging:
        staging.check_free([generic_name])
        generic_root = staging.dir(generic_name)
        _write_generic(plan, generic_root)
        spool_dir = staging.dir(".spool")
        spool_dir.mkdir()
        jobs = fat_jobs(plan, generic_root, spool_dir, options)
        outcomes = run_fat_jobs(jobs, options.jobs)
        _check_windows_targets(outcomes)
        by_target = group_by_target(outcomes)
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
        archives = _write_archives(plan, staging, by_target, stages, options)
        remove_spools([j.spool for j in jobs])
        for name, given in contributors.items():
            for stage in given:  # a stage that only gave kernels has no files here
                make_dirs(staging.dir(name), stage)
            write_manifest(staging.dir(name), given)
        published = staging.publish([generic_name, *contributors])
    final_moved = tuple((k, output_dir / p.relative_to(staging.root)) for k, p in moved)
    notes = list(plan.notes) + [n for o in outcomes for n in o.notes]
    return SplitResult(
        plan.scan.path,
        plan.prefix,
        tuple(published),
        tuple(archives),
        tuple(_report(o) for o in outcomes),
        final_moved,
        tuple(notes),
    )


# --- public entry points --------------------------------------------------------------------


def split_artifact(
    artifact_dir: Path,
    output_dir: Path,
    *,
    prefix: str | None = None,
    handlers: Sequence[Handler] = (),
    gpu_targets: Sequence[str] | None = None,
    scheme: Scheme = "zstd-per-kernel",
    level: int = 3,
    jobs: int = 2,
    force: bool = False,
) -> SplitResult:
    """Split one artifact dir into ``output_dir`` (see the module docstring).

    ``prefix`` defaults to the dir name minus its last ``_`` field. Raises a
    :class:`~kpack.errors.RocmPackagingError` subclass on bad input, leaving no output dir.
    """
    options = SplitOptions(
        tuple(handlers),
        tuple(gpu_targets) if gpu_targets is not None else None,
        scheme,
        level,
        jobs,
        force,
    )
    return _split_one(Path(artifact_dir), Path(output_dir), prefix, options)


def _split_one(
    artifact_dir: Path, output_dir: Path, prefix: str | None, options: SplitOptions
) -> SplitResult:
    if not (artifact_dir / "artifact_manifest.txt").is_file():
        raise ArtifactError("not an artifact dir (no artifact_manifest.txt)", path=artifact_dir)
    prefix = check_prefix(prefix if prefix is not None else prefix_of(artifact_dir.name))
    out = output_dir.absolute()
    if out == artifact_dir.absolute() or artifact_dir.absolute() in out.parents:
        raise UsageError(f"output dir {out} lies inside the artifact dir {artifact_dir}")
    scan = scan_artifact(artifact_dir, options.handlers)
    plan = plan_split(scan, prefix, options)
    log.info(
        "%s: %d stage dirs, %d fat binaries, %d database files",
        artifact_dir,
        len(scan.stages),
        len(plan.fat),
        len(plan.databases),
    )
    return _execute(plan, out, options)


def batch_inputs(parent_dir: Path) -> list[Path]:
    """Subdirs of ``parent_dir`` to split: parseable artifact dirs other than ``*_generic``.

    Checked before anything is split, all problems reported at once: a subdir that is a
    symlink, whose name does not parse (``rand_lib-gfx90a``) or that has no
    ``artifact_manifest.txt`` is an error (rocm-kpack drops such dirs without a word).
    Regular files and hidden entries are skipped with a notice; ``*_generic`` artifacts are
    not split, as in rocm-kpack.
    """
    if not parent_dir.is_dir():
        raise ArtifactError("batch parent dir does not exist", path=parent_dir)
    chosen: list[Path] = []
    problems: list[str] = []
    for child in sorted(parent_dir.iterdir(), key=lambda p: p.name):
        if child.is_symlink():
            problems.append(f"{child.name}: is a symlink (artifact dirs are never followed)")
        elif child.name.startswith(".") or not child.is_dir():
            log.info("batch: skipping %s (not an artifact directory)", child)
        elif ArtifactId.parse(child.name) is None:
            problems.append(
                f"{child.name}: name does not parse as {{name}}_{{component}}_{{target}}"
            )
        elif not (child / "artifact_manifest.txt").exists():
            problems.append(f"{child.name}: has no artifact_manifest.txt")
        elif child.name.endswith(f"_{GENERIC}"):
            log.info("batch: skipping %s (generic artifacts are not split)", child)
        else:
            chosen.append(child)
    if problems:
        raise ArtifactError("not artifact directories", path=parent_dir, problems=problems)
    return chosen


def split_artifacts(
    parent_dir: Path,
    output_dir: Path,
    *,
    handlers: Sequence[Handler] = (),
    gpu_targets: Sequence[str] | None = None,
    scheme: Scheme = "zstd-per-kernel",
    level: int = 3,
    jobs: int = 2,
    force: bool = False,
    progress: Callable[[Path], None] | None = None,
) -> BatchResult:
    """Split every artifact below ``parent_dir``; collect failures instead of stopping."""
    options = SplitOptions(
        tuple(handlers),
        tuple(gpu_targets) if gpu_targets is not None else None,
        scheme,
        level,
        jobs,
        force,
    )
    inputs = batch_inputs(Path(parent_dir))
    by_prefix: dict[str, list[Path]] = {}
    for path in inputs:
        by_prefix.setdefault(prefix_of(path.name), []).append(path)
    results: list[SplitResult] = []
    failures: list[tuple[Path, str]] = []
    for prefix, paths in sorted(by_prefix.items()):
        if len(paths) > 1:
            names = ", ".join(p.name for p in paths)
            failures += [(p, f"prefix {prefix!r} is shared by {names}") for p in paths]
            continue
        if progress is not None:
            progress(paths[0])
        try:
            results.append(_split_one(paths[0], Path(output_dir), prefix, options))
        except RocmPackagingError as exc:
            log.error("%s: %s", paths[0], exc)
            failures.append((paths[0], str(exc)))
    return BatchResult(tuple(results), tuple(failures))
