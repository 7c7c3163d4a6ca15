"""The assembly planned from the scanned shards, and nothing written.

:func:`plan_assembly` checks the shards against each other and against what the caller
expects: one mode, version (``--version`` when given) and platform, generic files the same
in every shard and in each, device wheels that do not collide, one file per project, the
required dists present and, with the expected targets, a device wheel for each (a legacy
set: a libraries wheel for each expected family). It merges the reports
(:mod:`build_tools.shards.merge`) and returns an :class:`AssemblyPlan`, or fails with every
problem at once.

A legacy set (``rocm-sdk-libraries-<family>``, no device wheels; its report says
``legacy``) is not sharded by target: its inputs must hold the same files, and the
assembly is the set as it is, checked, with its report and (``--index``) its index.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from build_tools.report import Report
from kpack.errors import PackagingError, UsageError
from kpack.targets import target_order

from .merge import merge_reports
from .report import REPORT_JSON, parse_version
from .requires import check_sdist_requirements
from .scan import (
    DEVEL,
    LIBRARIES,
    META_SDIST,
    REQUIRED_WHEELS,
    DistFile,
    Kind,
    Shard,
    device_target,
)

__all__ = ["AssemblyPlan", "plan_assembly"]


@dataclass(frozen=True)
class AssemblyPlan:
    """What the output will hold; only :func:`write_assembly` writes it."""

    version: str
    files: tuple[DistFile, ...]  # sorted by name
    report: Report | None
    notices: tuple[str, ...]
    mode: str = "kpack"  # or "legacy"


def plan_assembly(
    shards: Sequence[Shard],
    *,
    expected_targets: Iterable[str] | None = None,
    expected_families: Iterable[str] | None = None,
    version: str | None = None,
) -> AssemblyPlan:
    """Check the shards against each other and the expectations; every problem at once.

    ``expected_targets``: the targets the family flags expand to, checked in a kpack set;
    ``expected_families``: the families themselves, checked in a legacy set (``None``: not
    checked).
    """
    if not shards:
        raise UsageError("no --input shard given")
    problems: list[str] = []
    mode = _one_mode(shards, problems)
    found = _one_version(shards, version, problems)
    _one_platform(shards, problems)
    files = _merge_generic(shards, problems) + _merge_device(shards, problems)
    _one_file_per_project(files, problems)
    devel_seen = any(f.project == DEVEL for s in shards for f in s.files)
    _check_required(files, devel_seen, mode, problems)
    check_sdist_requirements(files, problems)
    notices: list[str] = []
    if mode == "legacy" and expected_families is not None:
        _check_families(files, expected_families, problems)
    elif mode == "kpack" and expected_targets is not None:
        _check_targets(files, expected_targets, problems)
    else:
        notices.append("no family flag given: target completeness not checked")
    files.sort(key=lambda f: f.name)
    report = merge_reports(shards, files, found, problems, notices, mode=mode)
    if problems:
        raise PackagingError("cannot assemble the shards", problems=problems)
    return AssemblyPlan(found, tuple(files), report, tuple(notices), mode)


def _mode_of(shard: Shard) -> str:
    """The shard's report says; without one, its files do (a family's libraries wheel)."""
    if shard.report is not None:
        return shard.report.mode
    legacy = any(f.project.startswith(f"{LIBRARIES}-") for f in shard.files)
    return "legacy" if legacy else "kpack"


def _one_mode(shards: Sequence[Shard], problems: list[str]) -> str:
    modes: dict[str, list[str]] = {}
    for shard in shards:
        modes.setdefault(_mode_of(shard), []).append(str(shard.directory))
    if len(modes) > 1:
        shown = "; ".join(f"{m} in {', '.join(dirs)}" for m, dirs in sorted(modes.items()))
        problems.append(f"kpack and legacy sets cannot be assembled together: {shown}")
    return min(modes)


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
    parsed = parse_version(version)
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
    common = {d for dirs in holders.values() for d in dirs}  # device-only shards hold none
    for name, dirs in sorted(holders.items()):
        problems += [
            f"generic file {name} is in {first[name].path.parent} but missing from {s.directory}"
            for s in shards
            if s.directory in common and s.directory not in dirs
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


def _check_required(
    files: Sequence[DistFile], devel_seen: bool, mode: str, problems: list[str]
) -> None:
    have = {(f.project, f.name.endswith(".whl")) for f in files}
    if (META_SDIST, False) not in have:
        problems.append(f"required dist missing: the {META_SDIST} sdist")
    required = [*REQUIRED_WHEELS, *([DEVEL] if devel_seen else [])]
    if mode == "legacy":  # a libraries wheel per family instead
        required.remove(LIBRARIES)
        if not any(p.startswith(f"{LIBRARIES}-") and wheel for p, wheel in have):
            problems.append(f"required dist missing: a {LIBRARIES}-<family> wheel")
    problems += [f"required dist missing: the {p} wheel" for p in required if (p, True) not in have]


def _check_families(
    files: Sequence[DistFile], expected: Iterable[str], problems: list[str]
) -> None:
    built = {f.project for f in files}
    missing = sorted(f for f in expected if canonicalize_name(f"{LIBRARIES}-{f}") not in built)
    if missing:
        problems.append(f"missing libraries wheels for expected families: {', '.join(missing)}")


def _check_targets(files: Sequence[DistFile], expected: Iterable[str], problems: list[str]) -> None:
    built = {f.target for f in files if f.kind is Kind.DEVICE}
    missing = sorted((t for t in expected if device_target(t) not in built), key=target_order)
    if missing:
        problems.append(f"missing device wheels for expected targets: {', '.join(missing)}")
