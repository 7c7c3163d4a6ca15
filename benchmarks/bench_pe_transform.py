#!/usr/bin/env python3
"""Benchmark the PE/COFF transform on a large Windows DLL with real ROCm 7 device code.

    python benchmarks/bench_pe_transform.py [--pjrt] [--repeat 3]

Builds a DLL with clang-15 + lld-link-15 whose ``.hip_fat`` holds the offload bundles of
the jax-rocm7-plugin wheel (``--pjrt``: the 41 CCOB v3 bundles of jax-rocm7-pjrt's 520 MB
library, about 400 MB of compressed device code), one wrapper per bundle. Then, in fresh
child processes and alternating, the best of ``--repeat`` runs of:

- the baseline: copying the DLL (``shutil.copyfile``), what any packaging step costs;
- ``kpack.transform.transform_pe``: parse, index every bundle, plan, verify the planned image
  (one streaming pass for the checksum and the read-back), write it.

Prints wall times, the ratio transform / copy, peak RSS (VmHWM of the child) and the
sizes before and after.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

_CHILD = """
import json, shutil, sys, time
sys.path.insert(0, {repo!r})
from pathlib import Path
from kpack.transform import transform_pe
src, dest, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
start = time.perf_counter()
if mode == "copy":
    shutil.copyfile(src, dest)
else:
    transform_pe(src, dest, kernel_name="bin/big.dll", search_paths=["../.kpack/x_@GFXARCH@.kpack"])
wall = time.perf_counter() - start
status = open("/proc/self/status").read().splitlines()
hwm = next(int(x.split()[1]) for x in status if x.startswith("VmHWM")) * 1024
print(json.dumps({{"wall": wall, "rss": hwm}}))
"""


def _run(src: Path, dest: Path, mode: str) -> tuple[float, int]:
    code = _CHILD.format(repo=str(REPO))
    proc = subprocess.run([sys.executable, "-c", code, str(src), str(dest), mode],
                          capture_output=True, text=True, check=False)  # fmt: skip
    if proc.returncode:
        raise SystemExit(f"{mode} failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    dest.unlink()
    return result["wall"], result["rss"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pjrt", action="store_true", help="the 520 MB pjrt library's bundles")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from tests.kpack.pe_fixtures import build_pe
    from tests.pypi_inputs import JAX_PJRT, JAX_PLUGIN, rocm7_bundles

    with tempfile.TemporaryDirectory(prefix="bench-pe-") as tmp:
        work = Path(tmp)
        wheel = JAX_PJRT if args.pjrt else JAX_PLUGIN
        bundles = rocm7_bundles(work / "wheel", None, wheel)
        src = build_pe(work / "big.dll", bundles)
        times: dict[str, list[float]] = {"copy": [], "transform": []}
        rss: dict[str, int] = {"copy": 0, "transform": 0}
        for _ in range(args.repeat):
            for mode in ("copy", "transform"):
                wall, peak = _run(src, work / f"out-{mode}.dll", mode)
                times[mode].append(wall)
                rss[mode] = max(rss[mode], peak)
        from kpack.transform import transform_pe

        out = work / "out.dll"
        transform_pe(src, out, kernel_name="bin/big.dll", search_paths=["x_@GFXARCH@.kpack"])
        copy, transform = min(times["copy"]), min(times["transform"])
        print(f"input: {src.stat().st_size / 1e6:.1f} MB DLL, {len(bundles)} bundles "
              f"({wheel.filename})")  # fmt: skip
        print(f"output: {out.stat().st_size / 1e6:.2f} MB")
        print(f"copy (baseline): {copy:.2f} s, peak RSS {rss['copy'] / 1e6:.0f} MB")
        print(f"transform:       {transform:.2f} s, peak RSS {rss['transform'] / 1e6:.0f} MB")
        print(f"ratio transform / copy: {transform / copy:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
