#!/usr/bin/env python3
"""Figures at release size (issue 31, items 2 and 7), ratios measured in the same run.

    python benchmarks/bench_release.py compare --tree DIR [--therock DIR --therock-python PY]
    python benchmarks/bench_release.py scaling --mode kpack|legacy [--scales 0.5,1,2,4,8]
    python benchmarks/bench_release.py shards --tree DIR [--shards 4]
    python benchmarks/bench_release.py fat-shards --tree DIR [--shards 3]
    python benchmarks/bench_release.py archives --tree DIR [--codec zstd|xz|none]

Trees come from ``benchmarks/make_release_inputs.py``. Every measurement runs in its own
child process, under ``SOURCE_DATE_EPOCH``, and reports wall time and the peak RSS of the
process and its children; each output is deleted once measured (they are GBs).

- ``compare``: the builder against ``zip -r -6`` of the tree (Info-ZIP, one thread) and,
  with ``--therock``, against TheRock's own ``build_python_packages.py`` (run through
  ``therock_py312.py`` as ``bench_build.py`` does; targets: at most 1/8 of its time at
  at most 1.02 times its dist bytes, at most 1 GB peak RSS).
- ``scaling``: the builder on trees of each ``--scales`` size (made, or reused from the cache,
  under ``--work``): seconds per GB against the smallest tree's, and peak RSS (flat is the
  target: linear time, RSS independent of size).
- ``shards``: ``--print-shards N`` of a *pre-split* kpack tree (``kpack split-artifacts`` of a
  fat one; ``--split-from FAT`` makes it): each shard runs alone on a directory holding only
  the inputs it lists (hard links), then ``assemble-shards``; prints each shard's bytes
  read and written and wall time, and the slowest shard against the one-machine build (the
  speed-up N machines buy; the assembly, which copies, is timed apart).
- ``ab``: the builder of this checkout against the builder of ``--against REV`` (``git
  archive``) on one tree, alternating for ``--rounds``: each run's wall and CPU seconds, peak
  RSS and dist bytes, then this checkout's median and best against the revision's (CPU
  seconds are the steadier figure on a shared machine), and whether the dists are the same.
- ``archives``: TheRock's artifact archives as input (item 3). Packs every artifact dir of
  ``--tree`` as ``fileset_tool.py artifact-archive`` + ``artifact_manager.py push`` do
  (``tests/build_tools/archive_kit.py``; cached under ``--work``), then times the builder on
  the extracted tree, the builder on the archives (each read once, streaming, by the build
  itself), and TheRock's way: ``tar -x`` of every archive, two at a time as ``fetch``
  extracts in parallel, then the builder on that tree. Also one bare decompression pass over
  every archive (what each further pass of a reader that kept no copy would cost). Prints
  wall time, peak RSS and the most disk each way took beyond its inputs, the ratios, and
  whether the dist of the archives equals the dist of the tree, byte for byte.
- ``fat-shards``: the shards a *fat* kpack tree could be cut into, each on the whole tree
  (why ``--print-shards`` plans such a tree as one shard): the slowest against the
  one-machine build.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.bench_build import _BUILD, _MEASURE, _THEROCK, _ZIP, _child, _dist_bytes  # noqa: E402

VERSION = "7.99.0.dev0"


def _measure(body: str, dest: Path) -> tuple[float, int]:
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    return _child(_MEASURE.format(repo=str(REPO), body=body.replace("{dest}", str(dest))))


def _tree_bytes(tree: Path) -> int:
    from benchmarks.release_inputs.tree import tree_bytes

    return tree_bytes(tree)


def _ours(tree: Path, extra: str = "") -> str:
    body = _BUILD.format(tree=str(tree), dest="{dest}", version=VERSION)
    return body.replace('"-q"]', f'"-q"{extra}]')


def compare(args: argparse.Namespace) -> int:
    tree, work = args.tree.absolute(), args.work.absolute()
    size = _tree_bytes(tree)
    bodies = {"ours": _ours(tree), "zip -r -6": _ZIP.format(tree=str(tree), dest="{dest}")}
    if args.therock is not None:
        bodies["TheRock's builder"] = _THEROCK.format(
            therock=str(args.therock.resolve()),
            python=args.therock_python,
            shim=str(REPO / "benchmarks" / "therock_py312.py"),
            tree=str(tree),
            dest="{dest}",
            version=VERSION,
        )
    rows: dict[str, tuple[float, int, int]] = {}
    for name, body in bodies.items():
        dest = work / "out"
        wall, rss = _measure(body, dest)
        out = _dist_bytes(dest) if name != "zip -r -6" else (dest / "tree.zip").stat().st_size
        rows[name] = (wall, rss, out)
        shutil.rmtree(dest)
        print(
            f"{name:18} {wall:8.1f} s  peak RSS {rss / 1e6:7.0f} MB  output {out / 1e9:6.3f} GB",
            flush=True,
        )
    print(f"tree {tree}: {size / 1e9:.2f} GB")
    ours = rows["ours"]
    print(
        f"ours / zip -r -6: {ours[0] / rows['zip -r -6'][0]:.3f}  ({size / 1e9 / ours[0]:.2f} GB/s)"
    )
    if "TheRock's builder" in rows:
        theirs = rows["TheRock's builder"]
        print(
            f"ours / TheRock's builder: {ours[0] / theirs[0]:.3f} ({theirs[0] / ours[0]:.1f} "
            f"times as fast; target >= 8), dist bytes {ours[2] / theirs[2]:.4f} "
            f"(target <= 1.02), peak RSS {ours[1] / 1e6:.0f} MB vs {theirs[1] / 1e6:.0f} MB"
        )
    if args.json:
        args.json.write_text(json.dumps({"tree_bytes": size, "rows": rows}, indent=2) + "\n")
    return 0


def scaling(args: argparse.Namespace) -> int:
    from benchmarks.release_inputs.tree import make_release_tree
    from sample_tree.debian_inputs import default_cache_dir

    work = args.work.absolute()
    rows = []
    for scale in [float(s) for s in args.scales.split(",")]:
        tree = work / f"{args.mode}-{scale:g}"
        if not tree.exists():
            make_release_tree(tree, mode=args.mode, scale=scale, cache=default_cache_dir())
        size = _tree_bytes(tree)
        wall, rss = _measure(_ours(tree), work / "out")
        dist = _dist_bytes(work / "out")
        shutil.rmtree(work / "out")
        rows.append((scale, size, wall, rss, dist))
        print(
            f"{args.mode} {size / 1e9:6.2f} GB: {wall:7.1f} s, {wall / (size / 1e9):6.2f} s/GB, "
            f"peak RSS {rss / 1e6:5.0f} MB, dist {dist / 1e9:.3f} GB",
            flush=True,
        )
        if not args.keep:
            shutil.rmtree(tree)
    base = rows[0][2] / rows[0][1]
    for _scale, size, wall, rss, _ in rows:
        print(
            f"  {size / 1e9:6.2f} GB: s/GB {wall / size * 1e9:6.2f} = {wall / size / base:.2f}x "
            f"the {rows[0][1] / 1e9:.2f} GB tree's; peak RSS {rss / 1e6:.0f} MB"
        )
    print(f"peak RSS over all sizes: {max(r[3] for r in rows) / 1e6:.0f} MB (target <= 1000 MB)")
    return 0


def _run(cmd: list[str]) -> tuple[float, int]:
    body = (
        "import subprocess\nsubprocess.run("
        + repr(cmd)
        + ", check=True, stdout=subprocess.DEVNULL)"
    )
    code = _MEASURE.format(repo=str(REPO), body=body)
    return _child(code)


def _builder(tree: Path, dest: Path, extra: list[str]) -> list[str]:
    return [
        sys.executable,
        str(REPO / "build_tools/build_python_packages.py"),
        "--artifact-dir",
        str(tree),
        "--dest-dir",
        str(dest),
        "-q",
        *extra,
    ]


#: The artifacts of a release tree that hold fat binaries (``manifests/packages.yaml``'s
#: library artifacts that the generator and the sample tree fill).
_FAT = ("blas", "fft", "miopen", "rand", "rccl", "rpp")


def _split_tree(fat: Path, tree: Path) -> None:
    """The pre-split form of the fat kpack tree ``fat``: ``kpack split-artifacts`` of each
    fat ``<name>_lib_generic`` artifact, hard links of every other artifact."""
    start = time.perf_counter()
    tree.mkdir(parents=True)
    for art in sorted(p for p in fat.iterdir() if p.is_dir()):
        if art.name.split("_")[0] in _FAT and art.name.endswith("_lib_generic"):
            cmd = [
                sys.executable,
                "-m",
                "kpack",
                "-q",
                "split-artifacts",
                "--artifact-dir",
                str(art),
                "--output-dir",
                str(tree),
                "-j",
                "2",
            ]
            subprocess.run(cmd, check=True, cwd=REPO, stdout=subprocess.DEVNULL)
        else:
            shutil.copytree(art, tree / art.name, symlinks=True, copy_function=os.link)
    print(f"split {fat} into {tree} in {time.perf_counter() - start:.0f} s", flush=True)


def shards(args: argparse.Namespace) -> int:
    work = args.work.absolute()
    tree = args.tree.absolute()
    if args.split_from is not None and not tree.exists():
        _split_tree(args.split_from.absolute(), tree)
    plan_cmd = _builder(
        tree, work / "unused", ["--version", VERSION, "--print-shards", str(args.shards)]
    )
    plan = json.loads(subprocess.run(plan_cmd, check=True, capture_output=True, text=True).stdout)
    size = _tree_bytes(tree)
    one_wall, one_rss = _run(_builder(tree, work / "one", ["--version", VERSION]))
    one_dist = _dist_bytes(work / "one")
    print(
        f"tree {tree}: {size / 1e9:.2f} GB; one machine: {one_wall:.1f} s, "
        f"peak RSS {one_rss / 1e6:.0f} MB, dist {one_dist / 1e9:.3f} GB",
        flush=True,
    )
    walls, dists = [], []
    for i, shard in enumerate(plan):
        inputs = work / f"in-{i}"
        shutil.rmtree(inputs, ignore_errors=True)
        inputs.mkdir(parents=True)
        for name in shard["inputs"]:
            shutil.copytree(tree / name, inputs / name, symlinks=True, copy_function=os.link)
        read = _tree_bytes(inputs)
        wall, rss = _run(_builder(inputs, work / f"shard-{i}", shard["args"]))
        written = _dist_bytes(work / f"shard-{i}")
        walls.append(wall)
        dists.append(work / f"shard-{i}" / "dist")
        shutil.rmtree(inputs)
        label = " ".join(shard["args"][:4])
        print(
            f"shard {i}: read {read / 1e9:6.3f} GB, wrote {written / 1e9:6.3f} GB, "
            f"{wall:6.1f} s, peak RSS {rss / 1e6:4.0f} MB  ({label} ...)",
            flush=True,
        )
    cmd = [
        sys.executable,
        str(REPO / "build_tools/assemble_shards.py"),
        "--dest-dir",
        str(work / "assembled"),
    ]
    for d in dists:
        cmd += ["--input", str(d)]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    assembled = time.perf_counter() - start
    same = _digests(work / "assembled" / "dist") == _digests(work / "one" / "dist")
    print(
        f"{len(plan)} shards: slowest {max(walls):.1f} s = {max(walls) / one_wall:.2f}x the "
        f"one-machine build ({one_wall / max(walls):.2f} times as fast with {len(plan)} "
        f"machines); assembly {assembled:.1f} s; assembled dist equals the one-machine "
        f"dist: {same}"
    )
    for d in ("one", "assembled", *(f"shard-{i}" for i in range(len(plan)))):
        shutil.rmtree(work / d, ignore_errors=True)
    return 0 if same else 1


def fat_shards(args: argparse.Namespace) -> int:
    """Why ``--print-shards`` plans a *fat* kpack tree as one shard: the shards it could
    cut, run as they would run. Every shard reads the whole tree (a fat artifact's targets
    are in its code objects, and each shard must split it): one ``--only common`` shard and
    ``--shards - 1`` ``--only device`` shards over the device targets of the one-machine
    build (its report.json), balanced by device wheel bytes; the slowest against the one-machine
    build, and the assembled dist against its dist."""
    from kpack.common.balance import balance

    work, tree = args.work.absolute(), args.tree.absolute()
    one_wall, one_rss = _run(_builder(tree, work / "one", ["--version", VERSION]))
    report = json.loads((work / "one" / "report.json").read_text())
    costs = {row["target"]: int(row["size"]) for row in report["device_wheels"]}
    groups = balance(costs, args.shards - 1)
    print(
        f"fat tree {tree}: {_tree_bytes(tree) / 1e9:.2f} GB, {len(costs)} device wheels; one "
        f"machine: {one_wall:.1f} s, peak RSS {one_rss / 1e6:.0f} MB",
        flush=True,
    )
    runs = [("common", ["--only", "common"])]
    runs += [
        (f"device-{n}", ["--only", "device", "--targets", ",".join(g)])
        for n, g in enumerate(groups, start=1)
    ]
    walls, dists = [], []
    for name, extra in runs:
        dest = work / f"fat-{name}"
        wall, rss = _run(_builder(tree, dest, ["--version", VERSION, *extra]))
        walls.append(wall)
        dists.append(dest / "dist")
        print(
            f"{name}: {wall:6.1f} s = {wall / one_wall:.2f}x one machine, peak RSS "
            f"{rss / 1e6:4.0f} MB  ({' '.join(extra[:4])})",
            flush=True,
        )
    merged: dict[str, str] = {}
    for d in dists:
        merged.update(_digests(d))
    same = merged == _digests(work / "one" / "dist")
    print(
        f"{len(runs)} shards of the fat tree: slowest {max(walls):.1f} s = "
        f"{max(walls) / one_wall:.2f}x the one-machine build, each reading the whole tree; "
        f"the shards' files equal the one-machine dist: {same}"
    )
    for d in ("one", *(f"fat-{name}" for name, _ in runs)):
        shutil.rmtree(work / d, ignore_errors=True)
    return 0 if same else 1


_AB = """
import json, os, resource, shutil, sys, time
sys.path.insert(0, {repo!r})
shutil.rmtree({dest!r}, ignore_errors=True)
os.makedirs({dest!r})
from build_tools.build_python_packages import main
t = time.perf_counter()
rc = main(["--artifact-dir", {tree!r}, "--dest-dir", {dest!r}, "--version", {version!r}, "-q"])
wall = time.perf_counter() - t
use = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({{"wall": wall, "cpu": use.ru_utime + use.ru_stime, "rss": use.ru_maxrss * 1024,
                  "rc": rc}}))
"""


def ab(args: argparse.Namespace) -> int:
    import statistics

    from benchmarks.bench_small_wheels import _against

    tree, work = args.tree.absolute(), args.work.absolute()
    shutil.rmtree(work / "against", ignore_errors=True)
    repos = {
        "this checkout": REPO,
        f"@{args.against}": _against(args.against, work / "against").root,
    }
    runs: dict[str, list[tuple[float, float, int, int]]] = {name: [] for name in repos}
    digests: dict[str, dict[str, str]] = {}
    for round_ in range(args.rounds):
        for name, repo in repos.items():
            dest = work / "ab-out"
            code = _AB.format(repo=str(repo), tree=str(tree), dest=str(dest), version=VERSION)
            proc = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=False
            )
            if proc.returncode != 0:
                raise SystemExit(f"{name}: the build failed\n{proc.stdout}\n{proc.stderr}")
            got = json.loads(proc.stdout.strip().splitlines()[-1])
            out = _dist_bytes(dest)
            runs[name].append((got["wall"], got["cpu"], got["rss"], out))
            digests[name] = _digests(dest / "dist")
            shutil.rmtree(dest)
            print(
                f"round {round_ + 1} {name:16} {got['wall']:6.1f} s wall {got['cpu']:6.1f} s CPU "
                f"peak RSS {got['rss'] / 1e6:5.0f} MB dist {out:,} bytes",
                flush=True,
            )
    ours, theirs = runs["this checkout"], runs[f"@{args.against}"]
    for what, i in (("wall", 0), ("CPU", 1)):
        median = statistics.median(r[i] for r in ours) / statistics.median(r[i] for r in theirs)
        best = min(r[i] for r in ours) / min(r[i] for r in theirs)
        print(f"{what}: median {median:.3f}, best {best:.3f} x @{args.against}'s")
    mine, base = digests["this checkout"], digests[f"@{args.against}"]
    differ = sorted(k for k in mine.keys() | base.keys() if mine.get(k) != base.get(k))
    print(
        f"dist bytes {ours[-1][3] / theirs[-1][3]:.6f} x @{args.against}'s; "
        f"{len(differ)} files differ: {', '.join(differ) or 'none'}"
    )
    shutil.rmtree(work / "against", ignore_errors=True)
    return 0


class _DiskPeak:
    """The most bytes the file system holding ``where`` had in use beyond its use at the
    start, sampled every 20 ms while the body runs (a benchmark, not a test)."""

    def __init__(self, where: Path) -> None:
        import threading

        self.where = where
        self.start = self._used()
        self.peak = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def _used(self) -> int:
        st = os.statvfs(self.where)
        return (st.f_blocks - st.f_bfree) * st.f_frsize

    def _sample(self) -> None:
        while not self.done.wait(0.02):
            self.peak = max(self.peak, self._used() - self.start)

    def __enter__(self) -> _DiskPeak:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()


def _pack_archives(tree: Path, dest: Path, codec: str) -> None:
    from concurrent.futures import ProcessPoolExecutor

    from tests.build_tools.archive_kit import pack_artifact

    stamp = dest / ".packed"
    if stamp.is_file() and stamp.read_text() == f"{tree}\n":
        return
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    arts = sorted(p for p in tree.iterdir() if p.is_dir())
    with ProcessPoolExecutor(max_workers=2) as pool:
        list(pool.map(pack_artifact, arts, [dest] * len(arts), [codec] * len(arts)))
    stamp.write_text(f"{tree}\n")


_DECOMPRESS = """
from pathlib import Path
import lzma, zstandard
total = 0
for path in sorted(Path({archives!r}).glob("*.tar*")):
    with path.open("rb") as raw:
        if path.name.endswith(".zst"):
            stream = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        elif path.name.endswith(".xz"):
            stream = lzma.LZMAFile(raw)
        else:
            stream = raw
        while block := stream.read(1 << 20):
            total += len(block)
"""

_EXTRACT = """
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
flags = {{".zst": ["--zstd"], ".xz": ["-J"], ".tar": []}}
def extract(path):
    out = Path({tree!r}) / path.name.split(".tar")[0]
    out.mkdir(parents=True)
    subprocess.run(["tar", *flags[path.suffix], "-xf", str(path), "-C", str(out)], check=True)
with ThreadPoolExecutor(2) as pool:
    list(pool.map(extract, sorted(Path({archives!r}).glob("*.tar*"))))
"""


def archives(args: argparse.Namespace) -> int:
    tree, work = args.tree.absolute(), args.work.absolute()
    packed = work / f"archives-{tree.name}-{args.codec}"
    t = time.perf_counter()
    _pack_archives(tree, packed, args.codec)
    size = _tree_bytes(tree)
    archive_bytes = sum(p.stat().st_size for p in packed.glob("*.tar*"))
    print(
        f"tree {tree}: {size / 1e9:.2f} GB; {len(list(packed.glob('*.tar*')))} {args.codec} "
        f"archives {archive_bytes / 1e9:.2f} GB "
        f"(packed or reused in {time.perf_counter() - t:.0f} s)",
        flush=True,
    )
    dest = work / "out"
    rows: dict[str, tuple[float, int, int]] = {}
    digests: dict[str, dict[str, str]] = {}

    def run(name: str, body: str, digest: bool = True) -> None:
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        with _DiskPeak(work) as disk:
            wall, rss = _child(_MEASURE.format(repo=str(REPO), body=body))
        rows[name] = (wall, rss, disk.peak)
        if digest:
            digests[name] = _digests(dest / "dist")
        print(
            f"{name:34} {wall:7.1f} s  peak RSS {rss / 1e6:5.0f} MB  disk beyond inputs "
            f"{disk.peak / 1e9:6.2f} GB",
            flush=True,
        )

    run("decompress every archive once", _DECOMPRESS.format(archives=str(packed)), False)
    run("ours, extracted tree", _ours(tree).replace("{dest}", str(dest)))
    run("ours, archives", _ours(packed).replace("{dest}", str(dest)))
    extracted = work / "extracted"
    shutil.rmtree(extracted, ignore_errors=True)
    extract = _EXTRACT.format(archives=str(packed), tree=str(extracted))
    build = _ours(extracted).replace("{dest}", str(dest))
    run("tar -x (2 at a time), then ours", extract + build)
    shutil.rmtree(dest, ignore_errors=True)
    shutil.rmtree(extracted, ignore_errors=True)
    ours, tree_row = rows["ours, archives"], rows["ours, extracted tree"]
    theirs, once = rows["tar -x (2 at a time), then ours"], rows["decompress every archive once"]
    same = digests["ours, archives"] == digests["ours, extracted tree"]
    print(f"ours from archives / from the extracted tree: {ours[0] / tree_row[0]:.3f}")
    print(f"ours from archives / tar -x then ours: {ours[0] / theirs[0]:.3f}")
    print(
        f"one more decompression pass: {once[0]:.1f} s = {once[0] / tree_row[0]:.2f}x the "
        f"build from the extracted tree ({size / 1e6 / once[0]:.0f} MB/s of tar stream)"
    )
    print(
        f"dist from archives equals dist from the tree: {same} "
        f"({len(digests['ours, archives'])} files)"
    )
    return 0 if same else 1


def _digests(root: Path) -> dict[str, str]:
    from build_tools.pep503 import file_sha256

    return {
        str(p.relative_to(root)): file_sha256(p)
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path.home() / "bench-release-work")
    ap.add_argument("--json", type=Path)
    sub = ap.add_subparsers(dest="what", required=True)
    c = sub.add_parser("compare")
    c.add_argument("--tree", type=Path, required=True)
    c.add_argument("--therock", type=Path)
    c.add_argument("--therock-python", default=sys.executable)
    s = sub.add_parser("scaling")
    s.add_argument("--mode", choices=("legacy", "kpack"), required=True)
    s.add_argument("--scales", default="0.5,1,2,4,8")
    s.add_argument("--keep", action="store_true", help="keep the trees made")
    h = sub.add_parser("shards")
    h.add_argument("--tree", type=Path, required=True, help="a pre-split kpack tree")
    h.add_argument("--split-from", type=Path, help="make --tree by splitting this fat tree")
    h.add_argument("--shards", type=int, default=4)
    a = sub.add_parser("ab")
    a.add_argument("--tree", type=Path, required=True)
    a.add_argument("--against", metavar="REV", required=True, help="a git revision to time too")
    a.add_argument("--rounds", type=int, default=3)
    f = sub.add_parser("fat-shards")
    f.add_argument("--tree", type=Path, required=True, help="a fat kpack tree")
    f.add_argument("--shards", type=int, default=3)
    r = sub.add_parser("archives")
    r.add_argument("--tree", type=Path, required=True)
    r.add_argument("--codec", choices=("zstd", "xz", "none"), default="zstd")
    args = ap.parse_args()
    run = {
        "archives": archives,
        "compare": compare,
        "scaling": scaling,
        "shards": shards,
        "fat-shards": fat_shards,
        "ab": ab,
    }
    return run[args.what](args)


if __name__ == "__main__":
    sys.exit(main())
