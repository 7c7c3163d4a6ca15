"""Every figure of the acceptance criterion in one run, each judged against its target.

    python benchmarks/bench_summary.py [--therock DIR --therock-python PY]
                                       [--only device,build,split]

Runs, one after another, each in its own process with ``--json`` into a temporary dir (their
own output is shown as they run; about six minutes in all, so run it on an idle machine):

- ``device``: ``bench_device_compression.py --pypi --pypi10 --levels 3 --ours D --ldm-at ''
  --split-levels 3,D --repeat 2``, D being ``kpack.archive.DEFAULT_LEVEL``;
- ``build``: ``bench_build.py --repeat 3`` (with ``--therock DIR --therock-python PY`` when
  given here);
- ``split``: ``bench_split_wheel.py --repeat 2`` with each of ``--pypi``, ``--pypi10`` and
  ``--pypi-plain``.

Then it prints one table: each criterion, the measured figure, the target and whether it is
met. Hard targets: the builder <= 0.30x ``zip -r -6``; >= 5 times as fast as TheRock's
builder (only when ``--therock`` is given); each split <= 0.5x the rezip at <= 300 MB peak
RSS; the builder's and every split's outputs byte-identical across their runs. The default
device level against level 3 is reported per input against the issue's target, "about 0.9x
bytes at <= 1.2x split time" (bytes count as about 0.9x up to 0.92x), and judged, but as a
soft target: it is not in the exit status. Exit status 0 if every hard target is met, else 1,
naming the ones that are not (a benchmark that fails counts as not met). ``--only`` runs a
subset of the sections.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path[:0] = [str(ROOT)]

from kpack.archive import DEFAULT_LEVEL  # noqa: E402

SECTIONS = ("device", "build", "split")
SPLIT_INPUTS = (
    ("--pypi", "jax-rocm7-pjrt"),
    ("--pypi10", "jax-rocm10-pjrt"),
    ("--pypi-plain", "jax-rocm60-pjrt"),
)

# The targets.
BYTES_ABOUT = 0.92  # "about 0.9x" device bytes, at most
SPLIT_TIME = 1.2  # the default's whole split against level 3's
BUILD_VS_ZIP = 0.30
THEROCK_SPEEDUP = 5.0
SPLIT_VS_REZIP = 0.5
SPLIT_RSS = 300e6


@dataclass(frozen=True)
class Step:
    section: str
    name: str
    argv: list[str]  # the script and its options, --json excluded
    json: Path


@dataclass(frozen=True)
class Row:
    criterion: str
    measured: str
    target: str
    met: bool | None  # None: not run
    hard: bool = True


def plan(args: argparse.Namespace, tmp: Path) -> list[Step]:
    steps = []
    if "device" in args.only:
        level = str(DEFAULT_LEVEL)
        argv = ["bench_device_compression.py", "--pypi", "--pypi10", "--levels", "3"]
        argv += ["--ours", level, "--ldm-at", "", "--split-levels", f"3,{level}", "--repeat", "2"]
        steps.append(Step("device", "device compression", argv, tmp / "device.json"))
    if "build" in args.only:
        argv = ["bench_build.py", "--repeat", "3"]
        if args.therock is not None:
            # the benchmarks run in the repository: paths made absolute (no symlink resolved,
            # a venv's python stays the venv's)
            argv += ["--therock", os.path.abspath(args.therock)]
            if args.therock_python:
                python = args.therock_python
                argv += [
                    "--therock-python",
                    os.path.abspath(python) if os.sep in python else python,
                ]
        steps.append(Step("build", "builder", argv, tmp / "build.json"))
    if "split" in args.only:
        for flag, label in SPLIT_INPUTS:
            argv = ["bench_split_wheel.py", "--repeat", "2", flag]
            steps.append(Step("split", label, argv, tmp / f"split-{label}.json"))
    return steps


def command(step: Step) -> list[str]:
    return [sys.executable, str(BENCH / step.argv[0]), *step.argv[1:], "--json", str(step.json)]


def run(step: Step) -> tuple[int, dict | None]:
    """Run one benchmark, its output shown; (exit status, its JSON or None)."""
    print(f"\n== {shlex.join(step.argv)}", flush=True)
    rc = subprocess.run(command(step), cwd=ROOT, check=False).returncode
    try:
        return rc, json.loads(step.json.read_text())
    except (OSError, ValueError):
        return rc, None


def _mb(n: float) -> str:
    return f"{n / 1e6:.0f} MB"


def device_rows(doc: dict) -> list[Row]:
    """Per input: the default level's device bytes and whole split time against level 3's,
    judged against the issue's soft target (about 0.9x bytes at <= 1.2x split time)."""
    rows = []
    level = doc["default_level"]
    bytes_target = f"about 0.9x bytes (<= {BYTES_ABOUT}x)"
    time_target = f"<= {SPLIT_TIME}x split time"
    for inp in doc["inputs"]:
        name = inp["input"].split("-")[0].replace("_", "-")
        ratio, split = inp["bytes_ratio"], inp["split_ratio"]
        if ratio is None:
            measured = "not measured"
        else:
            ours, base = inp["default"]["bytes"], inp["level3"]["bytes"]
            measured = f"{ratio:.3f}x ({ours / 1e6:.2f} MB vs {base / 1e6:.2f} MB)"
        met = ratio is not None and ratio <= BYTES_ABOUT
        rows.append(
            Row(
                f"device bytes, level {level} vs 3, {name}", measured, bytes_target, met, hard=False
            )
        )
        if split is None:
            measured = "not measured"
        else:
            walls = inp["split_wall"]
            measured = f"{split:.2f}x ({walls[str(level)]:.2f} s vs {walls['3']:.2f} s)"
        met = split is not None and split <= SPLIT_TIME
        rows.append(
            Row(f"split time, level {level} vs 3, {name}", measured, time_target, met, hard=False)
        )
    return rows


def build_rows(doc: dict, therock: bool) -> list[Row]:
    ratio = doc["ratio_zip"]
    rows = [
        Row(
            "builder vs zip -r -6",
            f"{ratio:.2f}x ({doc['ours_wall']:.2f} s vs {doc['zip_wall']:.2f} s), "
            f"peak RSS {_mb(doc['ours_peak_rss'])}",
            f"<= {BUILD_VS_ZIP:.2f}x",
            ratio <= BUILD_VS_ZIP,
        )
    ]
    criterion = "builder vs TheRock's builder"
    target = f">= {THEROCK_SPEEDUP:g}x as fast"
    if doc["therock_speedup"] is not None:
        speedup = doc["therock_speedup"]
        rows.append(
            Row(
                criterion,
                f"{speedup:.1f}x as fast ({doc['ours_wall']:.2f} s vs "
                f"{doc['therock_wall']:.2f} s), dist bytes {doc['dist_ratio_therock']:.3f}x",
                target,
                speedup >= THEROCK_SPEEDUP,
            )
        )
    else:
        why = "failed" if therock else "not run (no --therock)"
        rows.append(Row(criterion, why, target, False if therock else None))
    same = doc["byte_identical"]
    rows.append(
        Row(
            f"builder outputs byte-identical across {doc['repeat']} runs",
            "yes" if same else "no",
            "byte-identical",
            same,
        )
    )
    return rows


def split_rows(label: str, doc: dict) -> list[Row]:
    ratio, rss = doc["ratio"], doc["split_peak_rss"]
    same = doc["byte_identical"]
    return [
        Row(
            f"split vs rezip, {label}",
            f"{ratio:.2f}x ({doc['split_wall']:.2f} s vs {doc['rezip_wall']:.2f} s), "
            f"peak RSS {_mb(rss)}",
            f"<= {SPLIT_VS_REZIP}x at <= {_mb(SPLIT_RSS)}",
            ratio <= SPLIT_VS_REZIP and rss <= SPLIT_RSS,
        ),
        Row(
            f"split outputs byte-identical across {doc['repeat']} runs, {label}",
            "yes" if same else "no",
            "byte-identical",
            same,
        ),
    ]


def rows_of(step: Step, rc: int, doc: dict | None, therock: bool) -> list[Row]:
    if doc is None:
        failed = f"failed (exit status {rc}, no JSON)"
        return [Row(shlex.join(step.argv), failed, "runs", False)]
    if step.section == "device":
        return device_rows(doc)
    if step.section == "build":
        return build_rows(doc, therock)
    return split_rows(step.name, doc)


def verdict(row: Row) -> str:
    text = "not run" if row.met is None else "met" if row.met else "NOT MET"
    return text if row.hard else f"{text} (soft)"


def print_table(rows: list[Row]) -> None:
    header = ("criterion", "measured", "target", "verdict")
    cells = [header] + [(r.criterion, r.measured, r.target, verdict(r)) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(3)]
    print()
    for cell in cells:
        print("  ".join(text.ljust(w) for text, w in zip(cell[:3], widths, strict=True)), cell[3])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--therock", type=Path, help="a TheRock checkout: also time its builder")
    parser.add_argument("--therock-python", help="the Python to run TheRock's builder with")
    parser.add_argument(
        "--only", default=",".join(SECTIONS), help="a subset of: device,build,split"
    )
    parser.add_argument("--dry-run", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    only = [s for s in args.only.split(",") if s]
    unknown = sorted(set(only) - set(SECTIONS))
    if unknown or not only:
        parser.error(f"--only: {','.join(unknown) or 'nothing'}; choose from {','.join(SECTIONS)}")
    args.only = only
    if args.therock_python and args.therock is None:
        parser.error("--therock-python needs --therock")
    with tempfile.TemporaryDirectory(prefix="bench-summary-") as tmp:
        steps = plan(args, Path(tmp))
        if args.dry_run:
            for step in steps:
                print(shlex.join(command(step)))
            return 0
        print(f"load average at the start: {os.getloadavg()[0]:.2f} (the machine should be idle)")
        start = time.perf_counter()
        rows: list[Row] = []
        for step in steps:
            rc, doc = run(step)
            rows += rows_of(step, rc, doc, args.therock is not None)
    print_table(rows)
    print(f"({time.perf_counter() - start:.0f} s in all)")
    if any(not r.hard for r in rows):
        print(
            "(soft) the issue's target for the default level, \"about 0.9x bytes at <= 1.2x "
            'split time": judged, not in the exit status'
        )
    soft = [r.criterion for r in rows if not r.hard and r.met is False]
    if soft:
        print("soft target not met: " + "; ".join(soft))
    failed = [r.criterion for r in rows if r.hard and r.met is False]
    if failed:
        print("NOT MET: " + "; ".join(failed))
        return 1
    skipped = "build" in args.only and args.therock is None
    print("every hard target met" + (" (TheRock's builder not run)" if skipped else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
