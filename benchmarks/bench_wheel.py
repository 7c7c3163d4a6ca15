"""Benchmark: our wheel writer against single-threaded ``zipfile`` on the same input.

Builds (or takes with ``--input DIR``) a tree of mixed files: one big ELF-like library,
several medium ones, many small headers and Python files, and a few already-compressed
members. Each trial runs in a fresh child process, so its peak RSS is its own. The
baseline writes every file with ``zipfile.ZipFile(..., ZIP_DEFLATED, compresslevel=L)``
in one thread; ours calls :func:`kpack.wheelfile.write_wheel` with the same level.
Baseline and ours alternate; the best wall time of each is compared.

Acceptance (issue): ours <= 0.6 x baseline wall time, peak RSS <= 400 MB.

    python benchmarks/bench_wheel.py                 # generated tree, ~330 MB
    python benchmarks/bench_wheel.py --big-mb 1340   # one 1.31 GB member
    python benchmarks/bench_wheel.py --input ~/.cache/rocm-packaging/extracted
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MB = 1 << 20
RATIO_GOAL = 0.6
RSS_GOAL_MB = 400
ELF_MAGIC = b"\x7fELF"


# --- input tree -------------------------------------------------------------------------


def _elf_corpus(limit: int) -> bytes:
    """Real machine code to imitate libraries: ELF files of this system, else synthetic."""
    roots = [Path(sys.base_prefix) / "lib", Path("/usr/lib/x86_64-linux-gnu"), Path("/usr/bin")]
    parts: list[bytes] = []
    total = 0
    for root in roots:
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*")):
            if total >= limit:
                break
            if path.is_symlink() or not path.is_file():
                continue
            try:
                with path.open("rb") as handle:
                    if handle.read(4) != ELF_MAGIC:
                        continue
                    data = ELF_MAGIC + handle.read(limit - total)
            except OSError:
                continue
            parts.append(data)
            total += len(data)
    if total >= 8 * MB:
        return b"".join(parts)
    rng = random.Random(1)  # synthetic: random "instructions" from a small vocabulary
    vocab = [rng.randbytes(rng.randint(2, 12)) for _ in range(1024)]
    chunks = [b"".join(rng.choices(vocab, k=8192)) + rng.randbytes(512) for _ in range(256)]
    return b"".join(chunks)


def _write_cyclic(path: Path, corpus: bytes, size: int, offset: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        pos, left = offset % len(corpus), size
        while left:
            piece = corpus[pos : pos + min(left, 8 * MB)]
            out.write(piece)
            left -= len(piece)
            pos = (pos + len(piece)) % len(corpus)


def generate_tree(root: Path, big_mb: int) -> None:
    corpus = _elf_corpus(96 * MB)
    rng = random.Random(42)
    _write_cyclic(root / "_rocm_sdk_core/lib/librocsparse.so.1", corpus, big_mb * MB, 0)
    for i in range(8):
        lib = root / f"_rocm_sdk_core/lib/libmed{i}.so.7"
        _write_cyclic(lib, corpus, 8 * MB + rng.randrange(MB), rng.randrange(len(corpus)))
    for i in range(1500):
        lines = [f"#define ROCM_SYMBOL_{i}_{j} 0x{rng.getrandbits(32):08x}\n" for j in range(90)]
        header = root / f"_rocm_sdk_core/include/hip/sub{i % 40}/header_{i}.h"
        header.parent.mkdir(parents=True, exist_ok=True)
        header.write_text("".join(lines))
    for i in range(300):
        mod = root / f"rocm_sdk_core/mod{i % 10}/m{i}.py"
        mod.parent.mkdir(parents=True, exist_ok=True)
        mod.write_text(f"def f{i}(x):\n    return x * {i}\n" * 40)
    (root / "_rocm_sdk_core/share").mkdir(parents=True, exist_ok=True)
    (root / "_rocm_sdk_core/share/kernels.kpack").write_bytes(b"KPAK" + rng.randbytes(12 * MB))
    (root / "_rocm_sdk_core/share/devel.tar.xz").write_bytes(
        b"\xfd7zXZ\x00" + rng.randbytes(6 * MB)
    )


def list_files(root: Path) -> list[tuple[str, Path]]:
    files = [
        (p.relative_to(root).as_posix(), p)
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink()
    ]
    return sorted(files)


# --- trials (run in a child process) ------------------------------------------------------


def trial_baseline(files: list[tuple[str, Path]], out: Path, level: int) -> None:
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=level) as zf:
        for arcname, path in files:
            zf.write(path, arcname)


def trial_ours(files: list[tuple[str, Path]], out: Path, level: int, jobs: int | None) -> None:
    sys.path.insert(0, str(REPO))
    from kpack.wheelfile import Member, write_wheel

    members = [
        Member(arcname, path, executable=os.access(path, os.X_OK)) for arcname, path in files
    ]
    metadata = b"Metadata-Version: 2.1\nName: bench\nVersion: 1.0\n"
    result = write_wheel(
        out.parent,
        dist_name="bench",
        version="1.0",
        tag="py3-none-linux_x86_64",
        members=members,
        metadata=metadata,
        level=level,
        jobs=jobs,
    )
    result.path.replace(out)


def _vm_hwm_mb() -> float:
    """Peak RSS of this process image from /proc (reset by exec, unlike ru_maxrss)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def run_child(args: argparse.Namespace) -> None:
    root = Path(args.root)
    if args.child == "generate":
        generate_tree(root, args.big_mb)
        return
    files = list_files(root)
    out = Path(args.out)
    start = time.perf_counter()
    if args.child == "baseline":
        trial_baseline(files, out, args.level)
    else:
        trial_ours(files, out, args.level, args.jobs)
    wall = time.perf_counter() - start
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    result = {
        "wall": wall,
        "cpu": cpu.ru_utime + cpu.ru_stime,
        "rss_mb": max(cpu.ru_maxrss / 1024, _vm_hwm_mb()),
        "size": out.stat().st_size,
    }
    print(json.dumps(result))


def spawn(kind: str, root: Path, out: Path, args: argparse.Namespace) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--child", kind, "--root", str(root), "--out", str(out)]
    cmd += ["--level", str(args.level)]
    if args.jobs:
        cmd += ["--jobs", str(args.jobs)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


# --- driver -------------------------------------------------------------------------------


def check_ours(path: Path, files: list[tuple[str, Path]]) -> None:
    with zipfile.ZipFile(path) as zf:
        sizes = {i.filename: i.file_size for i in zf.infolist()}
    for arcname, src in files:
        if sizes.get(arcname) != src.stat().st_size:
            raise SystemExit(f"our wheel is wrong: {arcname}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path, help="benchmark this tree instead of a generated one")
    parser.add_argument("--big-mb", type=int, default=240, help="size of the big generated member")
    parser.add_argument("--level", type=int, default=6)
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds (best of each)")
    parser.add_argument("--work", type=Path, help="scratch directory (default: a temp dir)")
    parser.add_argument("--child", choices=["generate", "baseline", "ours"], help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        run_child(args)
        return 0
    work = Path(tempfile.mkdtemp(prefix="bench_wheel.", dir=args.work))
    try:
        return run_benchmark(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_benchmark(args: argparse.Namespace, work: Path) -> int:
    root = args.input
    if root is None:
        root = work / "tree"
        print(f"generating input tree in {root} ...", flush=True)
        # In a child: the parent stays small, and children inherit ru_maxrss across exec.
        generate = [sys.executable, __file__, "--child", "generate", "--root", str(root)]
        subprocess.run([*generate, "--big-mb", str(args.big_mb)], check=True)
    files = list_files(root)
    total = sum(p.stat().st_size for _, p in files)
    biggest = max((p.stat().st_size for _, p in files), default=0)
    print(f"input: {len(files)} files, {total / MB:.1f} MB, largest {biggest / MB:.1f} MB")
    print(
        f"level {args.level}, jobs {args.jobs or os.cpu_count()}, {args.rounds} rounds, "
        f"load average before: {os.getloadavg()[0]:.2f}"
    )
    wall: dict[str, float] = {}
    peak: dict[str, float] = {}
    for rnd in range(args.rounds):
        for kind in ("baseline", "ours"):
            out = work / f"{kind}.zip"
            res = spawn(kind, root, out, args)
            if kind == "ours" and rnd == 0:
                check_ours(out, files)
            out.unlink()
            print(
                f"round {rnd + 1} {kind:8s}: {res['wall']:7.2f} s  "
                f"{total / MB / res['wall']:7.1f} MB/s  cpu {res['cpu']:7.2f} s  "
                f"out {res['size'] / MB:7.1f} MB  peak RSS {res['rss_mb']:6.1f} MB",
                flush=True,
            )
            wall[kind] = min(wall.get(kind, res["wall"]), res["wall"])
            peak[kind] = max(peak.get(kind, 0.0), res["rss_mb"])
    ratio = wall["ours"] / wall["baseline"]
    rss = peak["ours"]
    print(
        f"best baseline {wall['baseline']:.2f} s, best ours {wall['ours']:.2f} s, "
        f"ratio {ratio:.3f} (goal <= {RATIO_GOAL}); our peak RSS {rss:.1f} MB "
        f"(goal <= {RSS_GOAL_MB}), baseline's {peak['baseline']:.1f} MB"
    )
    ok = ratio <= RATIO_GOAL and rss <= RSS_GOAL_MB
    print(f"load average after: {os.getloadavg()[0]:.2f} (the ratio needs two idle cores)")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
