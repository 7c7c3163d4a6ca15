"""How fast a build stops on SIGINT / SIGTERM, against how long it runs uninterrupted.

    python benchmarks/bench_interrupt.py [--repeat 3]

Two moments, each measured ``--repeat`` times per signal (best and worst reported):

- **writing packages**: a legacy tree whose core package holds 96 MiB of incompressible
  data (seconds of deflate); the signal comes as soon as the first (small) package is
  written, while core is being compressed;
- **splitting**: the kpack-split sample tree (real Debian ROCm binaries and hipcc builds;
  needs hipcc), the signal as soon as the split's kernel spool appears.

Latency is from the signal to the process's exit (every temp dir removed by then); the
baseline is the same build's uninterrupted wall time in the same run. Also reported: any
``wrote`` line printed after the signal (there must be none). Target: under 1 s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]


def _cmd(tree: Path, dest: Path) -> list[str]:
    return [sys.executable, "-m", "build_tools.build_python_packages", "--artifact-dir",
            str(tree), "--dest-dir", str(dest), "--version", "7.99.0", "-j", "2"]  # fmt: skip


def full_run(tree: Path, dest: Path) -> float:
    shutil.rmtree(dest, ignore_errors=True)
    start = time.perf_counter()
    subprocess.run(_cmd(tree, dest), cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - start


def interrupted(
    tree: Path, dest: Path, signum: int, ready: Callable[[list[str]], bool]
) -> tuple[float, list[str]]:
    """Seconds from ``signum`` to exit, and the lines printed after the signal."""
    shutil.rmtree(dest, ignore_errors=True)
    proc = subprocess.Popen(_cmd(tree, dest), cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    lines: list[str] = []
    fire = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if ready(lines):
                fire.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    while not fire.is_set() and not any(dest.glob(".rocm-build-*/kpack-spool")):
        if proc.poll() is not None:
            raise SystemExit("the build ended before the moment to interrupt it")
        time.sleep(0.002)
    seen = len(lines)
    start = time.perf_counter()
    proc.send_signal(signum)
    proc.wait()
    latency = time.perf_counter() - start
    reader.join(timeout=10)
    assert proc.stderr is not None
    proc.stderr.close()
    return latency, lines[seen:]


def legacy_tree(work: Path) -> Path:
    from tests.build_tools.treeutil import add_artifact, write_manifest

    tree = work / "legacy"
    write_manifest(tree)
    block = os.urandom(1 << 20)
    add_artifact(tree, "core-hip_lib_generic", "core/clr/stage",
                 {f"share/blob{i}.bin": block * 24 for i in range(4)})  # fmt: skip
    return tree


def kpack_tree(work: Path) -> Path | None:
    if shutil.which("hipcc") is None:
        return None
    from sample_tree.make_sample_tree import make_sample_tree

    return make_sample_tree(work / "kpack", cache_dir=None, family="gfx90a-dcgpu", kpack_split=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=Path.home()) as tmp:
        work = Path(tmp)
        cases: list[tuple[str, Path | None, Callable[[list[str]], bool]]] = [
            ("writing packages", legacy_tree(work), lambda ls: any("wrote " in x for x in ls)),
            ("splitting", kpack_tree(work), lambda ls: False),  # waits for the spool dir
        ]
        worst_all = 0.0
        for name, tree, ready in cases:
            if tree is None:
                print(f"{name}: skipped (hipcc is not installed)")
                continue
            full = min(full_run(tree, work / "out") for _ in range(2))
            for signum in (signal.SIGINT, signal.SIGTERM):
                runs = [interrupted(tree, work / "out", signum, ready) for _ in range(args.repeat)]
                latencies = [r[0] for r in runs]
                wrote = sum(1 for _, after in runs for x in after if "wrote " in x)
                worst_all = max(worst_all, *latencies)
                print(f"{name:17s} {signal.Signals(signum).name:7s} stop {min(latencies):5.2f}-"
                      f"{max(latencies):5.2f} s  ({max(latencies) / full:4.2f}x the "
                      f"{full:.2f} s build)  'wrote' lines after the signal: {wrote}")  # fmt: skip
        print(f"worst stop: {worst_all:.2f} s (target < 1 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
