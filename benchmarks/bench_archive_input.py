"""Benchmark: reading one of TheRock's artifact archives (:mod:`kpack.artifact.packed`)
against GNU tar extracting the same archive, in the same run.

Writes one ``blas_lib_gfx942.tar.zst`` (and ``.tar.xz`` with ``--xz``) of ``--size-mb``
MB: 8 MiB files of seeded pseudo-random bytes, each half zeros (compressible about 2:1,
as device code is). Then, each in a child process
timed with ``wait4`` (wall time and peak RSS): our one-pass reader
(``unpack_artifact`` into a spool, then the artifact scan of the builder) and
``tar --zstd -xf`` / ``tar -xJf`` (the extraction pass TheRock's ``fetch`` does before a
build can start). Prints times, the ratio ours/tar, and our peak RSS at two sizes (flat
memory: the RSS must not grow with the archive).

    python benchmarks/bench_archive_input.py                   # 256 MB and 1024 MB
    python benchmarks/bench_archive_input.py --size-mb 2048 --xz

``--archives DIR [--against REV] [--rounds N]`` times instead the unpacking of every archive
in ``DIR`` (say, the ones ``bench_release.py archives`` packs), one at a time into one
spool, by this checkout's reader and, alternating round by round, by the reader of git
revision ``REV`` (``git archive``); dirty pages are written back before each run.

    python benchmarks/bench_archive_input.py --archives W/archives-legacy-8-zstd --against ddf5fd6
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.build_tools.archive_kit import pack_artifact  # noqa: E402

_CHILD = """
import sys
from pathlib import Path
sys.path.insert(0, {repo!r})
from build_tools.artifacts import scan_artifact
from kpack.artifact.names import ArtifactId
from kpack.artifact.packed import PackedArtifact, unpack_artifact
path = Path({archive!r})
art = ArtifactId.parse(path.name.split(".tar")[0])
packed = PackedArtifact(id=art, path=path, size=path.stat().st_size)
scan_artifact(unpack_artifact(packed, Path({spool!r})))
"""


def _make_artifact(root: Path, size_mb: int) -> Path:
    art = root / "blas_lib_gfx942"
    stage = art / "math-libs/BLAS/stage"
    (stage / "lib").mkdir(parents=True)
    (art / "artifact_manifest.txt").write_text("math-libs/BLAS/stage\n")
    rng = random.Random(31)
    chunk = 8 << 20
    written = n = 0
    while written < size_mb << 20:
        half = rng.randbytes(chunk // 2)
        (stage / "lib" / f"part{n:04d}.co").write_bytes(half + bytes(chunk // 2))
        written += chunk
        n += 1
    return art


def _timed(argv: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of ``argv`` run as a child (dirty pages written
    back first, so neither side pays for the other's writes)."""
    os.sync()
    start = time.monotonic()
    proc = subprocess.Popen(argv)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {argv}")
    return time.monotonic() - start, usage.ru_maxrss


def _bench(archive: Path, work: Path, tar_flag: str) -> tuple[float, float, int]:
    spool = work / "spool"
    spool.mkdir()
    code = _CHILD.format(repo=str(REPO), archive=str(archive), spool=str(spool))
    ours, rss = _timed([sys.executable, "-c", code])
    shutil.rmtree(spool)
    out = work / "tar"
    out.mkdir()
    tar, _ = _timed(["tar", tar_flag, "-xf", str(archive), "-C", str(out)])
    shutil.rmtree(out)
    return ours, tar, rss


_UNPACK_ALL = """
import shutil, sys
from pathlib import Path
sys.path.insert(0, {repo!r})
from kpack.artifact.names import ArtifactId
from kpack.artifact.packed import PackedArtifact, unpack_artifact
spool = Path({spool!r})
for path in sorted(Path({archives!r}).glob("*.tar*")):
    if path.name.endswith(".sha256sum"):
        continue
    art = ArtifactId.parse(path.name.split(".tar")[0])
    unpack_artifact(PackedArtifact(id=art, path=path, size=path.stat().st_size), spool)
"""


def _readers(archives: Path, against: str | None, rounds: int) -> int:
    import statistics

    from bench_small_wheels import _against  # benchmarks/ is on sys.path

    with tempfile.TemporaryDirectory(prefix="bench-archive-", dir=archives.parent) as tmp:
        work = Path(tmp)
        repos = {"this checkout": REPO}
        if against is not None:
            repos[f"@{against}"] = _against(against, work / "against").root
        times: dict[str, list[float]] = {name: [] for name in repos}
        for round_ in range(rounds):
            for name, repo in repos.items():
                spool = work / "spool"
                spool.mkdir()
                code = _UNPACK_ALL.format(repo=str(repo), spool=str(spool), archives=str(archives))
                wall, rss = _timed([sys.executable, "-c", code])
                shutil.rmtree(spool)
                times[name].append(wall)
                print(f"round {round_ + 1} {name:16} {wall:7.2f} s  peak RSS {rss / 1024:5.0f} MiB")
        for name, walls in times.items():
            print(f"{name:16} median {statistics.median(walls):7.2f} s, best {min(walls):7.2f} s")
        if against is not None:
            mine, theirs = times["this checkout"], times[f"@{against}"]
            print(
                f"this checkout / @{against}: median "
                f"{statistics.median(mine) / statistics.median(theirs):.3f}, "
                f"best {min(mine) / min(theirs):.3f}"
            )
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size-mb", type=int, nargs="+", default=[256, 1024])
    p.add_argument("--xz", action="store_true", help="also an xz archive (slow to write)")
    p.add_argument("--archives", type=Path, help="time unpacking the archives of this dir")
    p.add_argument("--against", metavar="REV", help="with --archives: also REV's reader")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    if args.archives is not None:
        return _readers(args.archives.absolute(), args.against, args.rounds)
    print(f"{'archive':<28}{'MB':>7}{'ours s':>9}{'tar s':>9}{'ratio':>8}{'RSS MiB':>9}")
    for size in args.size_mb:
        with tempfile.TemporaryDirectory(prefix="bench-archive-") as tmp:
            root = Path(tmp)
            art = _make_artifact(root / "src", size)
            for compression, flag in (("zstd", "--zstd"), *((("xz", "-J"),) if args.xz else ())):
                archive = pack_artifact(art, root, compression)
                ours, tar, rss = _bench(archive, root, flag)
                print(
                    f"{archive.name:<28}{size:>7}{ours:>9.2f}{tar:>9.2f}"
                    f"{ours / tar:>7.2f}x{rss / 1024:>9.0f}"
                )
                archive.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
