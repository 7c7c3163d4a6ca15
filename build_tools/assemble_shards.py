#!/usr/bin/env python3
"""Merge the dist directories of target-sharded kpack-split builds into one.

    python build_tools/assemble_shards.py --input S1/dist --input S2/dist --output DIST \\
        [--linux-amdgpu-families LIST] [--windows-amdgpu-families LIST] [--version V] \\
        [--targets-cmake FILE] [--index DIR]

Each shard ran the builder with its own ``--targets``: the generic files (``rocm`` sdist,
core, libraries, devel, profiler) must be byte-identical in every shard and are taken
once; device wheels (``rocm_sdk_device_<gfx>``) are united. Errors, all collected and
reported together: a generic file that differs between shards (both files named) or is
missing from one; a device wheel present twice with different bytes; more than one version
or platform; ``--version`` not matching; a missing ``rocm`` sdist, core or libraries wheel;
with family flags (like the builder, Linux and Windows targets together), an expected
target without its device wheel. The shards' ``report.json`` files are merged into one
``report.json`` + ``report.md`` equal to an unsharded build's (read next to each shard's
dist dir, where the builder writes them, or inside it; written next to ``--output``, so the
output holds distributions only): device rows are united,
per-target download rows recomputed over every device wheel (a shard's own rows count only
its share). Without ``report.json`` in some shard the merge is skipped with a notice.
``--index`` also writes a PEP 503 simple repository of the result. Outputs are written
into temporary siblings and renamed into place; they must not exist or be empty, and a
failure leaves nothing behind.
"""

from __future__ import annotations

import argparse
import enum
import logging
import os
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, fields
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
from packaging.version import InvalidVersion, Version

from build_tools.pep503 import file_sha256, write_simple_index
from build_tools.report import (
    DeviceRow,
    GenericRow,
    Report,
    TargetRow,
    render_markdown,
    target_rows,
)
from kpack.errors import PackagingError, UsageError
from kpack.jsonfile import load_json_object
from kpack.tempdirs import make_temp_dir, temp_dir_name

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
        return Kind.DEVICE, project, str(version), platforms, project[len(DEVICE_PREFIX) :]
    return Kind.GENERIC, project, str(version), platforms, None


_FIELD_TYPES: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "float": (int, float)}


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
        for field in fields(cls):
            value: Any = row.get(field.name)
            if field.type == "tuple[str, ...]":
                valid = isinstance(value, list) and all(isinstance(v, str) for v in value)
            else:
                valid = isinstance(value, _FIELD_TYPES[str(field.type)]) and type(value) is not bool
            if not valid:
                problems.append(f"{key}[{i}].{field.name}: expected {field.type}, got {value!r}")
            elif field.type == "tuple[str, ...]":
                values[field.name] = tuple(value)
            else:
                values[field.name] = float(value) if field.type == "float" else value
        if len(values) == len(fields(cls)):
            out.append(cls(**values))
    return tuple(out)


def parse_report(path: Path) -> Report:
    """Read and validate one shard's ``report.json``; all problems at once."""
    doc = load_json_object(path, error=PackagingError)
    problems: list[str] = []
    mode = doc.get("mode")
    if mode != "kpack":
        problems.append(f"mode: expected 'kpack', got {mode!r}")
    version = doc.get("version")
    if not isinstance(version, str):
        problems.append(f"version: expected a string, got {version!r}")
    device = _rows(doc, "device_wheels", DeviceRow, problems)
    targets = _rows(doc, "targets", TargetRow, problems)
    generic = _rows(doc, "generic", GenericRow, problems)
    if problems:
        raise PackagingError("invalid report", path=path, problems=problems)
    return Report(str(version), str(mode), device, targets, generic)


def _list_shard(
    directory: Path, problems: list[str], used: dict[Path, Path]
) -> tuple[list[Path], Report | None]:
    try:
        entries = sorted(directory.iterdir())
    except OSError as exc:
        problems.append(f"{directory}: cannot list: {exc}")
        return [], None
    archives: list[Path] = []
    report = None
    found: Path | None = None
    for entry in entries:
        if entry.is_symlink() or not entry.is_file():
            problems.append(f"{entry}: unexpected entry (not a regular file)")
        elif entry.name == REPORT_JSON:
            found = entry  # a shard from before reports moved out of dist/
        elif entry.name != REPORT_MD:
            archives.append(entry)
    beside = directory.parent / REPORT_JSON  # where the builder writes it: next to dist/
    if found is None and beside.is_file():
        found = beside
    if found is not None:
        other = used.setdefault(found.resolve(), directory)
        if other != directory:
            problems.append(
                f"{found}: the report of both {other} and {directory}; give each "
                "shard its own directory (SHARD/dist with SHARD/report.json)"
            )
            return archives, None
        try:
            report = parse_report(found)
        except PackagingError as exc:
            problems.append(str(exc))
    return archives, report


def scan_shards(directories: Sequence[Path], *, jobs: int | None = None) -> tuple[Shard, ...]:
    """List, classify and hash every shard's files (hashes computed in parallel)."""
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
            digests = dict(zip(paths, pool.map(file_sha256, paths), strict=True))
        sizes = {p: p.stat().st_size for p in paths}
    except OSError as exc:
        raise PackagingError(f"cannot read shard file: {exc}") from exc
    return tuple(
        Shard(
            Path(directory),
            tuple(DistFile(p, *classified[p], sizes[p], digests[p]) for p in archives),
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


def _normal(version: str) -> str:
    try:
        return str(Version(version))
    except InvalidVersion:
        return version


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
    by_name = {f.name: f for f in files}
    for row in (*device, *generic):
        f = by_name.get(row.wheel)
        if f is None:
            problems.append(f"report.json lists {row.wheel}, which no shard holds")
        elif f.size != row.size:
            problems.append(f"report.json: {row.wheel} size {row.size}, but the file has {f.size}")
    problems += [
        f"report.json has no device_wheels row for {f.name}"
        for f in files
        if f.kind is Kind.DEVICE and f.name not in {r.wheel for r in device}
    ]
    device.sort(key=lambda r: (r.target, r.wheel))
    return Report(version, "kpack", tuple(device), _target_rows(files), reports[0].generic)


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


def _write_reports(plan: AssemblyPlan, output: Path) -> None:
    """The merged report next to the output dist (never inside it: dist/ holds
    distributions only, so ``twine upload dist/*`` works as is)."""
    if plan.report is None:
        return
    for name, text in (
        (REPORT_JSON, plan.report.to_json()),
        (REPORT_MD, render_markdown(plan.report)),
    ):
        final = output.parent / name
        tmp = final.with_name(f".{name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, final)


def write_assembly(plan: AssemblyPlan, output: Path, *, index: Path | None = None) -> None:
    """Write the merged dist (and the PEP 503 index) atomically: all or nothing."""
    output, index = Path(output), Path(index) if index is not None else None
    _check_free(output, "--output")
    if index is not None:
        _check_free(index, "--index")
        out_abs, index_abs = output.resolve(), index.resolve()
        if index_abs == out_abs or out_abs in index_abs.parents or index_abs in out_abs.parents:
            raise UsageError("--index and --output must be separate directories", path=index)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_dir_name(output.parent, f".{output.name}.", ".tmp")
    index_done = False
    try:
        _populate(plan, make_temp_dir(tmp))
        tmp.chmod(0o755)
        if index is not None:
            write_simple_index(tmp, index, digests={f.name: f.sha256 for f in plan.files})
            index_done = True
        with suppress(FileNotFoundError):
            output.rmdir()  # empty, checked above
        tmp.rename(output)
        _write_reports(plan, output)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if index_done and index is not None:
            shutil.rmtree(index, ignore_errors=True)
        if isinstance(exc, OSError):
            raise PackagingError(f"cannot write the output: {exc}", path=output) from exc
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


def run(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s: %(message)s",
    )
    version = None
    if args.version is not None and args.version.strip():
        try:
            version = str(Version(args.version.strip()))
        except InvalidVersion as exc:
            raise UsageError(f"--version {args.version!r} is not a PEP 440 version") from exc
    dirs = [Path(d) for d in args.input]
    problems = [f"{d}: not a directory" for d in dirs if not d.is_dir()]
    resolved = [d.resolve() for d in dirs]
    problems += [f"{d}: given twice" for i, d in enumerate(dirs) if resolved[i] in resolved[:i]]
    if problems:
        raise UsageError("bad --input", problems=problems)
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
