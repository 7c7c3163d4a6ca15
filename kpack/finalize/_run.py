"""The finalize command and its library calls (:mod:`kpack.finalize` is their face)."""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import tempfile
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from kpack.common.budget import WheelSize, budget_table, check_budget
from kpack.common.cli import format_size
from kpack.common.outputs import Publication, publish_all, staging
from kpack.common.safepath import output_dir_problem
from kpack.errors import PackagingError, UsageError
from kpack.finalize._finalize import FinalizedWheel, finalize
from kpack.finalize._set import RocmSet, platform_of, read_set
from kpack.finalize._targets import expected_targets
from kpack.finalize._version import rocm_version
from kpack.wheelfile import DEFAULT_LIMITS, libdeflate, open_wheel, write_wheel

__all__ = [
    "FinalizeOptions",
    "FinalizeRow",
    "finalize_wheels",
    "finalized_tree",
    "options_from",
    "run",
]

TOOL = "kpack finalize-wheel"
RECORD_DIR = ".kpack-finalize-wheel"

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class FinalizeOptions:
    rocm_version: str
    rocm_set: Path
    expected: tuple[str, ...] = ()
    max_wheel_size: int | None = None
    force: bool = False


@dataclass(frozen=True, kw_only=True)
class FinalizeRow:
    """One input and what became of it."""

    source: str
    output: str
    size: int
    removed: tuple[str, ...]
    edited: int
    pins: tuple[str, ...]
    targets: tuple[str, ...]


def options_from(args: argparse.Namespace) -> FinalizeOptions:
    """The options of ``args`` (``kpack finalize-wheel`` or ``split-wheel --finalize``)."""
    if args.rocm_version is None or args.rocm_set is None:
        raise UsageError("--finalize needs --rocm-version and --rocm-set")
    version = rocm_version(args.rocm_version)
    if not Path(args.rocm_set).is_dir():
        raise UsageError("--rocm-set: not a directory", path=args.rocm_set)
    return FinalizeOptions(
        rocm_version=str(version),
        rocm_set=Path(args.rocm_set),
        expected=expected_targets(args.expected_gpu_target or ()),
        max_wheel_size=getattr(args, "max_wheel_size", None),
        force=bool(getattr(args, "force", False)),
    )


def _set_for(tag: str, options: FinalizeOptions, cache: dict[str, RocmSet]) -> RocmSet:
    platform = platform_of(tag)
    if platform not in cache:
        rocm = read_set(options.rocm_set, platform)
        if str(rocm.version) != options.rocm_version:
            raise UsageError(
                f"--rocm-set holds the set {rocm.version}, not --rocm-version "
                f"{options.rocm_version}",
                path=options.rocm_set,
            )
        cache[platform] = rocm
    return cache[platform]


def finalize_wheels(
    wheels: Sequence[Path], output_dir: Path, options: FinalizeOptions
) -> tuple[list[FinalizeRow], tuple[WheelSize, ...]]:
    """Finalize ``wheels`` into ``output_dir``, all or nothing."""
    libdeflate()
    output_dir = Path(output_dir).absolute()
    sets: dict[str, RocmSet] = {}
    rows = []
    with ExitStack() as stack:
        dist = stack.enter_context(staging(output_dir, TOOL))
        work = stack.enter_context(staging(output_dir, TOOL))
        for index, path in enumerate(wheels):
            wheel = open_wheel(Path(path), work / f"in{index}", DEFAULT_LIMITS)
            rocm = _set_for(wheel.tag, options, sets)
            done = finalize(wheel, rocm, options.expected, work / f"edit{index}")
            written = _write(done, dist)
            rows.append(_row(Path(path).name, written, done))
            shutil.rmtree(work / f"in{index}", ignore_errors=True)
        budget = check_budget(sorted(dist.glob("*.whl")), options.max_wheel_size)
        outputs = tuple(sorted(os.listdir(dist)))
        record = f"{RECORD_DIR}/finalize.json"
        publish_all(
            [Publication(dest=output_dir, staged=dist, outputs=outputs, record=record)],
            tool=TOOL,
            force=options.force,
        )
    return rows, budget


def _write(done: FinalizedWheel, dest: Path) -> Path:
    """The wheel of ``done`` in ``dest`` (a build tag kept in its name)."""
    scratch = Path(tempfile.mkdtemp(prefix=".wheel-", dir=dest))
    try:
        result = write_wheel(
            scratch,
            dist_name=done.name,
            version=done.version,
            tag=done.tag,
            members=done.members,
            metadata=done.metadata,
            wheel_info=done.wheel_info,
        )
        name = result.path.name
        if done.build is not None:
            head = name.split("-", 2)[:2]
            name = "-".join([*head, done.build, done.tag]) + ".whl"
        final = dest / name
        if final.exists():
            raise PackagingError("two inputs finalize to the same wheel", path=final.name)
        os.replace(result.path, final)
        return final
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _row(source: str, written: Path, done: FinalizedWheel) -> FinalizeRow:
    return FinalizeRow(
        source=source,
        output=written.name,
        size=written.stat().st_size,
        removed=done.plan.removed,
        edited=len(done.plan.edits),
        pins=done.pins,
        targets=tuple(sorted(done.targets)),
    )


def finalized_tree(
    input_wheel: Path, options: FinalizeOptions, work: Path
) -> tuple[Path, FinalizedWheel]:
    """``split-wheel --finalize``: the finalized wheel unpacked into ``work/finalized``
    (unchanged files hard-linked from the extraction), for the splitter to read."""
    wheel = open_wheel(Path(input_wheel), work / "finalize-in", DEFAULT_LIMITS)
    rocm = _set_for(wheel.tag, options, {})
    done = finalize(wheel, rocm, options.expected, work / "finalize-edit")
    root = work / "finalized"
    generated = {
        f"{done.dist_info}/METADATA": done.metadata,
        f"{done.dist_info}/WHEEL": done.wheel_info,
    }
    for member in done.members:
        dest = root / member.arcname
        dest.parent.mkdir(parents=True, exist_ok=True)
        assert isinstance(member.source, Path)
        os.link(member.source, dest)
    for arcname, data in generated.items():
        (root / arcname).parent.mkdir(parents=True, exist_ok=True)
        (root / arcname).write_bytes(data)
    return root, done


def _print(rows: list[FinalizeRow], budget: tuple[WheelSize, ...]) -> None:
    for row in rows:
        print(f"{row.source} -> {row.output} ({format_size(row.size)})")
        print(f"  requires: {', '.join(row.pins)}")
        print(f"  ELF files relinked: {row.edited}; vendored copies removed: {len(row.removed)}")
        for name in row.removed:
            print(f"    - {name}")
        print(f"  GPU targets: {', '.join(row.targets) or 'none'}")
    for line in budget_table(budget):
        print(line)


def _inputs(args: argparse.Namespace) -> list[Path]:
    wheels = [Path(w) for w in args.wheels]
    if args.input_dir is not None:
        if not Path(args.input_dir).is_dir():
            raise UsageError("--input-dir: not a directory", path=args.input_dir)
        wheels += sorted(Path(args.input_dir).glob("*.whl"))
    if not wheels:
        raise UsageError("give wheels to finalize (WHEEL… or --input-dir DIR)")
    for wheel in wheels:
        if not wheel.is_file():
            raise UsageError("no such wheel", path=wheel)
    return list(dict.fromkeys(wheels))


def run(args: argparse.Namespace) -> int:
    """``kpack finalize-wheel``: finalize, print what was done; the last line is the output
    directory."""
    options = options_from(args)
    wheels = _inputs(args)
    problem = output_dir_problem(args.output_dir)
    if problem is not None:
        raise UsageError(f"--output-dir {problem}", path=args.output_dir)
    rows, budget = finalize_wheels(wheels, args.output_dir, options)
    if not getattr(args, "quiet", False):
        _print(rows, budget)
    print(Path(args.output_dir).absolute())
    return 0
