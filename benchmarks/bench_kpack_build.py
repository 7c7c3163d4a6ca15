#!/usr/bin/env python3
"""Benchmark a kpack-split build from fat artifacts against the legacy build of the same tree.

    python benchmarks/bench_kpack_build.py [--with-rocsparse] [--repeat 2]

Both trees hold the same real binaries (the sample tree; ``--with-rocsparse`` adds
Debian's 1.31 GB librocsparse as a ``blas`` library). The legacy build packages them fat;
the kpack build splits the device code in-process first. Each build runs in a fresh child
process; the best of ``--repeat`` alternating runs counts. Prints wall time, peak RSS,
the ratio kpack / legacy, the ratio kpack / ``zip -r -6`` of the kpack tree (Info-ZIP, one
thread, measured in the same run) and what a gfx90a user downloads in each mode. This is
benchmark (d) of the README.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

VERSION = "7.99.0.dev0"
FAMILY = "gfx90a-dcgpu"

_CHILD = """
import json, resource, sys, time
sys.path.insert(0, {repo!r})
from build_tools.build_python_packages import main
start = time.perf_counter()
rc = main(["--artifact-dir", {tree!r}, "--dest-dir", {dest!r}, "--version", {version!r}])
wall = time.perf_counter() - start
who = (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
rss = max(resource.getrusage(w).ru_maxrss for w in who) * 1024
print(json.dumps({{"rc": rc, "wall": wall, "rss": rss}}))
"""


def _build(tree: Path, dest: Path) -> tuple[float, int]:
    code = _CHILD.format(repo=str(REPO), tree=str(tree), dest=str(dest), version=VERSION)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode or not lines or json.loads(lines[-1])["rc"]:
        raise SystemExit(f"build of {tree} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    result = json.loads(lines[-1])
    return float(result["wall"]), int(result["rss"])


def _add_rocsparse(tree: Path, target: str) -> None:
    from sample_tree.debian_inputs import fetch_debs

    root = fetch_debs(["librocsparse0"])["librocsparse0"]
    real = next((root / "usr/lib/x86_64-linux-gnu").glob("librocsparse.so.0.*"))
    stage = "math-libs/BLAS/rocSPARSE/stage"
    art = tree / f"blas_lib_{target}"
    (art / stage / "lib").mkdir(parents=True)
    (art / "artifact_manifest.txt").write_text(stage + "\n")
    shutil.copyfile(real, art / stage / "lib" / real.name)
    (art / stage / "lib" / "librocsparse.so.0").symlink_to(real.name)


def _user_download(dist: Path, kpack: bool) -> int:
    names = ["rocm_sdk_core-*.whl"]
    names += (
        ["rocm_sdk_libraries-*.whl", "rocm_sdk_device_gfx90a-*.whl"]
        if kpack
        else ["rocm_sdk_libraries_gfx90a_dcgpu-*.whl"]
    )
    return sum(next(dist.glob(n)).stat().st_size for n in names)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--with-rocsparse", action="store_true")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    from sample_tree.make_sample_tree import make_sample_tree

    with tempfile.TemporaryDirectory(prefix="bench-kpack-") as tmp_text:
        tmp = Path(tmp_text)
        legacy = make_sample_tree(tmp / "legacy", cache_dir=None, family=FAMILY, kpack_split=False)
        kpack = make_sample_tree(tmp / "kpack", cache_dir=None, family=FAMILY, kpack_split=True)
        if args.with_rocsparse:
            _add_rocsparse(legacy, FAMILY)
            _add_rocsparse(kpack, "generic")
        files = [p for p in legacy.rglob("*") if p.is_file() and not p.is_symlink()]
        size = sum(p.stat().st_size for p in files)
        best: dict[str, tuple[float, int]] = {}
        for i in range(args.repeat):
            for name, tree in (("legacy", legacy), ("kpack", kpack)):
                dest = tmp / f"out-{name}-{i}"
                wall, rss = _build(tree, dest)
                if name not in best or wall < best[name][0]:
                    best[name] = (wall, rss)
            zipped = tmp / f"zip-{i}.zip"
            start = time.perf_counter()
            subprocess.run(["zip", "-q", "-r", "-6", str(zipped), "."], cwd=kpack, check=True)
            wall = time.perf_counter() - start
            if "zip" not in best or wall < best["zip"][0]:
                best["zip"] = (wall, 0)
        extra = " (with librocsparse)" if args.with_rocsparse else ""
        print(f"input: {size / 1e6:.1f} MB of artifacts{extra}")
        print(f"{'':8} {'wall s':>8} {'peak RSS MB':>12} {'gfx90a user downloads':>22}")
        for name in ("legacy", "kpack"):
            wall, rss = best[name]
            dl = _user_download(tmp / f"out-{name}-0" / "dist", name == "kpack")
            print(f"{name:8} {wall:8.2f} {rss / 1e6:12.1f} {dl / 1e6:19.1f} MB")
        print(f"zip -r -6 {best['zip'][0]:8.2f}")
        print(f"ratio kpack/legacy (wall): {best['kpack'][0] / best['legacy'][0]:.2f}")
        print(f"(d) kpack / zip -r -6 of the kpack tree: {best['kpack'][0] / best['zip'][0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
