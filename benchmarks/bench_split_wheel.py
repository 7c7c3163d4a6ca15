"""Benchmark the wheel splitter against unzipping and re-zipping the same wheel.

Builds a fat wheel from librocsparse when it is in the cache (else librocrand), then,
in this one run, times (1) ``split_wheel`` and (2) extracting the wheel with zipfile
and writing it back with zipfile (deflate), each in a fresh process for its peak RSS.

    python benchmarks/bench_split_wheel.py [-j N]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "kpack")]

CACHE = Path.home() / ".cache/rocm-packaging/extracted"


def _library() -> tuple[Path, str]:
    for pattern, lib, soname in (
        ("librocsparse0_*", "librocsparse.so.0.1", "librocsparse.so.0"),
        ("librocrand1_*", "librocrand.so.1.1", "librocrand.so.1"),
    ):
        for root in sorted(CACHE.glob(pattern)):
            path = root / "usr/lib/x86_64-linux-gnu" / lib
            if path.is_file():
                return path, soname
    from build_tools.debian_inputs import fetch_debs

    root = fetch_debs(["librocrand1"])["librocrand1"]
    return root / "usr/lib/x86_64-linux-gnu/librocrand.so.1.1", "librocrand.so.1"


def _child(mode: str, wheel: Path, out: Path, jobs: int) -> None:
    start = time.perf_counter()
    if mode == "split":
        from kpack.tools.split_python_wheels import SplitOptions, split_wheel

        split_wheel(wheel, out, SplitOptions("torch/", "amd-torch-device", ("rocblas",), jobs=jobs))
    else:
        tree = out / "tree"
        with zipfile.ZipFile(wheel) as z:
            z.extractall(tree)
            names = z.namelist()
        with zipfile.ZipFile(out / wheel.name, "w", zipfile.ZIP_DEFLATED) as z:
            for name in names:
                z.write(tree / name, name)
    wall = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"wall": wall, "rss": rss}))


def _measure(mode: str, wheel: Path, out: Path, jobs: int) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--child", mode, str(wheel), str(out), "-j", str(jobs)]
    result = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child[0], Path(args.child[1]), Path(args.child[2]), args.jobs)
        return 0
    from wheel_fixtures import make_fat_wheel

    library, soname = _library()
    with tempfile.TemporaryDirectory(dir=Path.home()) as tmp:
        work = Path(tmp)
        wheel = make_fat_wheel(work / "in", library, soname=soname)
        size = wheel.stat().st_size
        print(f"input: {wheel.name} with {library.name} ({library.stat().st_size / 1e6:.1f} MB "
              f"library, {size / 1e6:.1f} MB wheel), -j {args.jobs}")  # fmt: skip
        split = _measure("split", wheel, work / "split", args.jobs)
        rezip = _measure("rezip", wheel, work / "rezip", args.jobs)
    for name, m in (("split_wheel", split), ("unzip+rezip", rezip)):
        print(f"{name:12s} wall {m['wall']:7.2f} s   peak RSS {m['rss'] / 1e6:8.1f} MB")
    print(f"ratio split / (unzip + rezip): {split['wall'] / rezip['wall']:.2f}x (aim <= 2x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
