"""How fast a build stops on SIGINT / SIGTERM, against how long it runs uninterrupted.

    python benchmarks/bench_interrupt.py [--repeat 3]

Two moments, each measured ``--repeat`` times per signal (best and worst reported):

- **writing packages**: a legacy tree whose core package holds 96 MiB of incompressible
  data (seconds of deflate); the signal comes as soon as the two small packages are
  written, while core is being compressed;
- **splitting**: the kpack-split sample tree (real Debian ROCm binaries and hipcc builds;
  needs hipcc), the signal as soon as the split's kernel spool appears;
- **splitting a wheel**: ``kpack split-wheel -j 2`` of jax-rocm7-pjrt 0.10.0 from PyPI (one
  520 MB library, 41 CCOB bundles: frames are compressed on worker threads while the
  bundles are decoded), the signal as soon as the library's split starts.

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


Command = Callable[[Path], list[str]]


def _build(tree: Path) -> Command:
    def cmd(dest: Path) -> list[str]:
        argv = [sys.executable, "-m", "build_tools.build_python_packages"]
        return [
            *argv,
            "--artifact-dir",
            str(tree),
            "--dest-dir",
            str(dest),
            "--version",
            "7.99.0",
            "-j",
            "2",
        ]

    return cmd


def _split_wheel(wheel: Path, root: str) -> Command:
    def cmd(dest: Path) -> list[str]:
        argv = [sys.executable, "-m", "kpack", "split-wheel", "-v", "-j", "2"]
        return [
            *argv,
            "--input",
            str(wheel),
            "--output-dir",
            str(dest),
            "--overlay-root",
            root,
            "--device-package-prefix",
            "amd-device",
        ]

    return cmd


def full_run(cmd: Command, dest: Path) -> float:
    shutil.rmtree(dest, ignore_errors=True)
    start = time.perf_counter()
    subprocess.run(cmd(dest), cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - start


def interrupted(
    cmd: Command, dest: Path, signum: int, ready: Callable[[list[str]], bool]
) -> tuple[float, list[str]]:
    """Seconds from ``signum`` to exit, and the lines printed after the signal."""
    shutil.rmtree(dest, ignore_errors=True)
    proc = subprocess.Popen(cmd(dest), cwd=ROOT, stdout=subprocess.DEVNULL,
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


def _small_ones_written(lines: list[str]) -> bool:
    """The two small packages (the sdist, devel) are written: only core is left. (Lines the
    build printed just before the signal may be read just after it; waiting for both keeps
    such a line from being counted as printed after the signal.)"""
    return sum("wrote " in line for line in lines) >= 2


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
        from tests.pypi_inputs import JAX_PJRT, fetch_wheel

        kpack = kpack_tree(work)
        pjrt = _split_wheel(fetch_wheel(JAX_PJRT), JAX_PJRT.overlay_root)
        cases: list[tuple[str, Command | None, Callable[[list[str]], bool]]] = [
            (
                "writing packages",
                _build(legacy_tree(work)),
                lambda ls: any("wrote " in x for x in ls),
            ),
            ("splitting", None if kpack is None else _build(kpack), lambda ls: False),  # the spool
            ("splitting a wheel", pjrt, lambda ls: any("splitting " in x for x in ls)),
        ]
        worst_all = 0.0
        for name, cmd, ready in cases:
            if cmd is None:
                print(f"{name}: skipped (hipcc is not installed)")
                continue
            full = min(full_run(cmd, work / "out") for _ in range(2))
            for signum in (signal.SIGINT, signal.SIGTERM):
                runs = [interrupted(cmd, work / "out", signum, ready) for _ in range(args.repeat)]
                latencies = [r[0] for r in runs]
                wrote = sum(1 for _, after in runs for x in after if "wrote " in x)
                worst_all = max(worst_all, *latencies)
                print(f"{name:18s} {signal.Signals(signum).name:7s} stop {min(latencies):5.2f}-"
                      f"{max(latencies):5.2f} s  ({max(latencies) / full:4.2f}x the "
                      f"{full:.2f} s run)  'wrote' lines after the signal: {wrote}")  # fmt: skip
        print(f"worst stop: {worst_all:.2f} s (target < 1 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
