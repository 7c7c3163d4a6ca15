"""Splitting artifact dirs (private to :mod:`kpack.split`): one (:func:`split_artifact`),
or every one below a parent (:func:`split_artifacts`, ``kpack split-artifacts``).

Each is scanned and classified (:mod:`._scan`), planned (:mod:`._plan`) and written
(:mod:`._write`); see :mod:`kpack.split` for what a split writes.
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
from kpack.split._plan import GENERIC, SplitOptions, check_prefix, plan_split, prefix_of
from kpack.split._scan import scan_artifact
from kpack.split._write import SplitResult, execute

__all__ = ["BatchResult", "batch_inputs", "split_artifact", "split_artifacts"]

log = logging.getLogger("kpack.split")  # the package's logger, as callers configure it


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
    options = _options(
        handlers,
        gpu_targets,
        scheme=scheme,
        level=level,
        jobs=jobs,
        force=force,
        max_archive_bytes=max_archive_bytes,
        owns=owns,
    )
    return _split_one(Path(artifact_dir), Path(output_dir), prefix, options)


def _options(
    handlers: Sequence[Handler],
    gpu_targets: Sequence[str] | None,
    *,
    scheme: Scheme,
    level: int,
    jobs: int,
    force: bool,
    max_archive_bytes: int,
    owns: str,
) -> SplitOptions:
    """The checked options of one run, its sequences as tuples."""
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
    options = _options(
        handlers,
        gpu_targets,
        scheme=scheme,
        level=level,
        jobs=jobs,
        force=force,
        max_archive_bytes=max_archive_bytes,
        owns=owns,
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
    return BatchResult(results=tuple(results), failures=tuple(failures))
