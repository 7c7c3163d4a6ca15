"""Benchmark: ``kpack split-artifacts`` on a real fat library, against ``zstd -3 -T2``.

For each library found (librocsparse.so.0.1 from ``librocsparse0`` when it is in the
Debian cache, and librocrand.so.1.1 from ``librocrand1``), this builds a one-library
artifact (the input is hard-linked, never modified), runs the splitter in a child
process (``python -m kpack split-artifacts -j N``) and reports its wall time, its peak
RSS (the child and its worker processes, from ``wait4``), the archive bytes, and the
same device bytes compressed by ``zstd -3 -T2`` (extracted to a temporary file first).

    python benchmarks/bench_split.py                 # both libraries, if cached
    python benchmarks/bench_split.py --only rocrand --jobs 2 --keep /tmp/bench-out
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kpack.transform import extract_kernels  # noqa: E402

CACHE = Path(os.environ.get("ROCM_PACKAGING_CACHE", Path.home() / ".cache" / "rocm-packaging"))
LIBS = {
    "rocsparse": (
        "librocsparse0_*",
        "librocsparse.so.0.1",
        "sparse_lib",
        "math-libs/rocSPARSE/stage",
    ),
    "rocrand": ("librocrand1_*", "librocrand.so.1.1", "rand_lib", "math-libs/rocRAND/stage"),
}


@dataclass(frozen=True)
class Run:
    name: str
    input_bytes: int
    device_bytes: int
    wall: float
    work: float
    peak_rss: int
    archive_bytes: int
    zstd_wall: float
    zstd_bytes: int


def find_library(pattern: str, filename: str) -> Path | None:
    for root in sorted((CACHE / "extracted").glob(pattern)):
        candidate = root / "usr/lib/x86_64-linux-gnu" / filename
        if candidate.is_file():
            return candidate
    return None


def make_artifact(lib: Path, work: Path, prefix: str, stage: str) -> Path:
    artifact = work / f"{prefix}_generic"
    dest = artifact / stage / "lib" / lib.name
    dest.parent.mkdir(parents=True)
    try:
        os.link(lib, dest)
    except OSError:
        shutil.copy2(lib, dest)
    (artifact / "artifact_manifest.txt").write_text(stage + "\n", encoding="utf-8")
    return artifact


_CHILD = """
import json, sys, time
import msgpack, zstandard
import kpack.archive, kpack.bundle, kpack.databases, kpack.split, kpack.transform
from kpack.cli import main
start = time.perf_counter()
rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "work": time.perf_counter() - start}), file=sys.stderr)
"""


def run_split(artifact: Path, out: Path, jobs: int) -> tuple[float, float, int]:
    """(wall seconds, seconds inside the split after start-up and imports, peak RSS bytes).

    Peak RSS covers the splitter and its worker processes (``wait4``).
    """
    args = [
        "split-artifacts",
        "--artifact-dir",
        str(artifact),
        "--output-dir",
        str(out),
        "-j",
        str(jobs),
    ]
    cmd = [sys.executable, "-c", _CHILD, *args]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    result = json.loads(err.strip().splitlines()[-1]) if err.strip() else {"rc": -1}
    if os.waitstatus_to_exitcode(status) or result["rc"]:
        raise SystemExit(f"split failed: kpack {' '.join(args)}\n{err}")
    return wall, float(result["work"]), usage.ru_maxrss * 1024


def dump_device_bytes(lib: Path, dest: Path) -> int:
    """Concatenate every code object of ``lib`` into ``dest`` (run in a child process)."""
    with open(dest, "wb") as f:
        return sum(f.write(k.data) for k in extract_kernels(lib))


def zstd_baseline(lib: Path, work: Path) -> tuple[int, float, int]:
    """Device bytes, ``zstd -3 -T2`` wall seconds and output bytes over the same bytes.

    The extraction runs in a child so that this process stays small: children started
    with vfork inherit the parent's peak RSS in ``ru_maxrss``.
    """
    raw = work / "device.bin"
    subprocess.run([sys.executable, __file__, "--dump-device", str(lib), str(raw)], check=True)
    device = raw.stat().st_size
    start = time.perf_counter()
    subprocess.run(["zstd", "-3", "-T2", "-q", "-f", str(raw), "-o", f"{raw}.zst"], check=True)
    wall = time.perf_counter() - start
    size = Path(f"{raw}.zst").stat().st_size
    raw.unlink()
    Path(f"{raw}.zst").unlink()
    return device, wall, size


def bench(name: str, jobs: int, keep: Path | None) -> Run | None:
    pattern, filename, prefix, stage = LIBS[name]
    lib = find_library(pattern, filename)
    if lib is None:
        print(f"{name}: {filename} not in {CACHE}/extracted; skipped")
        return None
    with tempfile.TemporaryDirectory(prefix="bench-split-", dir=keep) as tmp:
        work = Path(tmp)
        artifact = make_artifact(lib, work, prefix, stage)
        out = work / "out"
        wall, inside, rss = run_split(artifact, out, jobs)
        archives = sum(p.stat().st_size for p in out.rglob("*.kpack"))
        device, zwall, zbytes = zstd_baseline(lib, work)
    return Run(name, lib.stat().st_size, device, wall, inside, rss, archives, zwall, zbytes)


def report(runs: list[Run], jobs: int) -> None:
    for r in runs:
        gb = r.input_bytes / 1e9
        print(
            f"{r.name}: input {r.input_bytes / 1e6:.1f} MB, "
            f"device code {r.device_bytes / 1e6:.1f} MB"
        )
        print(
            f"  kpack split -j{jobs}: wall {r.wall:.2f} s ({r.wall / gb:.2f} s/GB of input; "
            f"{r.work:.2f} s inside the split), "
            f"peak RSS {r.peak_rss / 1e6:.0f} MB, archives {r.archive_bytes / 1e6:.1f} MB"
        )
        print(
            f"  zstd -3 -T2 on the device bytes: wall {r.zstd_wall:.2f} s, "
            f"{r.zstd_bytes / 1e6:.1f} MB"
        )
        print(
            f"  ratio split/zstd: wall {r.wall / r.zstd_wall:.2f}x, "
            f"size {r.archive_bytes / r.zstd_bytes:.3f}x"
        )
    by_name = {r.name: r for r in runs}
    if {"rocrand", "rocsparse"} <= by_name.keys():
        rand, sparse = by_name["rocrand"], by_name["rocsparse"]
        print(
            f"seconds per GB of input: librocrand {rand.wall / (rand.input_bytes / 1e9):.2f}, "
            f"librocsparse {sparse.wall / (sparse.input_bytes / 1e9):.2f}"
        )
        per_gb = [r.work / (r.input_bytes / 1e9) for r in (rand, sparse)]
        print(
            f"seconds per GB inside the split (after interpreter start-up and imports): "
            f"librocrand {per_gb[0]:.2f}, librocsparse {per_gb[1]:.2f} "
            f"(ratio {per_gb[0] / per_gb[1]:.2f}; aim within 0.8-1.2)"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(LIBS), action="append")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="work directory (default: system temp)")
    parser.add_argument("--dump-device", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.dump_device:
        dump_device_bytes(*args.dump_device)
        return 0
    if shutil.which("zstd") is None:
        raise SystemExit("zstd is not installed (apt-get install zstd)")
    names = args.only or ["rocsparse", "rocrand"]
    runs = [r for n in names if (r := bench(n, args.jobs, args.keep)) is not None]
    report(runs, args.jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
