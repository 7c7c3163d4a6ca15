"""A shard plan of a wheel split for a CI matrix: ``kpack split-wheel --input W
--print-shards N`` (the builder's ``--print-shards``, for one fat wheel).

The input is read as the split reads it (verified, its fat binaries found by their bytes),
and each fat binary's code objects are listed, not split: each device wheel's key costs
the bytes of its code objects (each once, however many wrappers point at it) and database
files. The keys are spread over at most N shards by that cost
(:func:`kpack.common.balance.balance`); every shard reads the whole wheel and writes the
host wheel, so those costs are the same in each. Each shard's ``args`` are what it adds
after ``kpack split-wheel --input IN/<wheel> --output-dir OUT``: its ``--targets`` and
every option of the plan's command line that shapes the outputs (resolved, so a
``--wheel-type`` preset is spelled out); ``inputs`` names the one input it reads (the
wheel, or the unpacked wheel directory). A wheel without device code is one shard that
splits the whole wheel.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kpack.common.balance import balance
from kpack.databases import load_handlers
from kpack.errors import UsageError
from kpack.targets import target_order
from kpack.transform import extract_kernels
from kpack.wheelfile import DEFAULT_LIMITS
from kpack.wheelsplit._bundles import bundle_key
from kpack.wheelsplit._input import open_source
from kpack.wheelsplit._options import SplitOptions
from kpack.wheelsplit._plan import SplitPlan, plan_split
from kpack.wheelsplit._shards import TARGETS_FLAG

__all__ = ["WheelShard", "device_costs", "passed_on", "plan_wheel_shards"]


@dataclass(frozen=True, kw_only=True)
class WheelShard:
    """One job of the matrix."""

    name: str
    args: tuple[str, ...]
    inputs: tuple[str, ...]
    targets: tuple[str, ...]
    read_bytes: int  # the input wheel: every shard reads all of it
    device_bytes: int  # the code objects and database files of its device wheels

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "args": list(self.args),
            "inputs": list(self.inputs),
            "targets": list(self.targets),
            "read_bytes": self.read_bytes,
            "device_bytes": self.device_bytes,
        }


def plan_wheel_shards(wheel: Path, count: int, options: SplitOptions) -> list[WheelShard]:
    """At most ``count`` shards for splitting ``wheel`` with ``options``."""
    check_plannable(count, options)
    tmp_parent = Path(options.tmp_dir) if options.tmp_dir is not None else None
    with tempfile.TemporaryDirectory(prefix="kpack-print-shards-", dir=tmp_parent) as tmp:
        source = open_source(Path(wheel), Path(tmp), options.limits, index=False)
        plan = plan_split(
            source.wheel, options.overlay_root, load_handlers(options.databases), options.keep_fat
        )
        costs = device_costs(plan, source.wheel.root)
    common = passed_on(options)
    name = Path(wheel).name  # what each shard reads: the wheel, or the unpacked wheel dir
    if not costs:
        return [_shard("all", (), common, name, source.size, costs)]
    groups = [sorted(g, key=target_order) for g in balance(costs, count)]
    return [
        _shard(f"shard-{n}", keys, common, name, source.size, costs)
        for n, keys in enumerate(groups, start=1)
    ]


def check_plannable(count: int, options: SplitOptions) -> None:
    """What ``--print-shards`` cannot plan is a :class:`UsageError` before any work."""
    if count < 1:
        raise UsageError(f"--print-shards {count}: give at least 1")
    if options.targets is not None:
        raise UsageError(f"--print-shards plans {TARGETS_FLAG} itself")
    if options.finalize is not None:
        raise UsageError(
            "--print-shards does not plan --finalize: finalize the wheel first (kpack "
            "finalize-wheel), then plan the split of the finalized wheel"
        )
    if options.output_format != "wheel":
        raise UsageError(
            "--print-shards plans wheel output only: kpack assemble-wheel-shards merges wheels"
        )


def _shard(
    name: str,
    keys: Iterable[str],
    common: list[str],
    filename: str,
    size: int,
    costs: dict[str, int],
) -> WheelShard:
    keys = tuple(keys)
    targets = [TARGETS_FLAG, ",".join(keys)] if keys else []
    return WheelShard(
        name=name,
        args=(*targets, *common),
        inputs=(filename,),
        targets=keys,
        read_bytes=size,
        device_bytes=sum(costs[k] for k in keys),
    )


def device_costs(plan: SplitPlan, root: Path) -> dict[str, int]:
    """Per device-wheel key: the bytes of its code objects (each once) and database files."""
    costs: dict[str, int] = {}
    for fat in plan.fat:
        seen: set[tuple[int, int, str]] = set()
        for kernel in extract_kernels(root / fat.entry.arcname):
            if kernel.location not in seen:
                seen.add(kernel.location)
                key = bundle_key(kernel.target)
                costs[key] = costs.get(key, 0) + kernel.size
    for db in plan.databases:
        costs[db.key] = costs.get(db.key, 0) + db.entry.size
    return costs


def passed_on(options: SplitOptions) -> list[str]:
    """The options every shard runs with: those that shape the outputs, spelled out (never
    ``--jobs``, paths or ``--force``: each machine's own). Free-text values are given as
    ``--flag=value``, so none is read as a flag."""
    out = [f"--device-package-prefix={options.device_package_prefix}"]
    out.append(f"--overlay-root={options.overlay_root or '.'}")
    if options.databases is not None:
        out += ["--databases", *options.databases]
    out += [f"--keep-fat={glob}" for glob in options.keep_fat]
    out += ["--compression", "zstd" if options.scheme == "zstd-per-kernel" else "none"]
    out += ["--compression-level", str(options.level)]
    out += [f"--device-requires-dist={req}" for req in options.requires]
    if options.variant:
        out += ["--generate-variant-wheel", f"--variant-label={options.variant_label}"]
        out += ["--variant-schema", options.variant_schema]
    if options.max_wheel_size is not None:
        out += ["--max-wheel-size", str(options.max_wheel_size)]
    if options.limits.max_ratio != DEFAULT_LIMITS.max_ratio:
        out += ["--max-expansion-ratio", repr(options.limits.max_ratio)]
    if options.limits.max_total != DEFAULT_LIMITS.max_total:
        out += ["--max-unpacked-size", str(options.limits.max_total)]
    return out
