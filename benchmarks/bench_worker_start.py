"""Where threads start to pay: each pool of a split, with its threads and without, by size.

    python benchmarks/bench_worker_start.py [--repeat N] [--jobs N] [--sizes 64K,256K,...]

A split starts a thread pool for three kinds of work: deflating a wheel's members
(:class:`kpack.wheelfile._deflate.MemberStreamer`), compressing a fat binary's code
objects into zstd frames (:func:`kpack.archive.compressed`, the spool's frames) and
hashing a run's outputs for its record (:func:`kpack.common.output_record.staged_entries`).
Below :data:`kpack.common.workers.THREAD_MIN_BYTES` of work none starts and the calling
thread does the work. This times each kind, in this process, on ``--sizes`` bytes of real
device code (the code objects of Debian's ``librocsparse``: hipcc-built kernels, which
compress as a split's do) with ``--jobs`` threads (2) and with none, and prints the ratio
threads / none: above 1.0 the threads cost more than they save. Each pair runs
``--repeat`` times (7), alternating, best counted.

The pool starts as it would in a split: ``KPACK_THREAD_MIN_BYTES`` is set to 0 for the
threaded runs and to more than the work for the others.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT_SIZES = "16K,64K,256K,512K,1M,2M,4M,16M"
_UNITS = {"K": 1 << 10, "M": 1 << 20}


def _sizes(text: str) -> list[int]:
    return [int(s[:-1]) * _UNITS[s[-1]] if s[-1] in _UNITS else int(s) for s in text.split(",")]


def _device_code(total: int) -> list[bytes]:
    """Code objects of Debian's librocsparse, about 64 KiB pieces, ``total`` bytes in all."""
    from kpack.transform import extract_kernels
    from sample_tree.debian_inputs import fetch_debs

    root = fetch_debs(["librocsparse0"])["librocsparse0"]
    lib = next((root / "usr/lib/x86_64-linux-gnu").glob("librocsparse.so.0.*"))
    blob, kernels = b"", iter(extract_kernels(lib))
    while len(blob) < total:
        data = next(kernels).data
        blob += bytes(data) if data is not None else b""
    return [blob[start : start + (64 << 10)] for start in range(0, total, 64 << 10)]


def _deflate(pieces: list[bytes], jobs: int, work: Path) -> None:
    from kpack.wheelfile import Member, write_wheel

    members = [Member(f"pkg/part{i}.bin", p) for i, p in enumerate(pieces)]
    metadata = b"Metadata-Version: 2.1\nName: bench\nVersion: 1.0\n"
    write_wheel(
        work, dist_name="bench", version="1.0", tag="py3-none-any", members=members,
        metadata=metadata, jobs=jobs,
    )  # fmt: skip


def _frames(pieces: list[bytes], jobs: int, work: Path) -> None:
    from kpack.archive import DEFAULT_LEVEL, compressed
    from kpack.common.workers import thread_min_bytes

    threads = jobs if sum(map(len, pieces)) >= thread_min_bytes() else 1
    for _ in compressed(pieces, DEFAULT_LEVEL, threads):
        pass


def _hashing(pieces: list[bytes], jobs: int, work: Path) -> None:
    from kpack.common.output_record import staged_entries

    names = tuple(sorted(p.name for p in work.iterdir()))
    staged_entries(work, names)


def _prepare_hashing(pieces: list[bytes], work: Path) -> None:
    per_file = max(1, len(pieces) // 8)  # a split's outputs: a few wheels
    for i in range(0, len(pieces), per_file):
        (work / f"out{i}.whl").write_bytes(b"".join(pieces[i : i + per_file]))


KINDS: dict[str, Callable[[list[bytes], int, Path], None]] = {
    "deflate (wheel members)": _deflate,
    "zstd frames (code objects)": _frames,
    "sha256 (output record)": _hashing,
}


def _timed(kind: str, pieces: list[bytes], jobs: int, threaded: bool, work: Path) -> float:
    os.environ["KPACK_THREAD_MIN_BYTES"] = "0" if threaded else str(1 << 62)
    start = time.perf_counter()
    KINDS[kind](pieces, jobs, work)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help=f"({DEFAULT_SIZES})")
    args = parser.parse_args()
    sizes = _sizes(args.sizes)
    code = _device_code(max(sizes))
    print(f"threads ({args.jobs}) / none, best of {args.repeat}; > 1.0: the threads cost more")
    print(f"{'kind':28s} " + " ".join(f"{s >> 10:>8d}K" for s in sizes))
    for kind in KINDS:
        cells = []
        for size in sizes:
            pieces, left = [], size
            for piece in code:
                if left <= 0:
                    break
                pieces.append(piece[:left])
                left -= len(pieces[-1])
            best = {True: float("inf"), False: float("inf")}
            with tempfile.TemporaryDirectory() as tmp:
                work = Path(tmp)
                if kind.startswith("sha256"):
                    _prepare_hashing(pieces, work)
                for _ in range(args.repeat):
                    for threaded in (False, True):
                        if not kind.startswith("sha256"):
                            for old in work.iterdir():
                                old.unlink()
                        wall = _timed(kind, pieces, args.jobs, threaded, work)
                        best[threaded] = min(best[threaded], wall)
            cells.append(f"{best[True] / best[False]:8.2f}x")
        print(f"{kind:28s} " + " ".join(cells))
    os.environ.pop("KPACK_THREAD_MIN_BYTES", None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
