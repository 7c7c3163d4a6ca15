"""The shards as read: their files classified, hashed and checked, and their reports.

A shard is one builder run's dist directory. :func:`scan_shards` lists each, names every
archive's kind from its file name (a generic file, the same in every shard, or a device
wheel named for one gfx target), reads every archive in full
(:mod:`build_tools.shards.archives`) and parses the shard's report
(:mod:`build_tools.shards.report`); it returns frozen :class:`Shard` values and reports
every problem of every shard at once. The dist names the assembly relies on are here too.
"""

from __future__ import annotations

import enum
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)

from build_tools.pep503 import file_sha256
from build_tools.report import Report
from kpack.common.threadpool import ThreadPool
from kpack.errors import PackagingError
from kpack.generic_targets import generic_table
from kpack.targets import is_isa_target

from .archives import Contents, check_archive
from .report import REPORT_JSON, REPORT_MD, parse_report, shown

__all__ = [
    "DEVEL",
    "DEVICE_PREFIX",
    "LIBRARIES",
    "META_SDIST",
    "REQUIRED_WHEELS",
    "DistFile",
    "Kind",
    "Shard",
    "device_target",
    "scan_shards",
]

META_SDIST = "rocm"
REQUIRED_WHEELS = ("rocm-sdk-core", "rocm-sdk-libraries")
#: The libraries wheel: ``rocm-sdk-libraries`` in a kpack set, ``rocm-sdk-libraries-<family>``
#: in a legacy one.
LIBRARIES = "rocm-sdk-libraries"
DEVEL = "rocm-sdk-devel"
DEVICE_PREFIX = "rocm-sdk-device-"


class Kind(enum.Enum):
    GENERIC = "generic"  # identical in every shard
    DEVICE = "device"  # one target's device wheel


@dataclass(frozen=True, kw_only=True)
class DistFile:
    """One archive of a shard, identified by its name and its bytes."""

    path: Path
    kind: Kind
    project: str  # PEP 503 normalized
    version: str  # PEP 440 normalized
    platforms: frozenset[str]  # empty for an sdist
    target: str | None
    size: int
    sha256: str
    contents: Contents | None = None  # a device wheel's, counted from its members

    @property
    def name(self) -> str:
        return self.path.name


@dataclass(frozen=True)
class Shard:
    directory: Path
    files: tuple[DistFile, ...]
    report: Report | None


def _classify(path: Path) -> tuple[Kind, str, str, frozenset[str], str | None]:
    name = path.name
    try:
        if name.endswith(".whl"):
            project, version, _build, tags = parse_wheel_filename(name)
            platforms = frozenset(t.platform for t in tags)
        elif name.endswith(".tar.gz"):
            project, version = parse_sdist_filename(name)
            platforms = frozenset()
        else:
            raise PackagingError("unexpected file (not a wheel, sdist or report)", path=path)
    except (InvalidWheelFilename, InvalidSdistFilename) as exc:
        raise PackagingError(f"invalid archive name: {exc}", path=path) from exc
    if project.startswith(DEVICE_PREFIX) and name.endswith(".whl"):
        target = project[len(DEVICE_PREFIX) :]
        _check_device_target(target, path)
        return Kind.DEVICE, project, str(version), platforms, target
    return Kind.GENERIC, project, str(version), platforms, None


def _check_device_target(target: str, path: Path) -> None:
    """A device wheel is named for a base gfx target (``gfx942``, ``gfx9-4-generic``) as
    the builder names them; the rocm selector would never install another."""
    if ":" in target or not is_isa_target(target):
        raise PackagingError(f"device wheel for {target!r}, which is not a gfx target", path=path)
    if generic_table().unknown_generic([target]):
        raise PackagingError(
            f"device wheel for {target}, a generic target the generic-target table does not list",
            path=path,
        )


def device_target(target: str) -> str:
    return str(canonicalize_name(DEVICE_PREFIX + target))[len(DEVICE_PREFIX) :]


def _report_path(directory: Path, inside: Path | None, problems: list[str]) -> Path | None:
    """A shard's report: next to its dist dir, where the builder writes it, or inside it
    (a shard from before reports moved out of dist/); a regular file, and only one."""
    beside = directory.parent / REPORT_JSON
    if inside is not None and inside.resolve() == beside.resolve():
        return inside  # the shard is "."
    try:
        mode = beside.lstat().st_mode
    except FileNotFoundError:
        return inside
    except OSError as exc:
        problems.append(f"{beside}: cannot read: {exc.strerror}")
        return None
    if stat.S_ISLNK(mode):
        problems.append(f"{beside}: is a symlink; refusing to read a report from elsewhere")
    elif not stat.S_ISREG(mode):
        problems.append(f"{beside}: not a regular file")
    elif inside is not None:
        problems.append(f"{inside} and {beside}: two reports for one shard; remove the stale one")
    else:
        return beside
    return None


def _list_shard(
    directory: Path, problems: list[str], used: dict[Path, Path]
) -> tuple[list[Path], Report | None]:
    try:
        entries = sorted(directory.iterdir())
    except OSError as exc:
        problems.append(f"{directory}: cannot list: {exc.strerror or exc}")
        return [], None
    archives: list[Path] = []
    inside: Path | None = None
    for entry in entries:
        if not entry.name.isprintable():
            problems.append(f"{directory}: file name {shown(entry.name)} is not printable")
        elif entry.is_dir() and not entry.is_symlink():
            problems.append(
                f"{entry}: a directory (a multi-family legacy set's family files?): "
                "assemble-shards takes flat dist dirs; build-python-packages --index DIR "
                "indexes a multi-family set, one repository per family"
            )
        elif entry.is_symlink() or not entry.is_file():
            problems.append(f"{entry}: unexpected entry (not a regular file)")
        elif entry.name == REPORT_JSON:
            inside = entry
        elif entry.name != REPORT_MD:
            archives.append(entry)
    found = _report_path(directory, inside, problems)
    if found is None:
        return archives, None
    other = used.setdefault(found.resolve(), directory)
    if other != directory:
        problems.append(
            f"{found}: the report of both {other} and {directory}; give each "
            "shard its own directory (SHARD/dist with SHARD/report.json)"
        )
        return archives, None
    try:
        return archives, parse_report(found)
    except PackagingError as exc:
        problems.append(str(exc))
        return archives, None


def _read_archive(path: Path, project: str, version: str) -> tuple[str, Contents | None, list[str]]:
    """The file's sha256, what a device wheel holds, and its problems: every archive is
    read and checked in full."""
    device = project.startswith(DEVICE_PREFIX)
    return file_sha256(path), *check_archive(path, project, version, count=device)


def _dist_file(
    path: Path,
    classified: tuple[Kind, str, str, frozenset[str], str | None],
    size: int,
    read: tuple[str, Contents | None, list[str]],
) -> DistFile:
    """The value of one checked archive: its name's fields (:func:`_classify`), its size and
    what :func:`_read_archive` found."""
    kind, project, version, platforms, target = classified
    sha256, contents, _problems = read
    return DistFile(
        path=path,
        kind=kind,
        project=project,
        version=version,
        platforms=platforms,
        target=target,
        size=size,
        sha256=sha256,
        contents=contents,
    )


def scan_shards(directories: Sequence[Path], *, jobs: int | None = None) -> tuple[Shard, ...]:
    """List, classify, hash and check every shard's files (in parallel): each wheel and
    sdist is read in full (:mod:`build_tools.shards.archives`); all problems at once."""
    problems: list[str] = []
    used: dict[Path, Path] = {}
    listed = [_list_shard(Path(d), problems, used) for d in directories]
    classified: dict[Path, tuple[Kind, str, str, frozenset[str], str | None]] = {}
    for archives, _report in listed:
        for path in archives:
            try:
                classified[path] = _classify(path)
            except PackagingError as exc:
                problems.append(str(exc))
    if problems:
        raise PackagingError("invalid shard input", problems=problems)
    paths = list(classified)
    try:
        with ThreadPool(max_workers=jobs or min(4, os.cpu_count() or 1)) as pool:
            checked = pool.map(lambda p: _read_archive(p, *classified[p][1:3]), paths)
            digests = dict(zip(paths, checked, strict=True))
        sizes = {p: p.stat().st_size for p in paths}
    except OSError as exc:
        raise PackagingError(f"cannot read shard file: {exc.strerror}", path=exc.filename) from exc
    problems = [line for p in paths for line in digests[p][2]]
    if problems:
        raise PackagingError("invalid shard input", problems=problems)
    return tuple(
        Shard(
            Path(directory),
            tuple(_dist_file(p, classified[p], sizes[p], digests[p]) for p in archives),
            report,
        )
        for directory, (archives, report) in zip(directories, listed, strict=True)
    )
