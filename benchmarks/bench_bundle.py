"""Benchmark: walk a ``.hip_fatbin`` with ``kpack.bundle`` and pack it with ``kpack.archive``.

For each input library: the section extent comes from pyelftools; the file is mapped with
``mmap`` and :func:`kpack.bundle.iter_bundles` walks the section (best of ``--repeat``),
reporting seconds, MB/s and memory. Then every code object is packed with
:func:`kpack.archive.write_kpack` (``zstd-per-kernel``) and, in the same run, the same bytes
(concatenated into a temporary file first, untimed) are compressed by ``zstd -3 -T2``; the
ratio of the two wall times is printed.

Memory: ``VmHWM`` is the process's peak resident set, which counts mapped file pages that were
touched; ``RssAnon`` is the anonymous (heap) part, i.e. what the walk really allocates.

    python benchmarks/bench_bundle.py          # librocrand, plus librocsparse when cached
    python benchmarks/bench_bundle.py --input /path/to/lib.so --jobs 2 --level 3
"""

from __future__ import annotations

import argparse
import json
import mmap
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from elftools.elf.elffile import ELFFile  # noqa: E402

from kpack.archive import KernelInput, KpackArchive, write_kpack  # noqa: E402
from kpack.bundle import Bundle, iter_bundles  # noqa: E402
from sample_tree.debian_inputs import default_cache_dir, fetch_debs  # noqa: E402

LIBDIR = "usr/lib/x86_64-linux-gnu"


def default_inputs() -> list[Path]:
    inputs = [fetch_debs(["librocrand1"])["librocrand1"] / LIBDIR / "librocrand.so.1.1"]
    cached = sorted(
        default_cache_dir().glob(f"extracted/librocsparse0_*/{LIBDIR}/librocsparse.so.0.1")
    )
    return inputs + cached[-1:]


def memory() -> dict[str, float]:
    """VmHWM / VmRSS / RssAnon / RssFile of this process, in MB."""
    out: dict[str, float] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
            out[key] = round(int(value.split()[0]) / 1024, 1)
    return out


def fatbin_extent(path: Path) -> tuple[int, int]:
    with path.open("rb") as f:
        section = ELFFile(f).get_section_by_name(".hip_fatbin")
        if section is None:
            raise SystemExit(f"{path} has no .hip_fatbin section")
        return section["sh_offset"], section["sh_size"]


def walk(view: memoryview, name: str, repeat: int) -> tuple[list[Bundle], float]:
    best = float("inf")
    bundles: list[Bundle] = []
    for _ in range(repeat):
        bundles = []
        start = time.perf_counter()
        bundles = list(iter_bundles(view, name=name))
        best = min(best, time.perf_counter() - start)
    return bundles, best


def pack(bundles: list[Bundle], name: str, out: Path, level: int, jobs: int) -> dict[str, object]:
    kernels = [
        KernelInput(f"lib/{name}#{index}", obj.target, obj.data)
        for index, bundle in enumerate(bundles)
        for obj in bundle.code_objects
    ]
    start = time.perf_counter()
    summary = write_kpack(
        out, kernels, group_name="bench", gfx_arch_family="bench", level=level, jobs=jobs
    )
    seconds = time.perf_counter() - start
    del kernels
    with KpackArchive.open(out) as archive:
        assert len(archive) == summary.kernel_count
    return {
        "kpack_s": round(seconds, 3),
        "kpack_mb": round(summary.size / 1e6, 1),
        "kpack_ratio": round(summary.original_bytes / max(summary.size, 1), 2),
        "memory_after_pack_mb": memory(),
    }


def zstd_cli(bundles: list[Bundle], tmp: Path, level: int, jobs: int) -> dict[str, object]:
    zstd = shutil.which("zstd")
    if zstd is None:
        return {"zstd_cli": "not installed (apt-get install zstd)"}
    raw = tmp / "code_objects.bin"
    with raw.open("wb") as f:
        for bundle in bundles:
            for obj in bundle.code_objects:
                f.write(obj.data)
    out = tmp / "code_objects.bin.zst"
    start = time.perf_counter()
    subprocess.run(
        [zstd, f"-{level}", f"-T{jobs}", "-q", "-f", str(raw), "-o", str(out)], check=True
    )
    seconds = time.perf_counter() - start
    return {"zstd_cli_s": round(seconds, 3), "zstd_cli_mb": round(out.stat().st_size / 1e6, 1)}


def bench(path: Path, repeat: int, level: int, jobs: int, compress: bool) -> dict[str, object]:
    offset, size = fatbin_extent(path)
    result: dict[str, object] = {"input": str(path), "fatbin_mb": round(size / 1e6, 1)}
    result["memory_before_mb"] = memory()
    with path.open("rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    view = memoryview(mm)[offset : offset + size]
    bundles, seconds = walk(view, str(path), repeat)
    result.update(
        bundles=len(bundles),
        code_objects=sum(len(b.code_objects) for b in bundles),
        ccobs=sum(b.compression is not None for b in bundles),
        walk_s=round(seconds, 6),
        walk_mb_per_s=round(size / 1e6 / seconds, 1),
        memory_after_walk_mb=memory(),
    )
    if compress:
        with tempfile.TemporaryDirectory(prefix="bench-bundle-") as tmp:
            result.update(pack(bundles, path.name, Path(tmp) / "bench.kpack", level, jobs))
            result.update(zstd_cli(bundles, Path(tmp), level, jobs))
        if "zstd_cli_s" in result:
            ratio = float(result["kpack_s"]) / float(result["zstd_cli_s"])  # type: ignore[arg-type]
            result["kpack_vs_zstd_cli_time"] = round(ratio, 2)
    del bundles
    view.release()
    mm.close()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path, action="append", help="library (repeatable)")
    parser.add_argument("--repeat", type=int, default=3, help="walks per input (best is kept)")
    parser.add_argument("--level", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--no-compress", action="store_true", help="only time the walk")
    args = parser.parse_args(argv)
    for path in args.input or default_inputs():
        result = bench(path, args.repeat, args.level, args.jobs, not args.no_compress)
        print(json.dumps(result, indent=2), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
