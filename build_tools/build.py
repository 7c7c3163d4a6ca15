"""Apply a build plan: the only stage that writes.

Everything goes into a temporary directory inside ``--dest-dir``, then
:func:`kpack.common.outputs.publish` moves it into place, all or nothing: what an earlier
run of the builder wrote there (listed in :data:`RECORD`, beside ``dist/``) is replaced,
every other file is left alone, and a file the builder did not write is never overwritten
without ``--force``. A failed or interrupted run leaves the destination as it was.
With ``index``, the PEP 503/658/691 simple repository of ``dist/``
(:func:`build_tools.pep503.stage_dist_index`: flat, or one per family for a multi-family
legacy set) is staged beside it and published with the packages in one step.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from build_tools.pep503 import stage_dist_index
from kpack.common import cancel
from kpack.common.budget import WheelSize, check_budget
from kpack.common.outputs import (
    Publication,
    check_outputs,
    publish_all,
    record_beside,
    staging,
)
from kpack.common.progress import Progress
from kpack.common.threadpool import ThreadPool
from kpack.split import SpooledArchive
from kpack.wheelfile import (
    DeflateMemo,
    Member,
    libdeflate,
    normalize_dist_name,
    normalize_version,
    wheel_filename,
    write_sdist,
    write_wheel,
)

from .devel import write_devel_tar
from .kpack_split import spool_planned_archives
from .payload import PayloadFile
from .plan import BuildPlan, DistKind, PlannedPackage
from .report import REPORT_JSON, REPORT_MD, make_legacy_report, make_report, render_markdown

__all__ = ["ARCHIVES", "RECORD", "TOOL", "Built", "apply_plan"]

#: Where apply spools the planned archives' kernels, inside its temporary directory.
ARCHIVES = "kpack-spool"
#: What the builder wrote into ``--dest-dir`` (beside ``dist/``): the outputs a re-run
#: replaces; nothing else there is touched.
RECORD = ".build-python-packages.json"
TOOL = "build-python-packages"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Built:
    """One package written: ``path`` is relative to ``--dest-dir``."""

    package: PlannedPackage
    path: Path
    size: int


Archives = Mapping[str, SpooledArchive]


@dataclass(frozen=True, kw_only=True)
class _WriteJob:
    """What writing each package of one build reads: the plan, the staging directory
    (``tmp``), the spooled archives by key, the progress display and the deflated chunks
    of the devel tarballs (one per family, all but their last links alike)."""

    plan: BuildPlan
    tmp: Path
    archives: Archives
    progress: Progress | None
    memo: DeflateMemo


def _member(file: PayloadFile, archives: Archives) -> Member:
    return Member(arcname=file.arcname, source=file.content(archives), executable=file.executable)


def _entry_points(pkg: PlannedPackage) -> bytes | None:
    if not pkg.entry_points:
        return None
    lines = ["[console_scripts]"] + [f"{n} = {t}" for n, t in sorted(pkg.entry_points)]
    return ("\n".join(lines) + "\n").encode()


def _devel_member(plan: BuildPlan, pkg: PlannedPackage, work: Path) -> Member:
    opts = plan.options
    tar_path = work / Path(pkg.devel_tar_name).name
    write_devel_tar(tar_path, pkg.devel_tar, epoch=opts.epoch, xz=opts.devel_tarball_compression)
    # every family's tarball holds the same files, only its links differ: its chunks repeat
    shared = not opts.devel_tarball_compression
    return Member(arcname=pkg.devel_tar_name, source=tar_path, shared=shared)


def _make_below(root: Path, directory: Path) -> None:
    """Make ``directory`` and its parents up to ``root``, never ``root`` itself: a writer
    still running when a failed run's staging is gone fails here instead of making the
    staging again (and leaving it behind)."""
    for part in reversed([directory, *directory.parents]):
        if part != root and part.is_relative_to(root):
            part.mkdir(exist_ok=True)  # no parents: a missing root is an error


def _write_package(job: _WriteJob, pkg: PlannedPackage, out_dir: Path, work: Path) -> Path:
    opts = job.plan.options
    _make_below(job.tmp, out_dir)
    if pkg.kind is DistKind.SELECTOR:
        return write_sdist(
            out_dir,
            dist_name=pkg.dist_name,
            version=opts.version,
            files=[_member(f, job.archives) for f in pkg.payload],
            pkg_info=pkg.metadata,
            epoch=opts.epoch,
        )
    members = [_member(f, job.archives) for f in pkg.payload]
    if pkg.devel_tar:
        members.append(_devel_member(job.plan, pkg, work))
    result = write_wheel(
        out_dir,
        dist_name=pkg.dist_name,
        version=opts.version,
        tag=opts.wheel_tag,
        members=members,
        metadata=pkg.metadata,
        entry_points=_entry_points(pkg),
        compression=opts.wheel_compression,
        epoch=opts.epoch,
        jobs=opts.jobs,
        progress=job.progress,
        memo=job.memo,
    )
    return result.path


def _stage_package(job: _WriteJob, pkg: PlannedPackage, stage: Path, work: Path) -> None:
    """``--no-build-packages``: lay the package's files out in a directory instead."""
    for file in pkg.payload:
        target = stage / file.arcname
        _make_below(job.tmp, target.parent)
        with target.open("wb") as out:
            for chunk in file.iter_chunks(job.archives):
                out.write(chunk)
        target.chmod(0o755 if file.executable else 0o644)
    if pkg.devel_tar:
        member = _devel_member(job.plan, pkg, work)
        target = stage / member.arcname
        _make_below(job.tmp, target.parent)
        shutil.move(str(member.source), target)
    name = "PKG-INFO" if pkg.kind is DistKind.SELECTOR else "METADATA"
    (stage / name).write_bytes(pkg.metadata)


def _planned_outputs(plan: BuildPlan) -> list[str]:
    """The outputs' paths relative to ``--dest-dir``, as far as the plan names them (the
    outputs written are checked again when they are published)."""
    opts = plan.options
    if not opts.build_packages:
        return [_stage_name(p) for p in plan.packages]
    paths = [REPORT_JSON, REPORT_MD]
    for pkg in plan.packages:
        if pkg.kind is DistKind.SELECTOR:
            name = f"{normalize_dist_name(pkg.dist_name)}-{normalize_version(opts.version)}.tar.gz"
        else:
            name = wheel_filename(pkg.dist_name, opts.version, opts.wheel_tag)
        paths.append("/".join(p for p in ("dist", pkg.subdir, name) if p))
    return paths


def _write_one(job: _WriteJob, pkg: PlannedPackage) -> Built:
    work = Path(tempfile.mkdtemp(prefix="work-", dir=job.tmp))
    if job.plan.options.build_packages:
        out_root = job.tmp / "dist"
        start = time.monotonic()
        path = _write_package(job, pkg, out_root / pkg.subdir, work)
        size = path.stat().st_size
        cancel.check()  # no "wrote" line once the build is cancelled
        if job.progress is not None:
            job.progress.package_done(path.name, size, time.monotonic() - start)
        return Built(pkg, Path("dist") / path.relative_to(out_root), size)
    _stage_package(job, pkg, job.tmp / "stage" / _stage_name(pkg), work)
    return Built(pkg, Path(_stage_name(pkg)), 0)


def _stage_name(pkg: PlannedPackage) -> str:
    return pkg.dist_name + (f"-{pkg.family}" if pkg.subdir else "")


def _write_report(
    plan: BuildPlan, built: list[Built], tmp: Path, budget: tuple[WheelSize, ...]
) -> None:
    """``tmp/report.json`` and ``tmp/report.md``, published next to ``dist/``; ``budget``:
    every wheel against ``--max-wheel-size`` (none without it)."""
    if plan.catalog.kpack_split:
        generic = [
            (b.package.kind.value, tmp / b.path)
            for b in built
            if b.package.kind in (DistKind.CORE, DistKind.LIBRARIES)
        ]
        devices = [
            (b.package.family or "", tmp / b.path)
            for b in built
            if b.package.kind is DistKind.DEVICE
        ]
        report = make_report(plan.options.version, generic, devices)
    else:
        report = make_legacy_report(
            plan.options.version,
            [(b.package.kind.value, b.package.family or "", tmp / b.path) for b in built],
        )
    report = replace(report, budget=budget)
    (tmp / REPORT_JSON).write_text(report.to_json(), encoding="utf-8")
    (tmp / REPORT_MD).write_text(render_markdown(report), encoding="utf-8")


def _budget(built: Sequence[Built], tmp: Path, limit: int | None) -> tuple[WheelSize, ...]:
    """Every wheel written against ``--max-wheel-size`` (named by its path in ``dist/``);
    one error naming each wheel over it (:func:`kpack.common.budget.check_budget`); none
    without a budget."""
    wheels = [b for b in built if b.path.suffix == ".whl"]
    check_budget([tmp / b.path for b in wheels], limit)
    if limit is None:
        return ()
    rows = (
        WheelSize(name=b.path.relative_to("dist").as_posix(), size=b.size, budget=limit)
        for b in wheels
    )
    return tuple(sorted(rows, key=lambda r: r.name))


def apply_plan(
    plan: BuildPlan,
    progress: Progress | None = None,
    *,
    force: bool = False,
    index: Path | None = None,
) -> list[Built]:
    """Write every package of ``plan``; returns what was written, in plan order; with
    ``index``, the simple repository of the written ``dist/`` there too.

    Packages are written two at a time, so one package's final drain or the serial
    devel tarball overlaps another's compression. ``force``: replace files in the way
    that the builder did not write. A failure or a signal cancels the packages being
    written (:mod:`kpack.common.cancel`) and those not started yet.
    """
    with cancel.scope():
        return _apply_plan(plan, progress, force=force, index=index)


def _apply_plan(
    plan: BuildPlan, progress: Progress | None, *, force: bool, index: Path | None
) -> list[Built]:
    dest = plan.options.dest_dir
    libdeflate()  # a missing wheel compressor is named before anything is written
    check_outputs(dest, _planned_outputs(plan), record=RECORD, tool=TOOL, force=force)
    with staging(dest, TOOL) as tmp:
        archives: Archives = {}
        if plan.split is not None and plan.split.archives:
            if progress is not None:
                progress.phase(f"spooling {len(plan.split.archives)} kpack archives")
            (tmp / ARCHIVES).mkdir()
            archives = spool_planned_archives(plan.split, tmp / ARCHIVES, jobs=plan.options.jobs)
        packages = plan.packages
        order = sorted(range(len(packages)), key=lambda i: -packages[i].input_bytes)
        if progress is not None:
            progress.set_total(sum(p.input_bytes for p in packages))
        job = _WriteJob(
            plan=plan, tmp=tmp, archives=archives, progress=progress, memo=DeflateMemo()
        )
        pool = ThreadPool(max_workers=min(2, plan.options.jobs))
        try:
            futures = {i: pool.submit(_write_one, job, packages[i]) for i in order}
            built = [cancel.result(futures[i]) for i in range(len(packages))]
        except BaseException:  # a failure or a signal: packages not started yet never start,
            cancel.cancel()  # and the ones being written stop at their next chunk
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        finally:
            pool.shutdown(wait=True)
        budget = _budget(built, tmp, plan.options.max_wheel_size)
        if plan.options.build_packages:
            _write_report(plan, built, tmp, budget)
            staged, outputs = tmp, [*(b.path.as_posix() for b in built), REPORT_JSON, REPORT_MD]
        else:
            staged, outputs = tmp / "stage", [b.path.as_posix() for b in built]
        output = Publication(dest=dest, staged=staged, outputs=tuple(outputs), record=RECORD)
        if index is None:
            publish_all([output], tool=TOOL, force=force)
            return built
        if progress is not None:
            progress.phase(f"indexing into {index}")
        with staging(index.parent, TOOL) as index_tmp:
            files = stage_dist_index(tmp / "dist", index_tmp / index.name)
            pages = Publication(
                dest=index.parent,
                staged=index_tmp,
                outputs=tuple(f"{index.name}/{rel}" for rel in files),
                record=record_beside(index, TOOL),
            )
            publish_all([pages, output], tool=TOOL, force=force)
    return built
