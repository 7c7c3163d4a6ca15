#!/usr/bin/env python3
"""The wheel split across machines (issue 31, items 5 and 7), measured in one run.

    python benchmarks/bench_wheel_shards.py [--wheel X.whl --overlay-root DIR/ | --pypi10]
                                            [--shards N] [-j N] [--json PATH]

The input: ``--wheel`` (the torch-sized wheel of ``make_release_inputs.py wheel``:
``--overlay-root torch_sized/``), else the real ``jax-rocm10-pjrt`` 0.12.0 from PyPI
(``--pypi10``, the default; 2.45 GB of device code for 27 targets, cached). In this one run,
each command in its own process (its wall time and the peak RSS of it and its workers):

1. the one-machine split, ``kpack split-wheel``;
2. the plan, ``kpack split-wheel --print-shards N``;
3. every shard of the plan, on a directory holding only the input it lists (a hard link),
   with the plan's arguments: bytes read, device bytes, bytes written, wall time, RSS;
4. a shard of one target (of the shard with the most device bytes per target);
5. ``kpack assemble-wheel-shards`` of the shards, and the check that its wheels and report
   are byte-identical to the one-machine split's.

Printed: the slowest shard against the one-machine split (what N machines buy, the plan
and the assembly apart), the one-target shard against it (a shard pays for its own
targets' compression only), and whether the assembly equals the one-machine split.
``--json PATH`` also writes every figure.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PREFIX = "--device-package-prefix=amd-device"


@dataclass(frozen=True)
class Measured:
    """One command in its own process."""

    wall: float
    rss: int  # peak RSS of the process and its workers, bytes
    stdout: str = ""


def _child(argv: list[str]) -> None:
    """Run ``kpack ARGV`` in this process; print its exit status, wall time and peak RSS
    as the last line."""
    from kpack.cli import main

    start = time.perf_counter()
    status = main(argv)
    wall = time.perf_counter() - start
    who = (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    rss = max(resource.getrusage(w).ru_maxrss for w in who) * 1024
    print(json.dumps({"wall": wall, "rss": rss, "status": status}))


def _measure(argv: list[str]) -> Measured:
    """``kpack -q ARGV`` in a fresh process."""
    cmd = [sys.executable, __file__, "--child", json.dumps(["-q", *argv])]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines or json.loads(lines[-1])["status"] != 0:
        raise SystemExit(f"kpack {' '.join(argv)} failed:\n{proc.stdout}{proc.stderr}")
    figures = json.loads(lines[-1])
    return Measured(figures["wall"], figures["rss"], "\n".join(lines[:-1]))


def _bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.iterdir() if p.is_file())


def _digests(directory: Path) -> dict[str, str]:
    out = {}
    for path in sorted(directory.iterdir()):
        if path.is_file() and not path.name.startswith("."):
            digest = hashlib.sha256()
            with path.open("rb") as f:
                while chunk := f.read(1 << 20):
                    digest.update(chunk)
            out[path.name] = digest.hexdigest()
    return out


@dataclass(frozen=True)
class ShardRun:
    name: str
    targets: list[str]
    device_bytes: int
    read: int
    written: int
    run: Measured
    dist: Path


def _shard(wheel: Path, work: Path, name: str, args: list[str], jobs: int) -> tuple[Measured, Path]:
    """One machine of the matrix: an input dir holding only the wheel, then the split."""
    machine = work / name
    (machine / "in").mkdir(parents=True)
    os.link(wheel, machine / "in" / wheel.name)
    out = machine / "dist"
    run = _measure(["split-wheel", "--input", str(machine / "in" / wheel.name),
                    "--output-dir", str(out), "-j", str(jobs), *args])  # fmt: skip
    return run, out


def _same(one: Path, other: Path) -> bool:
    reports = [d.with_name(d.name + "-split-reports") for d in (one, other)]
    return _digests(one) == _digests(other) and _digests(reports[0]) == _digests(reports[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", type=Path, help="a fat wheel (else --pypi10)")
    parser.add_argument("--overlay-root", default=None, help="with --wheel: its package dir")
    parser.add_argument("--pypi10", action="store_true", help="jax-rocm10-pjrt 0.12.0")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(json.loads(args.child))
        return 0
    if args.wheel is not None:
        wheel, root = args.wheel.absolute(), args.overlay_root or "."
    else:
        from tests.pypi_inputs import JAX10_PJRT, fetch_wheel

        wheel, root = fetch_wheel(JAX10_PJRT), JAX10_PJRT.overlay_root
    print(f"input: {wheel.name} ({wheel.stat().st_size / 1e9:.2f} GB), overlay root {root}, "
          f"{args.shards} shards, -j {args.jobs}", flush=True)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-wheel-shards-", dir=wheel.parent) as tmp:
        doc = _run(wheel, root, args.shards, args.jobs, Path(tmp))
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if doc["byte_identical"] else 1


def _run(wheel: Path, root: str, count: int, jobs: int, work: Path) -> dict[str, object]:
    common = [PREFIX, f"--overlay-root={root}"]
    full = work / "full" / "dist"
    one = _measure(["split-wheel", "--input", str(wheel), "--output-dir", str(full),
                    "-j", str(jobs), *common])  # fmt: skip
    print(f"one machine   {one.wall:7.1f} s   peak RSS {one.rss / 1e6:5.0f} MB", flush=True)
    plan_run = _measure(["split-wheel", "--input", str(wheel), "--print-shards", str(count),
                         *common])  # fmt: skip
    print(f"plan          {plan_run.wall:7.1f} s ({plan_run.wall / one.wall:.2f}x)", flush=True)
    shards = []
    for entry in json.loads(plan_run.stdout):
        run, dist = _shard(wheel, work, entry["name"], entry["args"], jobs)
        written = _bytes(dist) + _bytes(dist.with_name("dist-split-reports"))
        shard = ShardRun(entry["name"], entry["targets"], entry["device_bytes"],
                         entry["read_bytes"], written, run, dist)  # fmt: skip
        shards.append(shard)
        print(f"  {shard.name}: {len(shard.targets):2d} targets, read {shard.read / 1e6:.0f} MB "
              f"(device code {shard.device_bytes / 1e6:.0f} MB), wrote {written / 1e6:.0f} MB, "
              f"{run.wall:.1f} s, peak RSS {run.rss / 1e6:.0f} MB", flush=True)  # fmt: skip
    biggest = max(shards, key=lambda s: s.device_bytes / max(1, len(s.targets)))
    target = biggest.targets[0]
    single, _ = _shard(wheel, work, "one-target", ["--targets", target, *common], jobs)
    asm = _measure(["assemble-wheel-shards", *(str(s.dist) for s in shards),
                    "--output-dir", str(work / "assembled" / "dist")])  # fmt: skip
    same = _same(work / "assembled" / "dist", full)
    slowest = max(s.run.wall for s in shards)
    overall = plan_run.wall + slowest + asm.wall
    print(f"slowest shard {slowest:7.1f} s: {slowest / one.wall:.2f}x the one-machine split, "
          f"{one.wall / slowest:.2f}x faster on {len(shards)} machines "
          f"({one.wall / overall:.2f}x with the plan and the assembly)")  # fmt: skip
    print(f"one target    {single.wall:7.1f} s ({target}, 1 of "
          f"{sum(len(s.targets) for s in shards)}): {single.wall / one.wall:.2f}x the "
          f"one-machine split, peak RSS {single.rss / 1e6:.0f} MB")  # fmt: skip
    print(f"assembly      {asm.wall:7.1f} s (hard links; shared files hashed)")
    print(f"assembly byte-identical to the one-machine split: {same}")
    return {
        "input": wheel.name, "input_bytes": wheel.stat().st_size, "jobs": jobs,
        "one_machine": {"wall": one.wall, "rss": one.rss},
        "plan": {"wall": plan_run.wall, "rss": plan_run.rss},
        "shards": [{"name": s.name, "targets": s.targets, "device_bytes": s.device_bytes,
                    "read_bytes": s.read, "written_bytes": s.written, "wall": s.run.wall,
                    "rss": s.run.rss} for s in shards],
        "one_target": {"target": target, "wall": single.wall, "rss": single.rss},
        "assembly": {"wall": asm.wall, "rss": asm.rss},
        "slowest_over_one_machine": slowest / one.wall,
        "one_target_over_one_machine": single.wall / one.wall,
        "byte_identical": same,
    }  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
