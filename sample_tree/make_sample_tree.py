"""Assemble a small but real TheRock artifact tree from Debian packages and hipcc builds.

The tree follows TheRock's layout (``artifact-tree.md``): one ``{name}_{component}_{target}``
directory per artifact, each with an ``artifact_manifest.txt`` and its stage directories.
Its contents are real: ROCm runtime libraries, headers and CMake files from Debian bookworm
(fetched with :func:`sample_tree.debian_inputs.fetch_debs`), plus small HIP fat binaries and
host programs compiled from ``sample_tree/sample_sources/`` with ``hipcc`` (always with
``HIP_PLATFORM=amd``) and ``cc``.

It covers the cases packaging must handle: SONAME-versioned libraries with their symlinks, a
symlink to an ELF executable (launcher stub), a Perl script that needs its
sibling modules, a GNU-ld and an lld-linked (PT_PHDR) fat library with ``xnack`` variants, a
test executable, profiler libraries and programs, and one relpath that two artifacts provide
with identical bytes. ``--edge-cases`` also plants what a happy-path build must warn about
(a dangling symlink, which the builder drops with a warning); the default tree builds
without a single warning.

Modes (``--mode``):

- ``legacy``: ``flags.KPACK_SPLIT_ARTIFACTS`` is false; fat libraries live in ``rand_lib_F``
  and ``fft_lib_F`` for the family ``F`` (``--family``).
- ``kpack``: the flag is true and ``--family`` is not used. The tree is *fat*: the fat
  libraries stay whole in ``rand_lib_generic`` and ``fft_lib_generic``. The builder splits
  them itself; ``kpack split-artifacts`` turns them into the pre-split form.

Compiled products depend only on the sources, the command line and the compiler; they are
cached under ``<cache>/sample-build/<key>/``. Every file gets a fixed mode and mtime and the
tree is written to ``OUTPUT.partial`` and then renamed, so two runs give identical trees.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kpack.errors import RocmPackagingError, ToolError, UsageError
from sample_tree.debian_inputs import default_cache_dir, fetch_debs

__all__ = ["DEB_PACKAGES", "DEFAULT_FAMILY", "main", "make_sample_tree"]

log = logging.getLogger(__name__)

SOURCES = Path(__file__).resolve().parent / "sample_sources"
DEFAULT_FAMILY = "gfx90a-dcgpu"
DEB_PACKAGES = (
    "hipcc",
    "libamd-comgr2",
    "libamdhip64-5",
    "libamdhip64-dev",
    "libhiprand-dev",
    "libhiprand1",
    "libhsa-runtime64-1",
    "librocprim-dev",
    "librocrand-dev",
    "librocrand1",
)
HIPSAMPLE_ARCHS = ("gfx900", "gfx90a:xnack+", "gfx90a:xnack-", "gfx1030")
INFO_ARCHS = ("gfx900", "gfx90a", "gfx1030")
ROCPROF_SYS_TOOLS = ("rocprof-sys-instrument", "rocprof-sys-run", "rocprof-sys-sample")
FIXED_MTIME = 315532800  # 1980-01-01T00:00:00Z, the earliest time a zip entry can hold
NOTICE = "Sample ROCm artifact tree assembled from Debian packages for packaging tests.\n"

HIP = "core/clr/stage"
ROCR = "core/ROCR-Runtime/stage"
LLVM = "compiler/amd-llvm/stage"
ROCRAND = "math-libs/rocRAND/stage"
HIPRAND = "math-libs/hipRAND/stage"
ROCPRIM = "math-libs/rocPRIM/stage"
ROCFFT = "math-libs/rocFFT/stage"
PROFILER = "profiler/rocprofiler-systems/stage"
BASE = "base/aux-overlay/stage"

Tool = Literal["hipcc", "cc"]


# --- data model -------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One leaf of the tree: a copied file, a text file or a symlink (exactly one is set)."""

    artifact: str
    stage: str
    relpath: str
    source: Path | None = None
    text: str | None = None
    link: str | None = None
    mode: int = 0o644


@dataclass(frozen=True)
class TreePlan:
    """Everything to write: artifact dir -> stage dirs, and the sorted leaf entries."""

    stages: dict[str, tuple[str, ...]]
    entries: tuple[Entry, ...]


@dataclass(frozen=True)
class Compile:
    """One compiler run in a scratch dir holding ``sources`` and the products in ``needs``."""

    output: str
    tool: Tool
    sources: tuple[str, ...]
    args: tuple[str, ...]
    needs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Compiler:
    """A located compiler: command prefix, ``--version`` text (part of cache keys), env."""

    command: tuple[str, ...]
    identity: str
    env: tuple[tuple[str, str], ...]

    def run(self, args: Sequence[str], cwd: Path) -> None:
        cmd = [*self.command, *args]
        scratch = cwd / ".tmp"  # clang-15 leaves empty temp dirs behind; keep them in here
        scratch.mkdir(exist_ok=True)
        env = {**os.environ, **dict(self.env), "TMPDIR": str(scratch)}
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise ToolError(
                f"command failed (exit {proc.returncode}): {shlex.join(cmd)}\n"
                f"{proc.stdout}{proc.stderr}".rstrip()
            )


# --- compiling ----------------------------------------------------------------------------


def _arch_flags(archs: Iterable[str]) -> tuple[str, ...]:
    return tuple(f"--offload-arch={a}" for a in archs)


def sample_compiles() -> tuple[Compile, ...]:
    """Every compiled product of the tree, in build order (``needs`` come first)."""
    fat_so = ("-O2", "-fPIC", "-shared", *_arch_flags(HIPSAMPLE_ARCHS))
    hipsample = ("hipsample.hip", "hipsample.h")
    rocprof = ("rocprof_sys.c", "rocprof_sys.h")
    compiles = [
        Compile(
            "libhipsample.so.1.0",
            "hipcc",
            hipsample,
            (
                *fat_so,
                "-Wl,-soname,libhipsample.so.1",
                "hipsample.hip",
                "-o",
                "libhipsample.so.1.0",
            ),
        ),
        Compile(
            "libhipsample_lld.so.1",
            "hipcc",
            hipsample,
            (
                *fat_so,
                "-fuse-ld=lld",
                "-Wl,-soname,libhipsample_lld.so.1",
                "hipsample.hip",
                "-o",
                "libhipsample_lld.so.1",
            ),
        ),
        Compile(
            "hip-sample-info",
            "hipcc",
            ("hip_sample_info.hip",),
            (
                "-O2",
                *_arch_flags(INFO_ARCHS),
                "hip_sample_info.hip",
                "-o",
                "hip-sample-info",
            ),
        ),
        # Host-only program: one --offload-arch only keeps hipcc from probing for a GPU.
        Compile(
            "hipsample-test",
            "hipcc",
            ("hipsample_test.hip", "hipsample.h"),
            (
                "-O2",
                "--offload-arch=gfx900",
                "hipsample_test.hip",
                "-o",
                "hipsample-test",
                "-L.",
                "-l:libhipsample.so.1.0",
            ),
            needs=("libhipsample.so.1.0",),
        ),
        Compile(
            "librocprof-sys.so.1.2.0",
            "cc",
            rocprof,
            (
                "-O2",
                "-fPIC",
                "-shared",
                "-Wl,-soname,librocprof-sys.so.1",
                "rocprof_sys.c",
                "-o",
                "librocprof-sys.so.1.2.0",
            ),
        ),
        Compile(
            "libprofiler-hub.so.0.1.0",
            "cc",
            ("profiler_hub.c",),
            (
                "-O2",
                "-fPIC",
                "-shared",
                "-Wl,-soname,libprofiler-hub.so.0",
                "profiler_hub.c",
                "-o",
                "libprofiler-hub.so.0.1.0",
            ),
        ),
    ]
    compiles += [
        Compile(
            tool,
            "cc",
            ("rocprof_sys_tool.c", "rocprof_sys.h"),
            (
                "-O2",
                f'-DROCPROF_SYS_TOOL="{tool}"',
                "rocprof_sys_tool.c",
                "-o",
                tool,
                "-L.",
                "-l:librocprof-sys.so.1.2.0",
            ),
            needs=("librocprof-sys.so.1.2.0",),
        )
        for tool in ROCPROF_SYS_TOOLS
    ]
    return tuple(compiles)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _compile_key(job: Compile, compiler: Compiler, products: dict[str, Path]) -> str:
    inputs = {name: _sha256(SOURCES / name) for name in job.sources}
    inputs.update({name: _sha256(products[name]) for name in job.needs})
    blob = json.dumps(
        {
            "command": [*compiler.command, *job.args],
            "env": compiler.env,
            "identity": compiler.identity,
            "inputs": inputs,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _build_one(job: Compile, compiler: Compiler, products: dict[str, Path], cache: Path) -> Path:
    key = _compile_key(job, compiler, products)
    final = cache / key
    if (final / job.output).is_file():
        log.debug("cached: %s (%s)", job.output, key)
        return final / job.output
    log.info("compiling %s with %s", job.output, job.tool)
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sample-build-") as tmp:
        work = Path(tmp)
        for name in job.sources:
            shutil.copyfile(SOURCES / name, work / name)
        for name in job.needs:
            shutil.copyfile(products[name], work / name)
        compiler.run(job.args, cwd=work)
        staging = Path(tempfile.mkdtemp(prefix=f"{key}.", suffix=".partial", dir=cache))
        shutil.copy2(work / job.output, staging / job.output)
    try:
        staging.rename(final)
    except OSError:  # another run stored the same product first
        shutil.rmtree(staging)
        if not (final / job.output).is_file():
            raise
    return final / job.output


def build_products(compilers: dict[Tool, Compiler], cache: Path) -> dict[str, Path]:
    """Compile (or take from ``cache``) every product; map output name -> cached file."""
    products: dict[str, Path] = {}
    pending = list(sample_compiles())
    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        while pending:
            ready = [j for j in pending if all(n in products for n in j.needs)]
            if not ready:
                raise ToolError("sample compiles have unsatisfiable dependencies")
            futures = [
                (j, pool.submit(_build_one, j, compilers[j.tool], products, cache)) for j in ready
            ]
            for job, future in futures:
                products[job.output] = future.result()
            pending = [j for j in pending if j not in ready]
    return products


# --- locating tools -----------------------------------------------------------------------


def _tool_identity(command: Sequence[str], env: dict[str, str]) -> str:
    proc = subprocess.run(
        [*command, "--version"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise ToolError(
            f"'{shlex.join(command)} --version' failed (exit {proc.returncode})\n"
            f"{proc.stdout}{proc.stderr}".rstrip()
        )
    return proc.stdout


def locate_compilers(need_apt: bool) -> dict[Tool, Compiler]:
    """Find hipcc and the C compiler (``$CC``, default ``cc``); one error names all missing."""
    cc = tuple(shlex.split(os.environ.get("CC") or "cc"))
    wanted: list[tuple[str, str]] = [
        ("hipcc", "hipcc (apt-get install hipcc)"),
        (cc[0], f"{cc[0]} (the C compiler, $CC; apt-get install gcc)"),
    ]
    if need_apt:
        wanted.append(("apt-get", "apt-get (to download the Debian packages)"))
    missing = [hint for prog, hint in wanted if shutil.which(prog) is None]
    if missing:
        raise ToolError("cannot build the sample tree; missing programs", problems=missing)
    hip_env = {"HIP_PLATFORM": "amd"}
    return {
        "hipcc": Compiler(("hipcc",), _tool_identity(("hipcc",), hip_env), tuple(hip_env.items())),
        "cc": Compiler(cc, _tool_identity(cc, {}), ()),
    }


def _debs_missing(cache: Path) -> bool:
    return any(not any((cache / "debs").glob(f"{n}_*.deb")) for n in DEB_PACKAGES)


# --- planning -----------------------------------------------------------------------------


class _Planner:
    """Collects stage dirs and entries; :meth:`plan` freezes them into a :class:`TreePlan`."""

    def __init__(self) -> None:
        self.stages: dict[str, set[str]] = {}
        self.entries: dict[tuple[str, str, str], Entry] = {}

    def stage(self, artifact: str, stage: str) -> None:
        self.stages.setdefault(artifact, set()).add(stage)

    def put(self, entry: Entry) -> None:
        key = (entry.artifact, entry.stage, entry.relpath)
        if key in self.entries:
            raise ToolError(f"sample tree plans {'/'.join(key)} twice")
        self.stage(entry.artifact, entry.stage)
        self.entries[key] = entry

    def text(self, artifact: str, stage: str, relpath: str, text: str) -> None:
        self.put(Entry(artifact, stage, relpath, text=text))

    def link(self, artifact: str, stage: str, relpath: str, target: str) -> None:
        self.put(Entry(artifact, stage, relpath, link=target))

    def add(self, artifact: str, stage: str, relpath: str, source: Path) -> None:
        """Add a file, a symlink (kept as a link) or a whole directory, sorted."""
        if source.is_symlink():
            target = os.readlink(source)
            if os.path.isabs(target):
                raise ToolError(f"absolute symlink {target!r} in a Debian package", path=source)
            self.link(artifact, stage, relpath, target)
        elif source.is_dir():
            for child in sorted(source.iterdir()):
                self.add(artifact, stage, f"{relpath}/{child.name}", child)
        else:
            mode = 0o755 if source.stat().st_mode & 0o100 else 0o644
            self.put(Entry(artifact, stage, relpath, source=source, mode=mode))

    def plan(self) -> TreePlan:
        stages = {a: tuple(sorted(s)) for a, s in sorted(self.stages.items())}
        return TreePlan(stages, tuple(self.entries[k] for k in sorted(self.entries)))


def _one(root: Path, pattern: str) -> Path:
    """The one path matching ``pattern``; its last part is literal and may be a dangling link."""
    parents, _, name = pattern.rpartition("/")
    found = [d / name for d in sorted(root.glob(parents)) if os.path.lexists(d / name)]
    if len(found) != 1:
        raise ToolError(f"expected one match for {pattern!r}, found {len(found)}", path=root)
    return found[0]


def _add_library(p: _Planner, artifact: str, stage: str, root: Path, soname: str) -> None:
    """Copy the real library behind the package's ``soname`` link, plus that link."""
    link = _one(root, f"usr/lib/*/{soname}")
    real = link.parent / os.readlink(link) if link.is_symlink() else link
    if real == link or real.is_symlink() or not real.is_file():
        raise ToolError(f"{soname} is not a symlink to a regular file", path=link)
    p.add(artifact, stage, f"lib/{real.name}", real)
    p.add(artifact, stage, f"lib/{soname}", link)


def _dist_targets() -> str:
    bases = [a.split(":")[0] for a in (*INFO_ARCHS, *HIPSAMPLE_ARCHS)]
    return ";".join(dict.fromkeys(bases))


def _plan_base(p: _Planner, kpack_split: bool) -> None:
    manifest = {
        "flags": {"KPACK_SPLIT_ARTIFACTS": kpack_split},
        "generator": "sample_tree/make_sample_tree.py",
        "submodules": [],
        "the_rock_commit": "sample",
    }
    dist_info = {"dist_amdgpu_targets": _dist_targets()}
    for name, value in (("therock_manifest.json", manifest), ("dist_info.json", dist_info)):
        p.text(
            "base_lib_generic",
            BASE,
            f"share/therock/{name}",
            json.dumps(value, indent=2, sort_keys=True) + "\n",
        )


def _plan_core(
    p: _Planner, debs: dict[str, Path], products: dict[str, Path], edge_cases: bool
) -> None:
    hip, hip_dev = debs["libamdhip64-5"], debs["libamdhip64-dev"]
    _add_library(p, "core-hip_lib_generic", HIP, hip, "libamdhip64.so.5")
    if edge_cases:
        p.link("core-hip_lib_generic", HIP, "lib/libhip-dangling.so.1", "libnot-there.so.1")
    p.add("core-hip_lib_generic", HIP, "share/hip/version", hip_dev / "usr/share/hip/version")
    p.text("core-hip_lib_generic", HIP, "share/therock/NOTICE.txt", NOTICE)

    p.add("core-hip_dev_generic", HIP, "include/hip", hip_dev / "usr/include/hip")
    p.add(
        "core-hip_dev_generic", HIP, "lib/libamdhip64.so", _one(hip_dev, "usr/lib/*/libamdhip64.so")
    )
    p.add("core-hip_dev_generic", HIP, "lib/cmake", _one(hip_dev, "usr/lib/*/cmake"))

    # hipconfig is a Perl wrapper that execs hipconfig.pl, which loads hipvars.pm.
    for name in ("hipconfig", "hipconfig.pl", "hipvars.pm"):
        p.add("core-hip_run_generic", HIP, f"bin/{name}", debs["hipcc"] / "usr/bin" / name)
    p.add(
        "core-hip_run_generic",
        HIP,
        "libexec/hip-sample/hip-sample-info",
        products["hip-sample-info"],
    )
    p.link(
        "core-hip_run_generic", HIP, "bin/hip-sample-info", "../libexec/hip-sample/hip-sample-info"
    )

    _add_library(
        p, "core-runtime_lib_generic", ROCR, debs["libhsa-runtime64-1"], "libhsa-runtime64.so.1"
    )
    p.text("core-runtime_lib_generic", ROCR, "share/therock/NOTICE.txt", NOTICE)
    _add_library(p, "amd-llvm_lib_generic", LLVM, debs["libamd-comgr2"], "libamd_comgr.so.2")


def _plan_math(
    p: _Planner, debs: dict[str, Path], products: dict[str, Path], lib_target: str
) -> None:
    rand = f"rand_lib_{lib_target}"
    _add_library(p, rand, ROCRAND, debs["librocrand1"], "librocrand.so.1")
    _add_library(p, rand, HIPRAND, debs["libhiprand1"], "libhiprand.so.1")
    for stage, pkg, sub in (
        (ROCRAND, "librocrand-dev", "rocrand"),
        (HIPRAND, "libhiprand-dev", "hiprand"),
    ):
        root = debs[pkg]
        p.add("rand_dev_generic", stage, f"include/{sub}", root / "usr/include" / sub)
        p.add("rand_dev_generic", stage, f"lib/cmake/{sub}", _one(root, f"usr/lib/*/cmake/{sub}"))
        p.add("rand_dev_generic", stage, f"lib/lib{sub}.so", _one(root, f"usr/lib/*/lib{sub}.so"))

    prim = debs["librocprim-dev"]
    p.add("prim_dev_generic", ROCPRIM, "include/rocprim", prim / "usr/include/rocprim")
    p.add("prim_dev_generic", ROCPRIM, "lib/cmake/rocprim", _one(prim, "usr/lib/cmake/rocprim"))
    p.add("prim_doc_generic", ROCPRIM, "share/doc", prim / "usr/share/doc")

    fft = f"fft_lib_{lib_target}"
    p.add(fft, ROCFFT, "lib/libhipsample.so.1.0", products["libhipsample.so.1.0"])
    p.link(fft, ROCFFT, "lib/libhipsample.so.1", "libhipsample.so.1.0")
    p.add(fft, ROCFFT, "lib/libhipsample_lld.so.1", products["libhipsample_lld.so.1"])
    p.link("fft_dev_generic", ROCFFT, "lib/libhipsample.so", "libhipsample.so.1")
    p.add("fft_dev_generic", ROCFFT, "include/hipsample/hipsample.h", SOURCES / "hipsample.h")
    p.add("fft_test_generic", ROCFFT, "bin/hipsample-test", products["hipsample-test"])


def _plan_profiler(p: _Planner, products: dict[str, Path]) -> None:
    lib = "rocprofiler-systems_lib_generic"
    for real, soname in (
        ("librocprof-sys.so.1.2.0", "librocprof-sys.so.1"),
        ("libprofiler-hub.so.0.1.0", "libprofiler-hub.so.0"),
    ):
        p.add(lib, PROFILER, f"lib/{real}", products[real])
        p.link(lib, PROFILER, f"lib/{soname}", real)
    for tool in ROCPROF_SYS_TOOLS:
        p.add("rocprofiler-systems_run_generic", PROFILER, f"bin/{tool}", products[tool])


def plan_tree(
    debs: dict[str, Path],
    products: dict[str, Path],
    *,
    family: str,
    kpack_split: bool,
    edge_cases: bool = False,
) -> TreePlan:
    """The whole tree as a value; reads only metadata (links, modes) of its inputs."""
    p = _Planner()
    _plan_base(p, kpack_split)
    _plan_core(p, debs, products, edge_cases)
    _plan_math(p, debs, products, "generic" if kpack_split else family)
    _plan_profiler(p, products)
    return p.plan()


# --- writing ------------------------------------------------------------------------------


def write_tree(plan: TreePlan, root: Path) -> None:
    """Create ``root`` from ``plan`` with fixed modes and mtimes."""
    root.mkdir()
    for artifact, stages in plan.stages.items():
        for stage in stages:
            (root / artifact / stage).mkdir(parents=True, exist_ok=True)
        (root / artifact / "artifact_manifest.txt").write_text(
            "\n".join(stages) + "\n", encoding="utf-8"
        )
    for e in plan.entries:
        dest = root / e.artifact / e.stage / e.relpath
        dest.parent.mkdir(parents=True, exist_ok=True)
        if e.link is not None:
            os.symlink(e.link, dest)
            continue
        if e.source is not None:
            shutil.copyfile(e.source, dest)
        else:
            dest.write_text(e.text or "", encoding="utf-8")
        dest.chmod(e.mode)
    for dirpath, dirnames, filenames in os.walk(root, topdown=False):
        for name in filenames + dirnames:
            os.utime(os.path.join(dirpath, name), (FIXED_MTIME, FIXED_MTIME), follow_symlinks=False)
        os.chmod(dirpath, 0o755)
        os.utime(dirpath, (FIXED_MTIME, FIXED_MTIME))


def _is_sample_tree(path: Path) -> bool:
    manifest = path / "base_lib_generic" / BASE / "share/therock/therock_manifest.json"
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("the_rock_commit") == "sample"


def _check_output(output: Path) -> None:
    if not (output.exists() or output.is_symlink()):
        return
    if output.is_symlink() or not output.is_dir():
        raise UsageError("output exists and is not a directory", path=output)
    if any(output.iterdir()) and not _is_sample_tree(output):
        raise UsageError(
            "refusing to replace a non-empty directory that is not a sample tree", path=output
        )


def _publish(partial: Path, output: Path) -> None:
    if output.exists():
        old = output.with_name(output.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        output.rename(old)
        partial.rename(output)
        shutil.rmtree(old)
    else:
        partial.rename(output)


def make_sample_tree(
    output: Path,
    *,
    cache_dir: Path | None = None,
    family: str = DEFAULT_FAMILY,
    kpack_split: bool = False,
    edge_cases: bool = False,
) -> Path:
    """Build the sample artifact tree at ``output`` (replacing an earlier sample tree)."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9-]*", family):
        raise UsageError(f"invalid family {family!r}: use letters, digits and '-' only")
    output = Path(output).absolute()
    _check_output(output)
    cache = cache_dir or default_cache_dir()
    compilers = locate_compilers(need_apt=_debs_missing(cache))
    debs = fetch_debs(list(DEB_PACKAGES), cache)
    products = build_products(compilers, cache / "sample-build")
    if kpack_split:
        log.info("kpack mode: --family %s is not used; fat binaries stay in _generic", family)
    plan = plan_tree(debs, products, family=family, kpack_split=kpack_split, edge_cases=edge_cases)
    partial = output.with_name(output.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        write_tree(plan, partial)
        _publish(partial, output)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    log.info("wrote %d artifacts, %d entries to %s", len(plan.stages), len(plan.entries), output)
    return output


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="make_sample_tree.py",
        description="Assemble a real TheRock-style artifact tree from Debian packages and "
        "hipcc-built samples.",
    )
    parser.add_argument("--output", type=Path, required=True, help="artifact root to write")
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="download/compile cache (default: $ROCM_PACKAGING_CACHE or ~/.cache/rocm-packaging)",
    )
    parser.add_argument(
        "--mode",
        choices=("legacy", "kpack"),
        default="legacy",
        help="value of flags.KPACK_SPLIT_ARTIFACTS (kpack = true)",
    )
    parser.add_argument(
        "--family",
        default=DEFAULT_FAMILY,
        help=f"target of the fat-library artifacts in legacy mode (default {DEFAULT_FAMILY})",
    )
    parser.add_argument(
        "--edge-cases",
        action="store_true",
        help="also plant inputs the builder warns about (a dangling symlink)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    start = time.monotonic()
    try:
        root = make_sample_tree(
            args.output,
            cache_dir=args.cache_dir,
            family=args.family,
            kpack_split=args.mode == "kpack",
            edge_cases=args.edge_cases,
        )
    except RocmPackagingError as exc:
        print(f"make_sample_tree: error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {args.mode} sample tree to {root} in {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
