#!/usr/bin/env python3
"""What a user downloads for one GPU against every GPU, pip being the judge (issue 32, item 6).

    python benchmarks/bench_per_gpu.py --sample [--with-rocsparse]
    python benchmarks/bench_per_gpu.py --kpack-tree TREE [--legacy-tree TREE]
    python benchmarks/bench_per_gpu.py --kpack-set DIST INDEX [--legacy-set DIST INDEX]
        [--targets gfx942,gfx1100] [--markdown] [--json FILE] [--work-dir DIR]

No timing: bytes. For every GPU the kpack-split set has a ``device-<gfx>`` extra for (or
``--targets``), pip resolves ``rocm[libraries,device]==V`` from the set's index
(``pip install --dry-run --ignore-installed --report``, ``--index-url file://…``) with that GPU
forced as a user's machine would report it (``ROCM_BOOTSTRAP_FORCE_GFX_ARCH``: the ``rocm``
sdist is built on the "installing machine" and picks the device wheels), and once
``rocm[libraries,device-all]==V`` (no GPU needed). The bytes are those of every file in pip's
report (the ``rocm`` sdist included), each checked against the set's ``dist/``: same name, size
and sha256 as pip's. With a legacy set, ``rocm[libraries]==V`` from the index of the GPU's
family (a multi-family set has one per family, ``INDEX/<family>/``, as TheRock's nightlies do)
gives the legacy figure; ``—`` where no family of the set serves the GPU. Where the builder's
``report.json`` lies beside ``dist/``, its per-target download figures are compared with pip's
(a difference is printed and makes the exit status 1).

``--sample`` builds the sample tree of real Debian and hipcc-compiled binaries in both modes
(``--with-rocsparse`` adds Debian's 1.31 GB librocsparse, whose real fat binary covers ten
GPUs); ``--kpack-tree``/``--legacy-tree`` build the given artifact trees (e.g. those of
``benchmarks/make_release_inputs.py tree``); each build goes through the builder with
``--index`` into a temporary directory (``--work-dir``), removed at the end.
``--kpack-set``/``--legacy-set`` measure sets already built (``DIST``: the builder's
``DEST/dist``; ``INDEX``: its ``--index``).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from packaging.utils import canonicalize_name  # noqa: E402

from build_tools.pep503 import family_dirs  # noqa: E402
from build_tools.targets import FamilyTable, load_family_table  # noqa: E402
from kpack.common.cli import split_list  # noqa: E402
from kpack.errors import PackagingError, RocmPackagingError, ToolError, UsageError  # noqa: E402
from kpack.targets import is_processor, target_order  # noqa: E402

__all__ = ["GpuRow", "PackageSet", "Resolution", "main", "measure", "resolve"]

VERSION = "7.99.0.dev0"
#: Variables that steer the ``rocm`` sdist's choice; the run sets the one it means.
_STEERING = ("PIP_", "ROCM_SDK_", "ROCM_BOOTSTRAP_")
_LIBRARIES = "rocm-sdk-libraries"
_DEVICE = "rocm-sdk-device-"


@dataclass(frozen=True, kw_only=True)
class PackageSet:
    """A builder's output: ``dist`` (flat, or one ``dist/<family>/`` per legacy family) and
    the PEP 503 index written with ``--index`` (``index/<family>/`` likewise)."""

    mode: str
    dist: Path
    index: Path
    version: str
    families: tuple[str, ...] = ()
    origin: str = ""  # the artifact tree it was built from, if this run built it

    def index_of(self, family: str | None) -> Path:
        return self.index / family if family else self.index

    def dist_dirs(self, family: str | None) -> tuple[Path, ...]:
        return (self.dist, self.dist / family) if family else (self.dist,)


@dataclass(frozen=True, kw_only=True)
class Fetched:
    """One file pip would download."""

    project: str
    name: str
    size: int
    sha256: str


@dataclass(frozen=True, kw_only=True)
class Resolution:
    """What pip would download for ``requirement`` on a machine with ``gpu``."""

    requirement: str
    gpu: str
    files: tuple[Fetched, ...]
    extras: tuple[str, ...] = field(default=(), compare=False)  # the rocm sdist's extras

    @property
    def total(self) -> int:
        return sum(f.size for f in self.files)

    def projects(self, prefix: str) -> tuple[str, ...]:
        return tuple(sorted(f.project for f in self.files if f.project.startswith(prefix)))

    def size_of(self, project: str) -> int:
        return sum(f.size for f in self.files if f.project == project)


@dataclass(frozen=True, kw_only=True)
class GpuRow:
    gpu: str
    one: Resolution
    legacy: Resolution | None
    legacy_family: str | None


@dataclass(frozen=True, kw_only=True)
class Measurement:
    every: Resolution
    rows: tuple[GpuRow, ...]
    report_checks: tuple[str, ...]  # the builder's report.json against pip

    @property
    def mismatches(self) -> tuple[str, ...]:
        return tuple(line for line in self.report_checks if " != " in line)


# --- pip, the oracle ------------------------------------------------------------------------


def pip_version() -> str:
    proc = _run([sys.executable, "-m", "pip", "--version"], os.environ.copy())
    return proc.stdout.split()[1]


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
        raise ToolError(f"{' '.join(argv)} failed (exit {proc.returncode}):\n" + "\n".join(tail))
    return proc


def _gpu_env(gpu: str | None) -> dict[str, str]:
    """This process's environment with the machine's GPU forced (``None``: no GPU)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_STEERING)}
    if gpu is None:
        env["ROCM_BOOTSTRAP_DISABLE_DETECTION"] = "1"
    else:
        env["ROCM_BOOTSTRAP_FORCE_GFX_ARCH"] = gpu
    return env


def resolve(index: Path, requirement: str, gpu: str | None, work: Path) -> Resolution:
    """pip's answer: every file ``pip install requirement`` would download from ``index``
    on a machine whose GPU is ``gpu``."""
    report = work / "pip-report.json"
    report.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "pip", "--isolated", "--disable-pip-version-check"]
    argv += ["--no-cache-dir", "install", "--dry-run", "--ignore-installed", "--quiet"]
    argv += ["--report", str(report), "--index-url", index.as_uri(), requirement]
    _run(argv, _gpu_env(gpu))
    data = json.loads(report.read_text(encoding="utf-8"))
    files, extras = [], ()
    for item in data["install"]:
        meta, info = item["metadata"], item["download_info"]
        path = _local_file(info["url"], index)
        sha256 = info.get("archive_info", {}).get("hashes", {}).get("sha256", "")
        files.append(
            Fetched(project=str(canonicalize_name(meta["name"])), name=path.name,
                    size=path.stat().st_size, sha256=sha256)
        )  # fmt: skip
        if meta["name"] == "rocm":
            extras = tuple(meta.get("provides_extra", ()))
    files.sort(key=lambda f: f.project)
    return Resolution(requirement=requirement, gpu=gpu or "", files=tuple(files), extras=extras)


def _local_file(url: str, index: Path) -> Path:
    parts = urllib.parse.urlsplit(url)
    path = Path(urllib.request.url2pathname(parts.path))
    if parts.scheme != "file" or not path.resolve().is_relative_to(index.resolve()):
        raise PackagingError(f"pip would download {url}, which is not in the index", path=index)
    return path


# --- cross-checks -----------------------------------------------------------------------------


class _Digests:
    """sha256 of dist files, each read once per run."""

    def __init__(self) -> None:
        self._seen: dict[Path, str] = {}

    def __call__(self, path: Path) -> str:
        if path not in self._seen:
            digest = hashlib.sha256()
            with path.open("rb") as f:
                while chunk := f.read(1 << 20):
                    digest.update(chunk)
            self._seen[path] = digest.hexdigest()
        return self._seen[path]


def check_against_dist(res: Resolution, dist_dirs: Sequence[Path], digests: _Digests) -> None:
    """Every file of ``res`` is in one of ``dist_dirs`` with pip's size and sha256."""
    for f in res.files:
        twin = next((d / f.name for d in dist_dirs if (d / f.name).is_file()), None)
        if twin is None:
            raise PackagingError(f"pip would download {f.name}, which is not in dist/",
                                 path=dist_dirs[0])  # fmt: skip
        if twin.stat().st_size != f.size or digests(twin) != f.sha256:
            raise PackagingError(f"{f.name} differs from the index's file pip chose", path=twin)


def report_checks(pset: PackageSet, every: Resolution, rows: Sequence[GpuRow]) -> list[str]:
    """The builder's report.json beside ``dist/`` held to pip (it counts the wheels, not the
    sdist): one line per figure compared, ``!=`` where they differ."""
    path = pset.dist.parent / "report.json"
    if not path.is_file():
        return []
    targets = {t["target"]: t for t in json.loads(path.read_text(encoding="utf-8"))["targets"]}
    found: list[tuple[str, str, int, int]] = []
    for row in rows:
        res, key = (row.one, row.gpu) if pset.mode == "kpack" else (row.legacy, row.legacy_family)
        if res is None or key is None or key not in targets:
            continue
        found.append((key, "download_bytes", targets[key]["download_bytes"], _wheels(res)))
        if pset.mode == "kpack":
            fat = targets[key]["fat_download_bytes"]
            found.append((key, "fat_download_bytes", fat, _wheels(every)))
    return [
        f"{path}: {key} {name} {said} {'==' if said == pip else '!='} pip's wheels {pip}"
        for key, name, said, pip in found
    ]


def _wheels(res: Resolution) -> int:
    return sum(f.size for f in res.files if f.name.endswith(".whl"))


# --- measuring --------------------------------------------------------------------------------


def load_set(mode: str, dist: Path, index: Path) -> PackageSet:
    families = family_dirs(dist) if mode == "legacy" else ()
    sdists = sorted({p.name for d in (dist, *(dist / f for f in families))
                     for p in d.glob("rocm-*.tar.gz")})  # fmt: skip
    if len(sdists) != 1:
        raise UsageError(f"expected one rocm-V.tar.gz sdist, found {sdists or 'none'}", path=dist)
    if not (index / (families[0] if families else "") / "index.html").is_file():
        raise UsageError("no PEP 503 index here (the builder's --index)", path=index)
    version = sdists[0].removeprefix("rocm-").removesuffix(".tar.gz")
    return PackageSet(mode=mode, dist=dist, index=index, version=version, families=families)


def gpus_of(every: Resolution) -> tuple[str, ...]:
    """The processors the kpack set has a ``device-<gfx>`` extra for, in natural order."""
    names = (e.removeprefix("device-") for e in every.extras if e.startswith("device-"))
    return tuple(sorted((n for n in names if is_processor(n)), key=target_order))


def _legacy_family(pset: PackageSet, gpu: str, table: FamilyTable) -> str | None:
    """The family whose index serves ``gpu`` (``""``: the flat index), or None."""
    if not pset.families:
        return ""
    return next((f for f in pset.families if _covers(table, f, gpu)), None)


def _covers(table: FamilyTable, family: str, gpu: str) -> bool:
    wanted = canonicalize_name(family)
    known = {canonicalize_name(f): ts for f, ts in table.families.items()}
    return gpu in known.get(wanted, (family,))


def _legacy(
    pset: PackageSet, gpu: str, table: FamilyTable, work: Path, digests: _Digests
) -> tuple[Resolution | None, str | None]:
    family = _legacy_family(pset, gpu, table)
    if family is None:
        return None, None
    res = resolve(pset.index_of(family), f"rocm[libraries]=={pset.version}", gpu, work)
    check_against_dist(res, pset.dist_dirs(family), digests)
    chosen = [p.removeprefix(_LIBRARIES + "-") for p in res.projects(_LIBRARIES + "-")]
    if len(chosen) != 1 or not _covers(table, chosen[0], gpu):
        return None, None  # the selector fell back to a family that is not this GPU's
    return res, chosen[0]


def measure(
    kpack: PackageSet, legacy: PackageSet | None, work: Path, targets: Sequence[str] = ()
) -> Measurement:
    digests, table = _Digests(), load_family_table()
    every = resolve(kpack.index, f"rocm[libraries,device-all]=={kpack.version}", None, work)
    check_against_dist(every, kpack.dist_dirs(None), digests)
    gpus = gpus_of(every)
    unknown = sorted(set(targets) - set(gpus))
    if unknown:
        raise UsageError(f"--targets {', '.join(unknown)}: the set has no device-<gfx> extra "
                         f"for them (it has {', '.join(gpus)})")  # fmt: skip
    rows = []
    for gpu in [g for g in gpus if g in targets] if targets else gpus:
        one = resolve(kpack.index, f"rocm[libraries,device]=={kpack.version}", gpu, work)
        check_against_dist(one, kpack.dist_dirs(None), digests)
        if not one.projects(_DEVICE):
            raise PackagingError(f"rocm[device] installs no device wheel for {gpu}",
                                 path=kpack.index)  # fmt: skip
        old, family = _legacy(legacy, gpu, table, work, digests) if legacy else (None, None)
        rows.append(GpuRow(gpu=gpu, one=one, legacy=old, legacy_family=family))
    checks = report_checks(kpack, every, rows)
    checks += report_checks(legacy, every, rows) if legacy else []
    return Measurement(every=every, rows=tuple(rows), report_checks=tuple(checks))


# --- inputs -----------------------------------------------------------------------------------


def build_set(mode: str, tree: Path, work: Path) -> PackageSet:
    """The builder's output for ``tree``, with its index, under ``work``."""
    dest, index = work / f"{mode}-out", work / f"{mode}-index"
    argv = [sys.executable, str(REPO / "build_tools/build_python_packages.py"), "-q"]
    argv += ["--artifact-dir", str(tree), "--dest-dir", str(dest), "--index", str(index)]
    _run([*argv, "--version", VERSION], os.environ.copy())
    return dataclasses.replace(load_set(mode, dest / "dist", index), origin=f"built from {tree}")


def sample_trees(work: Path, *, with_rocsparse: bool) -> tuple[Path, Path]:
    """The sample tree of real binaries in kpack and legacy mode (one family, gfx90a-dcgpu)."""
    from sample_tree.make_sample_tree import DEFAULT_FAMILY, make_sample_tree

    kpack = make_sample_tree(work / "kpack-tree", kpack_split=True)
    legacy = make_sample_tree(work / "legacy-tree", kpack_split=False)
    if with_rocsparse:
        _add_rocsparse(kpack, "generic")
        _add_rocsparse(legacy, DEFAULT_FAMILY)
    return kpack, legacy


def _add_rocsparse(tree: Path, target: str) -> None:
    """Debian's librocsparse (a real fat library, 1.31 GB) as the ``blas`` library."""
    from sample_tree.debian_inputs import fetch_debs

    root = fetch_debs(["librocsparse0"])["librocsparse0"]
    real = next((root / "usr/lib/x86_64-linux-gnu").glob("librocsparse.so.0.*"))
    stage = "math-libs/BLAS/rocSPARSE/stage"
    lib = tree / f"blas_lib_{target}" / stage / "lib"
    lib.mkdir(parents=True)
    (tree / f"blas_lib_{target}" / "artifact_manifest.txt").write_text(stage + "\n")
    try:
        os.link(real, lib / real.name)
    except OSError:
        shutil.copyfile(real, lib / real.name)
    (lib / "librocsparse.so.0").symlink_to(real.name)


# --- output -----------------------------------------------------------------------------------


def _mb(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"


def table(m: Measurement, *, with_legacy: bool) -> list[list[str]]:
    """Header and one row per GPU."""
    head = ["GPU", "device wheels", "rocm[libraries,device]", "rocm[libraries,device-all]"]
    head += ["one/all"] + (["legacy rocm[libraries]", "one/legacy"] if with_legacy else [])
    rows = [head]
    for r in m.rows:
        devices = "+".join(p.removeprefix(_DEVICE) for p in r.one.projects(_DEVICE))
        cells = [r.gpu, devices, _mb(r.one.total), _mb(m.every.total)]
        cells.append(f"{r.one.total / m.every.total:.3f}")
        if with_legacy and r.legacy is not None:
            cells += [f"{_mb(r.legacy.total)} ({r.legacy_family or 'its family'})"]
            cells += [f"{r.one.total / r.legacy.total:.3f}"]
        elif with_legacy:
            cells += ["— (no family of the set)", "—"]
        rows.append(cells)
    return rows


def summary(m: Measurement) -> list[str]:
    """min / median / max of each ratio, with the GPUs at the ends."""
    lines = []
    for name, pairs in (
        ("one/all", [(r.one.total / m.every.total, r.gpu) for r in m.rows]),
        ("one/legacy", [(r.one.total / r.legacy.total, r.gpu) for r in m.rows if r.legacy]),
    ):
        if pairs:
            low, high = min(pairs), max(pairs)
            mid = statistics.median(v for v, _ in pairs)
            lines.append(f"{name}: min {low[0]:.3f} ({low[1]}), median {mid:.3f}, "
                         f"max {high[0]:.3f} ({high[1]}) over {len(pairs)} GPUs")  # fmt: skip
    return lines


def render(rows: list[list[str]], *, markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(r) + " |" for r in rows]
        lines.insert(1, "|" + "|".join(" --- " for _ in rows[0]) + "|")
        return "\n".join(lines)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(
            c.ljust(w) if i < 2 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    )


# --- command line -----------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="bench_per_gpu.py", description=__doc__.split("\n\n")[0])
    kpack = ap.add_mutually_exclusive_group(required=True)
    kpack.add_argument("--sample", action="store_true", help="the sample tree, both modes")
    kpack.add_argument("--kpack-tree", type=Path, metavar="TREE")
    kpack.add_argument("--kpack-set", type=Path, nargs=2, metavar=("DIST", "INDEX"))
    legacy = ap.add_mutually_exclusive_group()
    legacy.add_argument("--legacy-tree", type=Path, metavar="TREE")
    legacy.add_argument("--legacy-set", type=Path, nargs=2, metavar=("DIST", "INDEX"))
    ap.add_argument("--with-rocsparse", action="store_true", help="--sample: add librocsparse")
    ap.add_argument("--targets", default="", help="only these GPUs (comma-separated)")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--json", type=Path, metavar="FILE", help="also write the figures here")
    ap.add_argument("--work-dir", type=Path, help="parent of the temporary build directory")
    return ap


def _sets(args: argparse.Namespace, work: Path) -> tuple[PackageSet, PackageSet | None]:
    if args.sample:
        if args.legacy_tree or args.legacy_set:
            raise UsageError("--sample builds its own legacy set")
        kpack_tree, legacy_tree = sample_trees(work, with_rocsparse=args.with_rocsparse)
        return build_set("kpack", kpack_tree, work), build_set("legacy", legacy_tree, work)
    if args.with_rocsparse:
        raise UsageError("--with-rocsparse goes with --sample")
    kpack = (
        build_set("kpack", args.kpack_tree, work)
        if args.kpack_tree
        else load_set("kpack", *args.kpack_set)
    )
    if args.legacy_tree:
        return kpack, build_set("legacy", args.legacy_tree, work)
    return kpack, load_set("legacy", *args.legacy_set) if args.legacy_set else None


def _report(m: Measurement, kpack: PackageSet, legacy: PackageSet | None, markdown: bool) -> str:
    head = [
        f"pip {pip_version()} --dry-run --report: bytes of every file it would download "
        "(the rocm sdist included), each checked against dist/",
        f"kpack set {kpack.version}: {kpack.origin or kpack.dist}; device-all is "
        f"{len(m.every.files)} files",
    ]
    if legacy is not None:
        count = len(legacy.families) or 1
        families = f"{count} famil{'y' if count == 1 else 'ies'}"
        head.append(f"legacy set: {legacy.origin or legacy.dist} ({families})")
    rows = table(m, with_legacy=legacy is not None)
    checked = len(m.report_checks)
    tail = [f"the builder's report.json: {checked - len(m.mismatches)} of {checked} figures "
            "equal pip's (wheels only)"] if checked else []  # fmt: skip
    return "\n".join([*head, "", render(rows, markdown=markdown), "", *summary(m), *tail])


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        targets = split_list(args.targets)
        with tempfile.TemporaryDirectory(prefix="bench-per-gpu-", dir=args.work_dir) as tmp:
            kpack, legacy = _sets(args, Path(tmp))
            m = measure(kpack, legacy, Path(tmp), targets)
        print(_report(m, kpack, legacy, args.markdown))
        if args.json:
            figures: dict[str, Any] = {"pip": pip_version(), "version": kpack.version}
            text = json.dumps(figures | asdict(m), indent=1) + "\n"
            try:
                args.json.write_text(text, encoding="utf-8")
            except OSError as exc:
                raise UsageError(f"cannot write: {exc.strerror or exc}", path=args.json) from exc
    except RocmPackagingError as exc:
        print(f"bench_per_gpu.py: error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, UsageError) else 1
    for line in m.mismatches:
        print(f"bench_per_gpu.py: {line}", file=sys.stderr)
    return 1 if m.mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
