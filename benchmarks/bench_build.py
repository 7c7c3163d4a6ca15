#!/usr/bin/env python3
"""Benchmark the builder on the real sample tree against a zipfile baseline.

    python benchmarks/bench_build.py [--tree DIR] [--with-rocsparse] [--repeat 2]

Baseline (measured in the same run, in its own child process): write the same input
bytes that the build packages (every payload file and devel member, as found in the
artifact tree) into zip files with Python's ``zipfile`` at the same compression level,
one thread. Prints wall time, MB/s, peak RSS and the ratio ours / baseline for each;
the best of ``--repeat`` alternating runs counts (the machine is shared and noisy).

``--with-rocsparse`` adds Debian's 1.31 GB ``librocsparse.so.0.1`` to the tree as a
``blas`` library artifact (94 MB download, cached).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

VERSION = "7.99.0.dev0"


def _child(code: str) -> tuple[float, int]:
    """Run ``code`` in a fresh interpreter; (wall seconds, peak RSS in bytes)."""
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )
    if proc.returncode != 0:
        raise SystemExit(f"benchmark child failed:\n{proc.stdout}\n{proc.stderr}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return float(result["wall"]), int(result["rss"])


_MEASURE = """
import json, resource, time, sys
sys.path.insert(0, {repo!r})
t = time.perf_counter()
{body}
wall = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({{"wall": wall, "rss": rss}}))
"""

_BUILD = """
from build_tools.build_python_packages import main
rc = main(["--artifact-dir", {tree!r}, "--dest-dir", {dest!r}, "--version", {version!r}])
assert rc == 0
"""

_BASELINE = """
import zipfile, json
inputs = json.load(open({listing!r}))
for i, group in enumerate(inputs):
    with zipfile.ZipFile({dest!r} + f"/baseline-{{i}}.zip", "w", zipfile.ZIP_DEFLATED,
                         compresslevel=6) as zf:
        for path, arcname in group:
            zf.write(path, arcname)
"""


def _input_listing(tree: Path, out: Path) -> tuple[Path, int]:
    """The input files the build packages, grouped per package, as a JSON listing."""
    from build_tools.artifacts import scan_artifacts
    from build_tools.assemble import plan_build
    from build_tools.manifests import load_manifests
    from build_tools.options import BuildOptions

    opts = BuildOptions(artifact_dir=tree, dest_dir=out, version=VERSION, nonce="")
    plan = plan_build(scan_artifacts(tree), load_manifests(), opts)
    groups: list[list[tuple[str, str]]] = []
    total = 0
    for pkg in plan.packages:
        files = list(pkg.payload) + [m.file for m in pkg.devel_tar if m.file is not None]
        group = []
        for f in files:
            src = f.source if f.source is not None else (f.edit.source if f.edit else None)
            if src is None:
                continue  # rendered text and launcher stubs: a few KB
            group.append((str(src), f.arcname))
            total += src.stat().st_size
        groups.append(group)
    listing = out / "inputs.json"
    listing.write_text(json.dumps(groups))
    return listing, total


def _add_rocsparse(tree: Path, family: str) -> None:
    from build_tools.debian_inputs import fetch_debs

    root = fetch_debs(["librocsparse0"])["librocsparse0"]
    lib = root / "usr/lib/x86_64-linux-gnu"
    stage = "math-libs/BLAS/rocSPARSE/stage"
    art = tree / f"blas_lib_{family}"
    (art / stage / "lib").mkdir(parents=True, exist_ok=True)
    (art / "artifact_manifest.txt").write_text(stage + "\n")
    real = next(lib.glob("librocsparse.so.0.*"))
    shutil.copyfile(real, art / stage / "lib" / real.name)
    (art / stage / "lib" / "librocsparse.so.0").symlink_to(real.name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--tree", type=Path, help="an existing artifact tree (default: build the sample)"
    )
    ap.add_argument("--with-rocsparse", action="store_true")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-build-") as tmp_text:
        tmp = Path(tmp_text)
        tree = args.tree
        if tree is None:
            from build_tools.make_sample_tree import make_sample_tree

            tree = make_sample_tree(
                tmp / "artifacts", cache_dir=None, family="gfx90a-dcgpu", kpack_split=False
            )
            if args.with_rocsparse:
                _add_rocsparse(tree, "gfx90a-dcgpu")
        listing, total = _input_listing(tree, tmp)
        best: dict[str, tuple[float, int]] = {}
        for _ in range(args.repeat):
            for name in ("baseline", "ours"):
                dest = tmp / f"out-{name}"
                shutil.rmtree(dest, ignore_errors=True)
                dest.mkdir()
                body = (
                    _BUILD.format(tree=str(tree), dest=str(dest), version=VERSION)
                    if name == "ours"
                    else _BASELINE.format(listing=str(listing), dest=str(dest))
                )
                wall, rss = _child(_MEASURE.format(repo=str(REPO), body=body))
                if name not in best or wall < best[name][0]:
                    best[name] = (wall, rss)
        mb = total / 1e6
        print(f"input: {mb:.1f} MB packaged from {tree}")
        print(f"{'':10} {'wall s':>8} {'MB/s':>8} {'peak RSS MB':>12}")
        for name in ("baseline", "ours"):
            wall, rss = best[name]
            print(f"{name:10} {wall:8.2f} {mb / wall:8.1f} {rss / 1e6:12.1f}")
        ratio = best["ours"][0] / best["baseline"][0]
        print(
            f"ratio ours/baseline (wall): {ratio:.2f}  (target <= 0.6; peak RSS target <= 400 MB)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
