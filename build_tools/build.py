"""Apply a build plan: the only stage that writes.

Everything goes into a temporary directory inside ``--dest-dir``; at the end ``dist/``
is replaced as a whole (rename), so a failed run leaves the previous ``dist/`` intact and
nothing from an earlier run survives in a new one. Unrelated files in ``--dest-dir`` are
left alone.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from kpack.common.tempdirs import make_temp_dir, temp_dir_name
from kpack.errors import PackagingError
from kpack.split import SpooledArchive
from kpack.wheelfile import Member, write_sdist, write_wheel

from .devel import write_devel_tar
from .kpack_split import spool_planned_archives
from .payload import PayloadFile
from .plan import BuildPlan, PackagePlan, PlanKind
from .progress import Progress
from .report import REPORT_JSON, REPORT_MD, make_legacy_report, make_report, render_markdown

__all__ = ["ARCHIVES", "Built", "apply_plan"]

#: Where apply spools the planned archives' kernels, inside its temporary directory.
ARCHIVES = "kpack-spool"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Built:
    plan: PackagePlan
    path: Path  # relative to dest-dir
    size: int


Archives = Mapping[str, SpooledArchive]


def _member(file: PayloadFile, archives: Archives) -> Member:
    return Member(arcname=file.arcname, source=file.content(archives), executable=file.executable)


def _entry_points(plan: PackagePlan) -> bytes | None:
    if not plan.entry_points:
        return None
    lines = ["[console_scripts]"] + [f"{n} = {t}" for n, t in sorted(plan.entry_points)]
    return ("\n".join(lines) + "\n").encode()


def _devel_member(plan: BuildPlan, pkg: PackagePlan, work: Path) -> Member:
    opts = plan.options
    tar_path = work / Path(pkg.devel_tar_name).name
    write_devel_tar(tar_path, pkg.devel_tar, epoch=opts.epoch, xz=opts.devel_tarball_compression)
    return Member(arcname=pkg.devel_tar_name, source=tar_path)


def _write_package(
    plan: BuildPlan,
    pkg: PackagePlan,
    out_dir: Path,
    work: Path,
    archives: Archives,
    progress: Progress | None,
) -> Path:
    opts = plan.options
    out_dir.mkdir(parents=True, exist_ok=True)
    if pkg.kind is PlanKind.SELECTOR:
        return write_sdist(
            out_dir,
            dist_name=pkg.dist_name,
            version=opts.version,
            files=[_member(f, archives) for f in pkg.payload],
            pkg_info=pkg.metadata,
            epoch=opts.epoch,
        )
    members = [_member(f, archives) for f in pkg.payload]
    if pkg.devel_tar:
        members.append(_devel_member(plan, pkg, work))
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
        progress=progress,
    )
    return result.path


def _stage_package(
    plan: BuildPlan, pkg: PackagePlan, stage: Path, work: Path, archives: Archives
) -> None:
    """``--no-build-packages``: lay the package's files out in a directory instead."""
    for file in pkg.payload:
        target = stage / file.arcname
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("wb") as out:
            for chunk in file.iter_chunks(archives):
                out.write(chunk)
        target.chmod(0o755 if file.executable else 0o644)
    if pkg.devel_tar:
        member = _devel_member(plan, pkg, work)
        target = stage / member.arcname
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(member.source), target)
    name = "PKG-INFO" if pkg.kind is PlanKind.SELECTOR else "METADATA"
    (stage / name).write_bytes(pkg.metadata)


def _replace_dir(new: Path, final: Path) -> None:
    """Rename ``new`` to ``final``; what was there (a directory, or a symlink, which is
    removed, never followed) goes to a fresh name first and is deleted after."""
    old = None
    if os.path.lexists(final):
        old = temp_dir_name(final.parent, f".{final.name}.old-")
        final.rename(old)
    new.rename(final)
    if old is not None:
        if old.is_symlink():
            old.unlink()
        else:
            shutil.rmtree(old, ignore_errors=True)


def _check_published(dest: Path, dirs: Sequence[str], files: Sequence[str]) -> None:
    """Refuse, before anything is written, what would make publishing stop half way: a
    directory's place held by a file, a file's place held by a directory."""
    paths = [(name, dest / name) for name in dirs]
    problems = [f"{n} exists and is not a directory" for n, p in paths if _holds_file(p)]
    paths = [(name, dest / name) for name in files]
    problems += [f"{n} is a directory" for n, p in paths if p.is_dir() and not p.is_symlink()]
    if problems:
        raise PackagingError("cannot publish the outputs", path=dest, problems=problems)


def _holds_file(path: Path) -> bool:
    """Something other than a directory or a symlink (which is replaced, not followed)."""
    return os.path.lexists(path) and not path.is_symlink() and not path.is_dir()


def _prepare_dest(dest: Path, tmp: Path) -> None:
    try:
        dest.mkdir(parents=True, exist_ok=True)
        make_temp_dir(tmp)
    except OSError as exc:
        raise PackagingError(f"destination is not writable: {exc.strerror}", path=dest) from exc


def _write_one(
    plan: BuildPlan, pkg: PackagePlan, tmp: Path, archives: Archives, progress: Progress | None
) -> Built:
    work = Path(tempfile.mkdtemp(prefix="work-", dir=tmp))
    if plan.options.build_packages:
        out_root = tmp / "dist"
        start = time.monotonic()
        path = _write_package(plan, pkg, out_root / pkg.subdir, work, archives, progress)
        size = path.stat().st_size
        if progress is not None:
            progress.package_done(path.name, size, time.monotonic() - start)
        return Built(pkg, Path("dist") / path.relative_to(out_root), size)
    _stage_package(plan, pkg, tmp / "stage" / _stage_name(pkg), work, archives)
    return Built(pkg, Path(_stage_name(pkg)), 0)


def _stage_name(pkg: PackagePlan) -> str:
    return pkg.dist_name + (f"-{pkg.family}" if pkg.subdir else "")


def _write_report(plan: BuildPlan, built: list[Built], tmp: Path) -> None:
    """``tmp/report.json`` and ``tmp/report.md``, published next to ``dist/``."""
    if plan.catalog.kpack_split:
        generic = [
            (b.plan.kind.value, tmp / b.path)
            for b in built
            if b.plan.kind in (PlanKind.CORE, PlanKind.LIBRARIES)
        ]
        devices = [
            (b.plan.family or "", tmp / b.path) for b in built if b.plan.kind is PlanKind.DEVICE
        ]
        report = make_report(plan.options.version, generic, devices)
    else:
        report = make_legacy_report(
            plan.options.version,
            [(b.plan.kind.value, b.plan.family or "", tmp / b.path) for b in built],
        )
    (tmp / REPORT_JSON).write_text(report.to_json(), encoding="utf-8")
    (tmp / REPORT_MD).write_text(render_markdown(report), encoding="utf-8")


def apply_plan(plan: BuildPlan, progress: Progress | None = None) -> list[Built]:
    """Write every package of ``plan``; returns what was written, in plan order.

    Packages are written two at a time, so one package's final drain or the serial
    devel tarball overlaps another's compression.
    """
    dest = plan.options.dest_dir
    tmp = temp_dir_name(dest, ".rocm-build-")  # named first: cleanup covers its creation
    if plan.options.build_packages:
        _check_published(dest, ["dist"], [REPORT_JSON, REPORT_MD])
    else:
        _check_published(dest, [_stage_name(p) for p in plan.packages], [])
    try:
        _prepare_dest(dest, tmp)
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
        with ThreadPoolExecutor(max_workers=min(2, plan.options.jobs)) as pool:
            futures = {
                i: pool.submit(_write_one, plan, packages[i], tmp, archives, progress)
                for i in order
            }
            built = [futures[i].result() for i in range(len(packages))]
        if plan.options.build_packages:
            _write_report(plan, built, tmp)
            _replace_dir(tmp / "dist", dest / "dist")
            for name in (REPORT_JSON, REPORT_MD):
                os.replace(tmp / name, dest / name)
        else:
            for stage in sorted((tmp / "stage").iterdir()):
                _replace_dir(stage, dest / stage.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return built
