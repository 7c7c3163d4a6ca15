"""Benchmark: ``kpack.transform`` on Debian's real fat libraries.

For each library (librocrand always, librocsparse when it is in the cache) a fresh child
process runs: inspect, plan (extract + lay out + verify), write; then, in a second child,
``extract_kernels`` plus reading every code-object byte (crc32) as an archive writer
would (once keeping the touched pages, once dropping them with ``MADV_DONTNEED`` every
64 MB as the splitter does). Each child reports wall time per phase and its peak RSS;
file-backed ``mmap`` pages a reader touches count towards RSS until they are dropped.

    python benchmarks/bench_transform.py                  # fetches librocrand if needed
    python benchmarks/bench_transform.py --repeat 3 --keep /tmp/out
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sample_tree.debian_inputs import default_cache_dir, fetch_debs  # noqa: E402

LIBDIR = "usr/lib/x86_64-linux-gnu"

TRANSFORM = """
import json, resource, sys, time
from pathlib import Path
from kpack.transform import inspect_fat_binary, plan_transform
src, dest = Path(sys.argv[1]), Path(sys.argv[2])
t0 = time.perf_counter()
info = inspect_fat_binary(src)
t1 = time.perf_counter()
paths = ["../.kpack/x_@GFXARCH@.kpack"]
plan = plan_transform(src, kernel_name="bench/" + src.name, search_paths=paths)
t2 = time.perf_counter()
plan.edit.write_to(dest)
t3 = time.perf_counter()
print(json.dumps({
    "wrappers": info.wrapper_count, "kernels": len(plan.kernels),
    "removed": plan.removed_bytes, "out_size": dest.stat().st_size,
    "inspect_s": t1 - t0, "plan_s": t2 - t1, "write_s": t3 - t2, "total_s": t3 - t0,
    "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}))
"""

EXTRACT = """
import json, mmap, resource, sys, time, zlib
from pathlib import Path
from kpack.transform import extract_kernels
src, drop = Path(sys.argv[1]), sys.argv[2] == "drop"
t0 = time.perf_counter()
kernels = extract_kernels(src)
t1 = time.perf_counter()
rss_extract = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
total = pending = 0
for k in kernels:
    zlib.crc32(k.data)
    total += len(k.data)
    pending += len(k.data)
    owner = k.data.obj if isinstance(k.data, memoryview) else None
    if drop and pending >= 64 << 20 and isinstance(owner, mmap.mmap):
        owner.madvise(mmap.MADV_DONTNEED)  # clean file pages: dropped, still cached
        pending = 0
t2 = time.perf_counter()
print(json.dumps({
    "kernels": len(kernels), "kernel_bytes": total,
    "extract_s": t1 - t0, "read_all_s": t2 - t1,
    "peak_rss_after_extract_mb": rss_extract,
    "peak_rss_after_reading_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}))
"""


def child(script: str, *args: str) -> dict[str, float]:
    proc = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, cwd=REPO, check=True
    )
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def inputs() -> list[Path]:
    found = [fetch_debs(["librocrand1"])["librocrand1"] / LIBDIR / "librocrand.so.1.1"]
    cached = sorted((default_cache_dir() / "extracted").glob("librocsparse0_*"))
    for root in cached:
        lib = root / LIBDIR / "librocsparse.so.0.1"
        if lib.is_file():
            found.append(lib)
    return found


def best(runs: list[dict[str, float]]) -> dict[str, float]:
    """Per key, the minimum over repeats (times and RSS alike)."""
    return {key: min(run[key] for run in runs) for key in runs[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="directory to keep the transformed files in")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = args.keep or Path(tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        for src in inputs():
            size = src.stat().st_size
            dest = out_dir / src.name
            t = best([child(TRANSFORM, str(src), str(dest)) for _ in range(args.repeat)])
            e = best([child(EXTRACT, str(src), "keep") for _ in range(args.repeat)])
            d = best([child(EXTRACT, str(src), "drop") for _ in range(args.repeat)])
            gb = size / 1e9
            print(
                f"{src.name}: {size / 1e6:.1f} MB, {t['wrappers']:.0f} wrappers, "
                f"{e['kernels']:.0f} kernels ({e['kernel_bytes'] / 1e6:.1f} MB)"
            )
            print(
                f"  transform: inspect {t['inspect_s']:.3f} s, plan+verify {t['plan_s']:.3f} s, "
                f"write {t['write_s']:.3f} s, total {t['total_s']:.3f} s "
                f"({t['total_s'] / gb:.2f} s/GB), peak RSS {t['peak_rss_mb']:.0f} MB; "
                f"removed {t['removed'] / 1e6:.1f} MB, output {t['out_size'] / 1e6:.2f} MB"
            )
            print(
                f"  extract:   {e['extract_s']:.3f} s ({e['extract_s'] / gb:.3f} s/GB), "
                f"peak RSS {e['peak_rss_after_extract_mb']:.0f} MB; reading every kernel "
                f"byte {e['read_all_s']:.3f} s, peak RSS then "
                f"{e['peak_rss_after_reading_mb']:.0f} MB (file-backed mmap pages), "
                f"{d['peak_rss_after_reading_mb']:.0f} MB with MADV_DONTNEED every 64 MB"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
