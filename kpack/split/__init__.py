"""Artifact splitter: fat artifacts -> host-only ``P_generic`` + per-target ``P_<target>``.

Spec: kpack.md §5 and artifact-tree.md §6. For an artifact with prefix ``P``:

- ``P_generic/<stage>/...``: everything except database files; every fat binary is
  transformed straight from the input (HIPK wrappers, ``.rocm_kpack_ref`` marker whose
  search path is ``'../' x depth + '.kpack/P_@GFXARCH@.kpack'``). Its manifest lists every
  processed stage dir.
- ``P_<target>/<first contributing stage>/.kpack/P_<target>.kpack``: one archive per full
  target id for the whole artifact, keys ``<stage>/<relpath>#<wrapper index>``. An archive
  that would pass what every reader loads (2 GiB, HRX) is cut in parts
  ``.kpack/P-part<k>_<target>.kpack`` beside it, and the markers of the binaries with kernels
  in them list those search paths too (the rule: :mod:`kpack.split._parts`).
- ``P_<base arch>/<stage>/<relpath>``: database files claimed by a handler.

Scan and classify first (a frozen value), then write everything under ``OUT/.partial-*``
and publish the finished dirs together. Inputs are never modified. A re-run into the same
``OUT`` replaces what the last run wrote (recorded in ``OUT/.kpack-split-P.json``) and
nothing else without ``force``.

The entry points, each with the values it takes and returns:

- :func:`split_artifact`, :func:`split_artifacts` (``kpack split-artifacts``), with
  :class:`SplitOptions`, returning :class:`SplitResult`, :class:`BatchResult`;
- :func:`split_fat`: fat binaries (:class:`FatJob`) split on the parallel runner with their
  kernels spooled and their archives (:class:`ArchiveSpec`) laid out, :class:`FatSplit`
  (the wheel splitter streams :class:`HostContent` and each :class:`SpooledArchive` into
  its wheels);
- :func:`plan_in_place` and :func:`spool_planned`: the split planned as values
  (:class:`PlannedSplit`) for the package builder, spooled when it applies its plan;
- :func:`recombine_artifacts` (with :func:`load_recombine_config`), the reduce phase:
  shards' split artifacts regrouped into package groups (:class:`RecombineResult`).

However the kernels arrive, they become archives by one function,
:func:`kpack.split._pipeline.plan_archives`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kpack.archive import DEFAULT_LEVEL, MAX_ARCHIVE_BYTES, Scheme
from kpack.artifact.names import ArtifactId
from kpack.databases import Handler
from kpack.errors import ArtifactError, RocmPackagingError, UsageError
from kpack.split._archives import SpooledArchive
from kpack.split._fat import FatSplit, split_fat
from kpack.split._inplan import PlannedSplit, plan_in_place, spool_planned
from kpack.split._jobs import FatJob, HostContent
from kpack.split._pipeline import ArchiveSpec
from kpack.split._plan import GENERIC, SplitOptions, check_prefix, plan_split, prefix_of
from kpack.split._recombine import RecombineResult, load_recombine_config, recombine_artifacts
from kpack.split._scan import scan_artifact
from kpack.split._write import SplitResult, execute

__all__ = [
    "ArchiveSpec",
    "BatchResult",
    "FatJob",
    "FatSplit",
    "HostContent",
    "PlannedSplit",
    "RecombineResult",
    "SplitOptions",
    "SplitResult",
    "SpooledArchive",
    "load_recombine_config",
    "plan_in_place",
    "recombine_artifacts",
    "split_artifact",
    "split_artifacts",
    "split_fat",
    "spool_planned",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
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


# --- public entry points --------------------------------------------------------------------


def _options(
    handlers: Sequence[Handler],
    gpu_targets: Sequence[str] | None,
    scheme: Scheme,
    level: int,
    jobs: int,
    force: bool,
    max_archive_bytes: int,
    owns: str = "recorded",
) -> SplitOptions:
    """The checked options of one run (sequences as tuples)."""
    return SplitOptions(
        handlers=tuple(handlers),
        gpu_targets=tuple(gpu_targets) if gpu_targets is not None else None,
        scheme=scheme,
        level=level,
        jobs=jobs,
        force=force,
        max_archive_bytes=max_archive_bytes,
        owns=owns,
    )


def split_artifact(
    artifact_dir: Path,
    output_dir: Path,
    *,
    prefix: str | None = None,
    handlers: Sequence[Handler] = (),
    gpu_targets: Sequence[str] | None = None,
    scheme: Scheme = "zstd-per-kernel",
    level: int = DEFAULT_LEVEL,
    jobs: int = 2,
    force: bool = False,
    max_archive_bytes: int = MAX_ARCHIVE_BYTES,
    owns: str = "recorded",
) -> SplitResult:
    """Split one artifact dir into ``output_dir`` (see the module docstring).

    ``prefix`` defaults to the dir name minus its last ``_`` field. Raises a
    :class:`~kpack.errors.RocmPackagingError` subclass on bad input, leaving no output dir.
    ``max_archive_bytes``: a target whose archive would be larger gets archive parts.
    """
    options = _options(handlers, gpu_targets, scheme, level, jobs, force, max_archive_bytes, owns)
    return _split_one(Path(artifact_dir), Path(output_dir), prefix, options)


def _split_one(
    artifact_dir: Path, output_dir: Path, prefix: str | None, options: SplitOptions
) -> SplitResult:
    if not (artifact_dir / "artifact_manifest.txt").is_file():
        if not artifact_dir.is_dir():  # the path given is not there: a usage error
            raise UsageError("--artifact-dir is not a directory", path=artifact_dir)
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
    return execute(plan, out, options)


def batch_inputs(parent_dir: Path) -> list[Path]:
    """Subdirs of ``parent_dir`` to split: parseable artifact dirs other than ``*_generic``.

    Checked before anything is split, all problems reported at once: a subdir that is a
    symlink, whose name does not parse (``rand_lib-gfx90a``) or that has no
    ``artifact_manifest.txt`` is an error (rocm-kpack drops such dirs without a word).
    Regular files and hidden entries are skipped with a notice; ``*_generic`` artifacts are
    not split, as in rocm-kpack.
    """
    if not parent_dir.is_dir():
        raise UsageError("--batch-artifact-parent-dir is not a directory", path=parent_dir)
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
    level: int = DEFAULT_LEVEL,
    jobs: int = 2,
    force: bool = False,
    progress: Callable[[Path], None] | None = None,
    max_archive_bytes: int = MAX_ARCHIVE_BYTES,
    owns: str = "recorded",
) -> BatchResult:
    """Split every artifact below ``parent_dir``; collect failures instead of stopping."""
    options = _options(handlers, gpu_targets, scheme, level, jobs, force, max_archive_bytes, owns)
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
    return BatchResult(results=tuple(results), failures=tuple(failures))
