"""pip as the oracle: what ``pip install`` would download from a package set's index.

A package set is a builder's output (``dist/`` and the PEP 503 index of ``--index``); pip runs
``install --dry-run --ignore-installed --report`` against the index with the machine's GPU
forced as rocm-bootstrap reads it (``ROCM_BOOTSTRAP_FORCE_GFX_ARCH``), since the ``rocm``
sdist picks the device wheels when pip builds it. Every file pip names is checked against
``dist/``: same name, size and sha256.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name

from build_tools.pep503 import family_dirs
from kpack.errors import PackagingError, ToolError, UsageError

__all__ = [
    "Digests",
    "Fetched",
    "PackageSet",
    "Resolution",
    "check_against_dist",
    "load_set",
    "pip_version",
    "resolve",
    "run",
]

#: Variables that steer the ``rocm`` sdist's choice; a run sets the one it means.
_STEERING = ("PIP_", "ROCM_SDK_", "ROCM_BOOTSTRAP_")


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


def pip_version() -> str:
    proc = run([sys.executable, "-m", "pip", "--version"], os.environ.copy())
    return proc.stdout.split()[1]


def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``argv``; a failure is a ToolError with the command and its last lines."""
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
    run(argv, _gpu_env(gpu))
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


class Digests:
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


def check_against_dist(res: Resolution, dist_dirs: Sequence[Path], digests: Digests) -> None:
    """Every file of ``res`` is in one of ``dist_dirs`` with pip's size and sha256."""
    for f in res.files:
        twin = next((d / f.name for d in dist_dirs if (d / f.name).is_file()), None)
        if twin is None:
            raise PackagingError(f"pip would download {f.name}, which is not in dist/",
                                 path=dist_dirs[0])  # fmt: skip
        if twin.stat().st_size != f.size or digests(twin) != f.sha256:
            raise PackagingError(f"{f.name} differs from the index's file pip chose", path=twin)


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
