#!/usr/bin/env python3
"""Merge the dist directories of target-sharded kpack-split builds into one.

    python build_tools/assemble_shards.py --input S1/dist --input S2/dist --output DIST \\
        [--linux-amdgpu-families LIST] [--windows-amdgpu-families LIST] [--version V] \\
        [--targets-cmake FILE] [--index DIR]

Each shard ran the builder with its own ``--targets``: the generic files (``rocm`` sdist,
core, libraries, devel, profiler) must be byte-identical in every shard and are taken
once; device wheels (``rocm_sdk_device_<gfx>``) are united. Errors, all collected and
reported together: a generic file that differs between shards (both files named) or is
missing from one; a device wheel present twice with different bytes; two files of one
project (another build tag or python tag); more than one version or platform; ``--version``
not matching; a missing ``rocm`` sdist, core or libraries wheel; with family flags (like the
builder, Linux and Windows targets together), an expected target without its device wheel;
a device wheel named for no gfx target (``gfx942`` or a listed generic target); a file name
that is not printable; an archive that does not read and check in full (a wheel: zip,
.dist-info, RECORD hashes and sizes, METADATA Name/Version as its file name, member names;
the sdist: gzip'd tar under ``<name>-<version>/`` with a matching PKG-INFO; see
:mod:`build_tools.shards.archives`). The shards' ``report.json`` files are merged into one
``report.json`` + ``report.md`` equal to an unsharded build's (read next to each shard's
dist dir, where the builder writes them, or inside it; written next to ``--output``, so the
output holds distributions only): device rows are united,
per-target download rows recomputed over every device wheel (a shard's own rows count only
its share). Without ``report.json`` in some shard the merge is skipped with a notice. A
report must be a regular file (not a symlink), one per shard, and each row must name a file
of its kind (a device row: the wheel of its target) and size.
``--index`` also writes a PEP 503 simple repository of the result. Outputs are written
into temporary siblings and renamed into place; they must not exist or be empty, must not
lie inside a shard, and ``--output`` must not sit beside one (its report would be written
over). A failure or a signal leaves nothing behind: what was moved into place goes again,
an older report comes back.
"""

from __future__ import annotations

import argparse
import enum
import logging
import math
import os
import shutil
import stat
import sys
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from build_tools.pep503 import file_sha256, write_simple_index
from build_tools.report import (
    DeviceRow,
    GenericRow,
    Report,
    TargetRow,
    render_markdown,
    target_rows,
)
from build_tools.shards.archives import archive_problems
from kpack.common.boundary import os_error_line
from kpack.common.jsonfile import load_json_object
from kpack.common.tempdirs import make_temp_dir, temp_dir_name
from kpack.errors import PackagingError, UsageError
from kpack.generic_targets import generic_table
from kpack.targets import is_isa_target

__all__ = [
    "AssemblyPlan",
    "DistFile",
    "Kind",
    "Shard",
    "main",
    "parse_report",
    "plan_assembly",
    "scan_shards",
    "write_assembly",
]

log = logging.getLogger("assemble_shards")

REPORT_JSON = "report.json"
REPORT_MD = "report.md"
META_SDIST = "rocm"
REQUIRED_WHEELS = ("rocm-sdk-core", "rocm-sdk-libraries")
DEVEL = "rocm-sdk-devel"
DEVICE_PREFIX = "rocm-sdk-device-"


class Kind(enum.Enum):
    GENERIC = "generic"  # identical in every shard
    DEVICE = "device"  # one target's device wheel


@dataclass(frozen=True)
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

    @property
    def name(self) -> str:
        return self.path.name


@dataclass(frozen=True)
class Shard:
    directory: Path
    files: tuple[DistFile, ...]
    report: Report | None


@dataclass(frozen=True)
class AssemblyPlan:
    """What the output will hold; only :func:`write_assembly` writes it."""

    version: str
    files: tuple[DistFile, ...]  # sorted by name
    report: Report | None
    notices: tuple[str, ...]


# --- scan ---------------------------------------------------------------------------


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


_FIELD_TYPES: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "float": (int, float)}
_SHOWN = 160  # characters of a bad value quoted in an error


def _shown(value: object) -> str:
    """``repr`` of a value from an input, cut short: one line of reasonable length."""
    text = repr(value)
    return text if len(text) <= _SHOWN else f"{text[: _SHOWN - 3]}..."


def _valid(value: object, kind: str) -> bool:
    if kind == "tuple[str, ...]":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if not isinstance(value, _FIELD_TYPES[kind]) or type(value) is bool:
        return False
    return not isinstance(value, float) or math.isfinite(value)  # JSON has no NaN


def _rows(doc: Mapping[str, Any], key: str, cls: type[Any], problems: list[str]) -> tuple[Any, ...]:
    raw = doc.get(key)
    if not isinstance(raw, list):
        problems.append(f"{key}: expected a list")
        return ()
    out = []
    for i, row in enumerate(raw):
        if not isinstance(row, dict):
            problems.append(f"{key}[{i}]: expected an object")
            continue
        values: dict[str, Any] = {}
        for column in fields(cls):
            value: Any = row.get(column.name)
            if not _valid(value, str(column.type)):
                problems.append(
                    f"{key}[{i}].{column.name}: expected {column.type}, got {_shown(value)}"
                )
            elif column.type == "tuple[str, ...]":
                values[column.name] = tuple(value)
            else:
                values[column.name] = float(value) if column.type == "float" else value
        if len(values) == len(fields(cls)):
            out.append(cls(**values))
    return tuple(out)


def parse_report(path: Path) -> Report:
    """Read and validate one shard's ``report.json``; all problems at once."""
    doc = load_json_object(path, error=PackagingError)
    problems: list[str] = []
    mode = doc.get("mode")
    if mode != "kpack":
        problems.append(f"mode: expected 'kpack', got {_shown(mode)}")
    version = doc.get("version")
    if not isinstance(version, str):
        problems.append(f"version: expected a string, got {_shown(version)}")
    elif _version(version) is None:
        problems.append(f"version: not a PEP 440 version: {_shown(version)}")
    device = _rows(doc, "device_wheels", DeviceRow, problems)
    targets = _rows(doc, "targets", TargetRow, problems)
    generic = _rows(doc, "generic", GenericRow, problems)
    if problems:
        raise PackagingError("invalid report", path=path, problems=problems)
    return Report(str(version), str(mode), device, targets, generic)


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
            problems.append(f"{directory}: file name {_shown(entry.name)} is not printable")
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


def _read_archive(path: Path, project: str, version: str) -> tuple[str, list[str]]:
    """The file's sha256 and its problems: every archive is read and checked in full."""
    return file_sha256(path), archive_problems(path, project, version)


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
        with ThreadPoolExecutor(max_workers=jobs or min(4, os.cpu_count() or 1)) as pool:
            checked = pool.map(lambda p: _read_archive(p, *classified[p][1:3]), paths)
            digests = dict(zip(paths, checked, strict=True))
        sizes = {p: p.stat().st_size for p in paths}
    except OSError as exc:
        raise PackagingError(f"cannot read shard file: {exc.strerror}", path=exc.filename) from exc
    problems = [line for p in paths for line in digests[p][1]]
    if problems:
        raise PackagingError("invalid shard input", problems=problems)
    return tuple(
        Shard(
            Path(directory),
            tuple(DistFile(p, *classified[p], sizes[p], digests[p][0]) for p in archives),
            report,
        )
        for directory, (archives, report) in zip(directories, listed, strict=True)
    )


# --- plan (pure) ----------------------------------------------------------------------


def _one_version(shards: Sequence[Shard], wanted: str | None, problems: list[str]) -> str:
    seen: dict[str, list[str]] = {}
    for shard in shards:
        for f in shard.files:
            seen.setdefault(f.version, []).append(str(f.path))
        if shard.report is not None:
            seen.setdefault(_normal(shard.report.version), []).append(
                str(shard.directory / REPORT_JSON)
            )
    if len(seen) > 1:
        problems += [
            f"mixed versions: {v} in {', '.join(sorted(files)[:3])}"
            + (f" and {len(files) - 3} more" if len(files) > 3 else "")
            for v, files in sorted(seen.items())
        ]
    version = wanted if wanted is not None else min(seen, default="")
    if wanted is not None and set(seen) - {wanted}:
        problems.append(f"--version {wanted} does not match the shards' {', '.join(sorted(seen))}")
    return version


def _version(text: str) -> Version | None:
    """``text`` as a PEP 440 version, None when it is none (a number over Python's
    4300-digit limit is a bare ValueError from packaging, not InvalidVersion)."""
    try:
        return Version(text)
    except ValueError:  # InvalidVersion is one too
        return None


def _normal(version: str) -> str:
    parsed = _version(version)
    return version if parsed is None else str(parsed)


def _one_platform(shards: Sequence[Shard], problems: list[str]) -> None:
    tag_sets = {f.platforms for s in shards for f in s.files if f.platforms}
    if len(tag_sets) > 1:
        shown = sorted(".".join(sorted(t)) for t in tag_sets)
        problems.append(f"wheels for more than one platform: {', '.join(shown)}")


def _merge_generic(shards: Sequence[Shard], problems: list[str]) -> list[DistFile]:
    first: dict[str, DistFile] = {}
    holders: dict[str, set[Path]] = {}
    for shard in shards:
        for f in shard.files:
            if f.kind is not Kind.GENERIC:
                continue
            holders.setdefault(f.name, set()).add(shard.directory)
            kept = first.setdefault(f.name, f)
            if (kept.sha256, kept.size) != (f.sha256, f.size):
                problems.append(
                    f"generic file differs between shards: {kept.path} (sha256 {kept.sha256}) "
                    f"vs {f.path} (sha256 {f.sha256})"
                )
    for name, dirs in sorted(holders.items()):
        problems += [
            f"generic file {name} is in {first[name].path.parent} but missing from {s.directory}"
            for s in shards
            if s.directory not in dirs
        ]
    return list(first.values())


def _merge_device(shards: Sequence[Shard], problems: list[str]) -> list[DistFile]:
    first: dict[str, DistFile] = {}
    for shard in shards:
        for f in shard.files:
            if f.kind is not Kind.DEVICE:
                continue
            kept = first.setdefault(f.name, f)
            if (kept.sha256, kept.size) != (f.sha256, f.size):
                problems.append(
                    f"device wheel collides: {kept.path} (sha256 {kept.sha256}) "
                    f"vs {f.path} (sha256 {f.sha256})"
                )
    return list(first.values())


def _one_file_per_project(files: Sequence[DistFile], problems: list[str]) -> None:
    """Two wheels of one project (another build tag, python tag or spelling of the name)
    would both land in the index, and pip would pick either."""
    seen: dict[tuple[str, bool], DistFile] = {}
    for f in sorted(files, key=lambda f: f.name):
        kept = seen.setdefault((f.project, f.name.endswith(".whl")), f)
        if kept is not f:
            problems.append(f"two files of {f.project}: {kept.path} and {f.path}")


def _check_required(files: Sequence[DistFile], devel_seen: bool, problems: list[str]) -> None:
    have = {(f.project, f.name.endswith(".whl")) for f in files}
    if (META_SDIST, False) not in have:
        problems.append(f"required dist missing: the {META_SDIST} sdist")
    required = [*REQUIRED_WHEELS, *([DEVEL] if devel_seen else [])]
    problems += [f"required dist missing: the {p} wheel" for p in required if (p, True) not in have]


def _check_targets(files: Sequence[DistFile], expected: Iterable[str], problems: list[str]) -> None:
    built = {f.target for f in files if f.kind is Kind.DEVICE}
    missing = sorted(t for t in expected if _device_target(t) not in built)
    if missing:
        problems.append(f"missing device wheels for expected targets: {', '.join(missing)}")


def _device_target(target: str) -> str:
    return str(canonicalize_name(DEVICE_PREFIX + target))[len(DEVICE_PREFIX) :]


def plan_assembly(
    shards: Sequence[Shard],
    *,
    expected_targets: Iterable[str] | None = None,
    version: str | None = None,
) -> AssemblyPlan:
    """Check the shards against each other and the expectations; every problem at once.

    ``expected_targets``: the targets the family flags expand to (``None``: not checked).
    """
    if not shards:
        raise UsageError("no --input shard given")
    problems: list[str] = []
    found = _one_version(shards, version, problems)
    _one_platform(shards, problems)
    files = _merge_generic(shards, problems) + _merge_device(shards, problems)
    _one_file_per_project(files, problems)
    devel_seen = any(f.project == DEVEL for s in shards for f in s.files)
    _check_required(files, devel_seen, problems)
    notices: list[str] = []
    if expected_targets is not None:
        _check_targets(files, expected_targets, problems)
    else:
        notices.append("no family flag given: target completeness not checked")
    files.sort(key=lambda f: f.name)
    report = _merge_reports(shards, files, found, problems, notices)
    if problems:
        raise PackagingError("cannot assemble the shards", problems=problems)
    return AssemblyPlan(found, tuple(files), report, tuple(notices))


def _unite(rows: Iterable[Any], key: str, what: str, problems: list[str]) -> list[Any]:
    kept: dict[str, Any] = {}
    for row in rows:
        name = getattr(row, key)
        if kept.setdefault(name, row) != row:
            problems.append(f"report.json: {what} rows for {name} disagree: {kept[name]} vs {row}")
    return [kept[k] for k in sorted(kept)]


def _target_rows(files: Sequence[DistFile]) -> tuple[TargetRow, ...]:
    """What each GPU user downloads against a fat install, as ``build_tools.report``
    computes it for one build."""
    base = sum(f.size for f in files if f.project in REQUIRED_WHEELS and f.platforms)
    devices = [(f.target or "", f.name, f.size) for f in files if f.kind is Kind.DEVICE]
    return target_rows(base, devices)


def _merge_reports(
    shards: Sequence[Shard],
    files: Sequence[DistFile],
    version: str,
    problems: list[str],
    notices: list[str],
) -> Report | None:
    absent = [str(s.directory) for s in shards if s.report is None]
    if absent:
        notices.append(f"no {REPORT_JSON} in {', '.join(absent)}: report merge skipped")
        return None
    reports = [s.report for s in shards if s.report is not None]
    device = _unite((r for rep in reports for r in rep.device_wheels), "wheel", "device", problems)
    generic = _unite((r for rep in reports for r in rep.generic), "wheel", "generic", problems)
    problems += [
        f"{s.directory}'s {REPORT_JSON}: generic rows differ from {shards[0].directory}'s"
        for s in shards[1:]
        if s.report is not None and reports[0].generic != s.report.generic
    ]
    _check_rows(files, device, generic, problems)
    problems += [
        f"report.json has no device_wheels row for {f.name}"
        for f in files
        if f.kind is Kind.DEVICE and f.name not in {r.wheel for r in device}
    ]
    device.sort(key=lambda r: (r.target, r.wheel))
    return Report(version, "kpack", tuple(device), _target_rows(files), reports[0].generic)


def _check_rows(
    files: Sequence[DistFile],
    device: Sequence[DeviceRow],
    generic: Sequence[GenericRow],
    problems: list[str],
) -> None:
    """Every row names a file of its kind (a device row: of its target) and its size."""
    by_name = {f.name: f for f in files}
    rows: list[DeviceRow | GenericRow] = [*device, *generic]
    for row in rows:
        f = by_name.get(row.wheel)
        if f is None:
            problems.append(f"report.json lists {_shown(row.wheel)}, which no shard holds")
            continue
        if f.size != row.size:
            problems.append(f"report.json: {row.wheel} size {row.size}, but the file has {f.size}")
        if isinstance(row, GenericRow) and f.kind is Kind.DEVICE:
            problems.append(f"report.json: generic row for the device wheel {row.wheel}")
        elif isinstance(row, DeviceRow) and f.target != _device_target(row.target):
            problems.append(
                f"report.json: device row for {row.wheel} names target {_shown(row.target)}"
                + (f", the wheel's is {f.target}" if f.target else ", but it is no device wheel")
            )


# --- render and write -----------------------------------------------------------------


def _human(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


def _check_free(path: Path, what: str) -> None:
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise UsageError(f"{what} exists and is not a directory", path=path)
    if path.is_dir() and any(path.iterdir()):
        raise UsageError(f"{what} exists and is not empty; remove it first", path=path)


def _link_or_copy(source: Path, dest: Path) -> None:
    try:
        os.link(source, dest)
    except OSError:
        shutil.copyfile(source, dest)


def _populate(plan: AssemblyPlan, into: Path) -> None:
    for f in plan.files:
        _link_or_copy(f.path, into / f.name)


def _report_files(plan: AssemblyPlan) -> dict[str, str]:
    """The merged report, by file name (none when the merge was skipped)."""
    if plan.report is None:
        return {}
    return {REPORT_JSON: plan.report.to_json(), REPORT_MD: render_markdown(plan.report)}


def _check_report_places(parent: Path, names: Iterable[str]) -> None:
    for name in names:
        place = parent / name
        if place.is_dir() and not place.is_symlink():
            raise UsageError("is a directory, where the merged report goes", path=place)


def _missing_dirs(path: Path) -> list[Path]:
    """The directories ``mkdir -p path`` would make, outermost first."""
    missing = []
    for directory in (path, *path.parents):
        if directory.exists() or directory.is_symlink():
            break
        missing.append(directory)
    return missing[::-1]


@dataclass
class _Undo:
    """What a failed :func:`write_assembly` takes back: the reports it moved in (the old
    ones back), its temporary dirs, the outputs it had put in place (left as they were
    found: absent or empty) and the parents it made."""

    reports: list[tuple[Path, Path | None]] = field(default_factory=list)  # (final, old)
    temps: list[Path] = field(default_factory=list)
    placed: list[tuple[Path, bool]] = field(default_factory=list)  # (dir, existed empty)
    made: list[Path] = field(default_factory=list)

    def place(self, directory: Path) -> None:
        self.placed.append((directory, directory.is_dir()))

    def make_parents(self, path: Path) -> None:
        """``mkdir -p path``, each new directory noted before it is made."""
        self.made += _missing_dirs(path)
        path.mkdir(parents=True, exist_ok=True)

    def run(self) -> None:
        for final, old in reversed(self.reports):
            with suppress(OSError):
                if old is None:
                    final.unlink()
                else:
                    os.replace(old, final)
        for temp in self.temps:
            shutil.rmtree(temp, ignore_errors=True)
        for directory, existed in reversed(self.placed):
            shutil.rmtree(directory, ignore_errors=True)
            if existed:
                with suppress(OSError):
                    directory.mkdir()
        for directory in reversed(self.made):
            with suppress(OSError):
                directory.rmdir()


def _stage_reports(reports: Mapping[str, str], into: Path) -> None:
    for name, text in reports.items():
        (into / name).write_text(text, encoding="utf-8")


def _move_reports(names: Iterable[str], staged: Path, parent: Path, undo: _Undo) -> None:
    """Move the staged reports into ``parent``; a report there before is kept in ``staged``
    until the end, for :class:`_Undo`."""
    for name in names:
        final, old = parent / name, staged / f"{name}.old"
        undo.reports.append((final, old))  # before the rename: a signal may come after it
        try:
            os.rename(final, old)
        except FileNotFoundError:
            undo.reports[-1] = (final, None)
        os.replace(staged / name, final)


def write_assembly(plan: AssemblyPlan, output: Path, *, index: Path | None = None) -> None:
    """Write the merged dist (and the PEP 503 index) atomically: all or nothing.

    The merged report goes next to the output dist (never inside it: dist/ holds
    distributions only, so ``twine upload dist/*`` works as is); it is written beside
    the dist first and moved into place last."""
    output, index = Path(output), Path(index) if index is not None else None
    _check_free(output, "--output")
    if index is not None:
        _check_free(index, "--index")
        out_abs, index_abs = output.resolve(), index.resolve()
        if index_abs == out_abs or out_abs in index_abs.parents or index_abs in out_abs.parents:
            raise UsageError("--index and --output must be separate directories", path=index)
    reports = _report_files(plan)
    _check_report_places(output.parent, reports)
    undo = _Undo()
    tmp = temp_dir_name(output.parent, f".{output.name}.", ".tmp")
    staged = temp_dir_name(output.parent, f".{output.name}.report.", ".tmp")
    try:
        undo.make_parents(output.parent)
        undo.temps += [tmp, staged]
        _populate(plan, make_temp_dir(tmp))
        tmp.chmod(0o755)
        _stage_reports(reports, make_temp_dir(staged))
        if index is not None:
            undo.make_parents(index.parent)
            undo.place(index)
            write_simple_index(tmp, index, digests={f.name: f.sha256 for f in plan.files})
        undo.place(output)
        with suppress(FileNotFoundError):
            output.rmdir()  # empty, checked above
        tmp.rename(output)
        _move_reports(reports, staged, output.parent, undo)
        shutil.rmtree(staged)
    except BaseException as exc:
        undo.run()
        if isinstance(exc, OSError):
            line = os_error_line(exc)
            raise PackagingError(f"cannot write the output: {line}", path=output) from exc
        raise


# --- CLI ------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="assemble-shards",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = p.add_argument
    add("--input", type=Path, action="append", required=True, help="a shard's dist directory")
    add("--output", type=Path, required=True, help="merged dist dir (must not exist or be empty)")
    add("--linux-amdgpu-families", help="families whose targets all need a device wheel")
    add("--windows-amdgpu-families", help="the same for the Windows families")
    add("--targets-cmake", type=Path, help="family table from therock_amdgpu_targets.cmake")
    add("--version", help="the version every file must have")
    add("--index", type=Path, help="also write a PEP 503 simple repository here")
    add("-v", "--verbose", action="count", default=0, help="more logging")
    return p


def _expected(args: argparse.Namespace) -> tuple[str, ...] | None:
    """Targets of both family flags together (as the builder expects); None without flags."""
    from build_tools.targets import load_family_table, parse_family_list, parse_targets_cmake

    table = parse_targets_cmake(args.targets_cmake) if args.targets_cmake else load_family_table()
    families = (
        *parse_family_list(args.linux_amdgpu_families),
        *parse_family_list(args.windows_amdgpu_families),
    )
    return table.expand_all(families) if families else None  # UsageError if unknown


def _check_apart(dirs: Sequence[Path], output: Path, index: Path | None) -> None:
    """The outputs stay out of the shards: neither inside one, nor ``--output`` beside one
    (the merged report next to it would replace, or become, that shard's report)."""
    out = output.resolve()
    for directory in dirs:
        shard = directory.resolve()
        for flag, path in (("--output", output), ("--index", index)):
            if path is not None and shard in (path.resolve(), *path.resolve().parents):
                raise UsageError(f"{flag} {path} is inside the shard {directory}")
        if out.parent == shard.parent:
            raise UsageError(
                f"--output {output} is beside the shard {directory}: the merged "
                f"{REPORT_JSON} would be written over that shard's report"
            )


def run(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s: %(message)s",
    )
    version = None
    if args.version is not None and args.version.strip():
        parsed = _version(args.version.strip())
        if parsed is None:
            raise UsageError(f"--version {_shown(args.version)} is not a PEP 440 version")
        version = str(parsed)
    dirs = [Path(d) for d in args.input]
    problems = [f"{d}: not a directory" for d in dirs if not d.is_dir()]
    resolved = [d.resolve() for d in dirs]
    problems += [f"{d}: given twice" for i, d in enumerate(dirs) if resolved[i] in resolved[:i]]
    if problems:
        raise UsageError("bad --input", problems=problems)
    _check_apart(dirs, args.output, args.index)
    expected = _expected(args)
    plan = plan_assembly(scan_shards(dirs), expected_targets=expected, version=version)
    for notice in plan.notices:
        print(f"notice: {notice}", file=sys.stderr)
    write_assembly(plan, args.output, index=args.index)
    devices = sum(f.kind is Kind.DEVICE for f in plan.files)
    print(
        f"assembled {len(plan.files)} files ({devices} device wheels) of {plan.version} "
        f"from {len(dirs)} shards into {args.output}"
    )
    for f in plan.files:
        print(f"  {f.name}  {_human(f.size)}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from build_tools._cli import guarded_main

    return guarded_main(run, argv)


if __name__ == "__main__":
    sys.exit(main())
