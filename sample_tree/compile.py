"""Compiling the sample tree's HIP fat binaries and host programs (``hipcc`` and ``cc``).

Every product is a function of its sources, its command line and the compiler's identity
(``--version``), so it is cached under ``<cache>/sample-build/<key>/`` and built once per
machine. ``hipcc`` always runs with ``HIP_PLATFORM=amd``; no GPU is needed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kpack.errors import ToolError

__all__ = [
    "HIPSAMPLE_ARCHS",
    "INFO_ARCHS",
    "ROCPROF_SYS_TOOLS",
    "SOURCES",
    "Compile",
    "Compiler",
    "Tool",
    "build_products",
    "locate_compilers",
    "sample_compiles",
]

log = logging.getLogger(__name__)

ROCPROF_SYS_TOOLS = ("rocprof-sys-instrument", "rocprof-sys-run", "rocprof-sys-sample")


SOURCES = Path(__file__).resolve().parent / "sample_sources"


HIPSAMPLE_ARCHS = ("gfx900", "gfx90a:xnack+", "gfx90a:xnack-", "gfx1030")


INFO_ARCHS = ("gfx900", "gfx90a", "gfx1030")


Tool = Literal["hipcc", "cc"]


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
