"""Benchmark the wheel splitter against unzipping and re-zipping the same wheel.

    python benchmarks/bench_split_wheel.py [-j N] [--repeat N]
                                           [--pypi | --pypi-windows | --wheel X.whl]
                                           [--json PATH]

Input: a real ROCm 7 wheel from PyPI with ``--pypi`` (``jax-rocm7-pjrt`` 0.10.0: a 520 MB
``xla_rocm_plugin.so`` whose 41 compressed CCOB bundles hold 1.21 GB of device code,
generic targets included; 137 MB download, cached), ``--pypi10`` (``jax-rocm10-pjrt``
0.12.0: 2.45 GB of device code for 27 targets), ``--pypi-plain`` (``jax-rocm60-pjrt``
0.5.0: 292 MB of device code in plain bundles in a 560 MB library), a real ``win_amd64`` one with
``--pypi-windows`` (``bitsandbytes`` 0.50.2: three ROCm DLLs linked by the Windows HIP SDK
among CUDA, CPU and XPU DLLs; 39 MB), any wheel with ``--wheel``, else a fat
wheel made from Debian's librocsparse when it is in the cache (else librocrand). In this
one run it times (1) ``split_wheel`` at the default zstd level and (2) the baseline: one
Python process re-zipping the same wheel with ``zipfile``, each member streamed from the
input straight into a new ``ZIP_DEFLATED`` level-6 archive (``zout.open(name, "w")``, 1 MiB
copies, nothing extracted to disk); each in a fresh process for its peak RSS (the process
and its workers); the best of ``--repeat`` alternating runs counts, and the split's outputs
must be byte-identical across the runs. Targets: ratio <= 0.5, peak RSS <= 300 MB.
``--json PATH`` also writes the key figures: both best wall times, their ratio, the peak RSS
of each (the most over the runs) and whether the split's outputs were byte-identical.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.rezip import rezip  # noqa: E402  (the baseline, shared with bench_small_wheels)

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
    from sample_tree.debian_inputs import fetch_debs

    root = fetch_debs(["librocrand1"])["librocrand1"]
    return root / "usr/lib/x86_64-linux-gnu/librocrand.so.1.1", "librocrand.so.1"


def _child(mode: str, wheel: Path, out: Path, jobs: int, root: str) -> None:
    start = time.perf_counter()
    if mode == "split":
        from kpack.wheelsplit import SplitOptions, split_wheel

        split_wheel(wheel, out, SplitOptions(root, "amd-device", ("rocblas",), jobs=jobs))
    else:  # the baseline: one process re-zips the wheel, member by member, nothing on disk
        rezip(wheel, out)
    wall = time.perf_counter() - start
    rss = (
        max(
            resource.getrusage(who).ru_maxrss
            for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
        )
        * 1024
    )
    print(json.dumps({"wall": wall, "rss": rss}))


def _measure(mode: str, wheel: Path, out: Path, jobs: int, root: str) -> dict[str, float]:
    import shutil

    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, __file__, "--child", mode, str(wheel), str(out), root, "-j", str(jobs)]
    result = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--pypi", action="store_true", help="the jax-rocm7-pjrt wheel")
    parser.add_argument("--pypi10", action="store_true", help="the jax-rocm10-pjrt wheel")
    parser.add_argument(
        "--pypi-plain", action="store_true", help="jax-rocm60-pjrt: 292 MB in plain bundles"
    )
    parser.add_argument(
        "--pypi-windows", action="store_true", help="the bitsandbytes win_amd64 wheel"
    )
    parser.add_argument("--wheel", type=Path, help="a wheel to split")
    parser.add_argument("--overlay-root", default=None, help="default: the wheel's package dir")
    parser.add_argument("--json", type=Path, help="also write the key figures here")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child[0], Path(args.child[1]), Path(args.child[2]), args.jobs, args.child[3])
        return 0
    with tempfile.TemporaryDirectory(dir=Path.home()) as tmp:
        work = Path(tmp)
        if args.pypi or args.pypi10 or args.pypi_plain:
            from tests.pypi_inputs import JAX10_PJRT, JAX60_PJRT, JAX_PJRT, fetch_wheel

            spec = JAX_PJRT if args.pypi else JAX10_PJRT if args.pypi10 else JAX60_PJRT
            wheel, root = fetch_wheel(spec), spec.overlay_root
            what = "real ROCm wheel from PyPI"
        elif args.pypi_windows:
            from tests.pypi_inputs import BITSANDBYTES_WIN, fetch_wheel

            wheel, root = fetch_wheel(BITSANDBYTES_WIN), BITSANDBYTES_WIN.overlay_root
            what = "real win_amd64 wheel from PyPI"
        elif args.wheel is not None:
            wheel, root, what = args.wheel, args.overlay_root or "", "given wheel"
        else:
            from tests.kpack.wheel_fixtures import make_fat_wheel

            library, soname = _library()
            wheel = make_fat_wheel(work / "in", library, soname=soname)
            root, what = "torch/", f"fat wheel around {library.name}"
        root = args.overlay_root or root
        wheel_bytes = wheel.stat().st_size  # the wheel may live in the temporary dir
        print(f"input: {wheel.name} ({what}, {wheel.stat().st_size / 1e6:.1f} MB), "
              f"overlay root {root}, -j {args.jobs}")  # fmt: skip
        best: dict[str, dict[str, float]] = {}
        peak: dict[str, float] = {}
        outputs: set[tuple[tuple[str, str], ...]] = set()
        for _ in range(args.repeat):
            for mode in ("split", "rezip"):
                m = _measure(mode, wheel, work / mode, args.jobs, root)
                if mode not in best or m["wall"] < best[mode]["wall"]:
                    best[mode] = m
                peak[mode] = max(peak.get(mode, 0.0), m["rss"])
                if mode == "split":
                    outputs.add(tree_digests(work / mode))
    for name, mode in (("split_wheel", "split"), ("rezip", "rezip")):
        m = best[mode]
        print(f"{name:12s} wall {m['wall']:7.2f} s   peak RSS {peak[mode] / 1e6:8.1f} MB")
    ratio = best["split"]["wall"] / best["rezip"]["wall"]
    print(f"(c) ratio split / rezip: {ratio:.2f}x (target <= 0.5; peak RSS <= 300 MB)")
    print(f"split outputs byte-identical across {args.repeat} runs: {len(outputs) == 1}")
    if args.json:
        doc = {
            "input": wheel.name,
            "input_bytes": wheel_bytes,
            "jobs": args.jobs,
            "repeat": args.repeat,
            "split_wall": best["split"]["wall"],
            "rezip_wall": best["rezip"]["wall"],
            "ratio": ratio,
            "split_peak_rss": peak["split"],
            "rezip_peak_rss": peak["rezip"],
            "byte_identical": len(outputs) == 1,
        }
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if len(outputs) == 1 else 1


def tree_digests(root: Path) -> tuple[tuple[str, str], ...]:
    """(relative path, sha256) of every file under ``root`` but hidden ones (the tool's own
    records, which hold times)."""
    from build_tools.pep503 import file_sha256

    return tuple(
        (str(p.relative_to(root)), file_sha256(p))
        for p in sorted(root.rglob("*"))
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )


if __name__ == "__main__":
    sys.exit(main())
