"""Splitting artifact dirs (private to :mod:`kpack.split`): one (:func:`split_artifact`),
or every one below a parent (:func:`split_artifacts`, ``kpack split-artifacts``). Either
may be one of TheRock's artifact archives, streamed once (:mod:`kpack.artifact.packed`).

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
from kpack.artifact.packed import PackedArtifact, archive_id, naming_archive, unpack_artifact
from kpack.common.cli import default_jobs
from kpack.common.staging import staging
from kpack.databases import Handler
from kpack.errors import ArtifactError, RocmPackagingError, UsageError
from kpack.split._plan import GENERIC, SplitOptions, check_prefix, plan_split, prefix_of
from kpack.split._scan import scan_artifact
from kpack.split._write import SplitResult, execute

__all__ = ["BatchResult", "batch_inputs", "split_artifact", "split_artifacts"]

log = logging.getLogger("kpack.split")  # the package's logger, as callers configure it

#: The staging name of the directory an artifact archive is streamed into.
INPUT_STAGING = "kpack-split-artifacts-input"


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
    jobs: int | None = None,
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
    jobs: int | None,
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
        jobs=default_jobs() if jobs is None else jobs,  # None: the CPU count, as -j
        force=force,
        max_archive_bytes=max_archive_bytes,
        owns=owns,
    )


def _split_one(
    artifact_dir: Path, output_dir: Path, prefix: str | None, options: SplitOptions
) -> SplitResult:
    """One artifact dir, or one of TheRock's artifact archives: streamed once into a
    staging directory inside ``output_dir`` (removed at the end) and split from there,
    errors naming the archive and member (:mod:`kpack.artifact.packed`)."""
    found = archive_id(artifact_dir.name) if not artifact_dir.is_dir() else None
    if found is None:
        return _split_dir(artifact_dir, output_dir, prefix, options)
    art_id, _ = found
    if art_id is None:
        raise ArtifactError(
            "archive name does not parse as {name}_{component}_{target}", path=artifact_dir
        )
    if not artifact_dir.is_file():
        raise UsageError(
            "--artifact-dir is not a directory or an artifact archive", path=artifact_dir
        )
    packed = PackedArtifact(id=art_id, path=artifact_dir, size=artifact_dir.stat().st_size)
    with staging(output_dir, INPUT_STAGING) as spool:
        directory = unpack_artifact(packed, spool)
        with naming_archive(packed, directory):
            return _split_dir(directory, output_dir, prefix, options)


def _split_dir(
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
    """Entries of ``parent_dir`` to split: parseable artifact dirs and TheRock's artifact
    archives (``{name}_{component}_{target}.tar.zst|.tar.xz|.tar``) other than ``*_generic``.

    Checked before anything is split, all problems reported at once: a subdir that is a
    symlink, whose name does not parse (``rand_lib-gfx90a``) or that has no
    ``artifact_manifest.txt`` is an error (rocm-kpack drops such dirs without a word).
    Regular files and hidden entries are skipped with a notice. ``*_generic`` artifacts are
    not split: rocm-kpack's batch mode skips them too (``split_artifacts.py``:
    ``parse_artifact_name`` gives None for the target family ``generic``, and
    ``batch_split`` passes over the dir), since in TheRock's builds a generic artifact holds
    host files and fat binaries come in family-named ones (``blas_lib_gfx94X-dcgpu``). A fat
    ``*_generic`` artifact (as the sample and release benchmark trees hold) is split with
    ``--artifact-dir``.
    """
    if not parent_dir.is_dir():
        raise UsageError("--batch-artifact-parent-dir is not a directory", path=parent_dir)
    chosen: list[Path] = []
    problems: list[str] = []
    children = sorted(parent_dir.iterdir(), key=lambda p: p.name)
    names = {c.name for c in children}
    for child in children:
        found = archive_id(child.name)
        if found is not None and child.is_file() and not child.is_symlink():
            _batch_archive(child, found[0], names, chosen, problems)
        elif child.is_symlink():
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


def _batch_archive(
    child: Path, art_id: ArtifactId | None, names: set[str], chosen: list[Path], problems: list[str]
) -> None:
    """An artifact archive among the batch's inputs: split like its directory would be;
    the same artifact as a directory or as another archive too is an error."""
    if art_id is None:
        problems.append(
            f"{child.name}: archive name does not parse as {{name}}_{{component}}_{{target}}"
        )
        return
    twins = sorted(
        n for n in names if n != child.name and (n == art_id.dirname or _stem(n) == art_id.dirname)
    )
    if twins:
        problems.append(f"{child.name}: the same artifact as {', '.join(twins)}; keep one form")
    elif art_id.target == GENERIC:
        log.info("batch: skipping %s (generic artifacts are not split)", child)
    else:
        chosen.append(child)


def _stem(name: str) -> str | None:
    found = archive_id(name)
    return None if found is None or found[0] is None else found[0].dirname


def split_artifacts(
    parent_dir: Path,
    output_dir: Path,
    *,
    handlers: Sequence[Handler] = (),
    gpu_targets: Sequence[str] | None = None,
    scheme: Scheme = "zstd-per-kernel",
    level: int = DEFAULT_LEVEL,
    jobs: int | None = None,
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
        by_prefix.setdefault(prefix_of(_stem(path.name) or path.name), []).append(path)
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
