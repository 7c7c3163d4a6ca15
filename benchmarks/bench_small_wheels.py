"""Small wheels: the split as a whole command against a streaming rezip of the same wheel.

    python benchmarks/bench_small_wheels.py [--repeat N] [--no-hipcc] [--no-pypi]
                                            [--wheel X.whl ...] [--against REV] [--json PATH]

For a wheel of a few MB, what a split costs is mostly fixed: the interpreter, the imports,
the command's own set-up. So this times whole processes, started the way a user starts them,
from the parent (``fork``/``exec`` to exit), each in its own process:

- ``kpack split-wheel --input W --output-dir O --device-package-prefix amd-device``;
- ``python -m kpack.tools.split_python_wheels`` with the same options (rocm-kpack's
  command line);
- the baseline: ``python benchmarks/rezip.py W O``, the streaming rezip of
  ``bench_split_wheel.py`` (each member streamed into a new level-6 deflate archive).

Each runs ``--repeat`` times (5), alternating, after one warm-up round that is not counted;
the best run of each counts and the ratios are split / rezip (target: <= 1.0 for every wheel
under 10 MB). The children write their bytecode to a ``.pyc`` cache in the temporary dir (an
installed wheel ships or writes its ``.pyc``; ``PYTHONDONTWRITEBYTECODE`` would make every
run compile kpack's sources again). Both split commands must write byte-identical outputs in
every run. Start-up is measured the same way: the bare interpreter (``python -c pass``), the
command's start-up (``kpack split-wheel -V``: its parser and every module imported before the
work), ``import kpack.wheelsplit``, and a program importing exactly the modules a split of
the smallest input imports, in the same order, and doing nothing else: the floor of a
split's time (the split minus this is its work); the same without kpack's own modules gives
the part of the floor its libraries set. ``--against REV`` also times both split
commands (and the start-up) of git revision ``REV`` in the same rounds: a before/after under
the same load.

Inputs: ``jax-rocm7-plugin`` 0.10.0 from PyPI (8.0 MB: three extension modules, each with one
CCOB v3 zstd bundle for gfx908, gfx90a and four generic targets; cached,
``tests/pypi_inputs.py``), and, when ``hipcc`` is installed (Debian bookworm's), three
wheels built here around a HIP extension compiled for gfx900, gfx906, gfx908, gfx90a and
gfx1030 with 1, 64 and 256 kernels (wheels of 6 KB, 0.1 MB and 0.35 MB: device code
compresses well; the libraries are cached by their source's digest), and two with the
64-kernel extension that vendor, as auditwheel does (``<name>.libs/``), Debian bookworm's real
ROCm host libraries: ``libhsa-runtime64.so.1`` (1.0 MB), and that with ``libamdhip64.so.5``
(5.3 MB). ``--wheel`` adds any wheel (its fat binaries anywhere in it).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

REZIP = ROOT / "benchmarks" / "rezip.py"
TARGETS = ("gfx900", "gfx906", "gfx908", "gfx90a", "gfx1030")
#: kernels in each hipcc-built extension
HIP_SIZES = (1, 64, 256)
#: extension wheels that vendor ROCm host libraries: (Debian packages, label)
VENDORING = (
    (("libhsa-runtime64-1",), "hsa"),
    (("libhsa-runtime64-1", "libamdhip64-5"), "hsa, hip"),
)
SMALL = 10e6  # the issue's "small": under 10 MB
#: the split's options besides input and output (the same for both commands)
SPLIT_ARGS = ("--device-package-prefix", "amd-device")


@dataclass(frozen=True, kw_only=True)
class Input:
    name: str
    wheel: Path
    what: str


def _kernel_source(kernels: int) -> str:
    """A HIP extension with ``kernels`` kernels (each a 32-step unrolled gather) and one
    host function launching them all."""
    parts = ["#include <hip/hip_runtime.h>"]
    for k in range(kernels):
        parts.append(
            f"__global__ void step{k}(float *p, const float *q, int n) {{\n"
            "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  float acc = 0.0f;\n"
            "#pragma unroll\n"
            f"  for (int j = 0; j < 32; ++j) acc += q[(i + j * {k + 1}) % n] * (float)(j + {k});\n"
            "  if (i < n) p[i] = acc;\n}"
        )
    launches = "".join(
        f"  hipLaunchKernelGGL(step{k}, dim3(1), dim3(64), 0, 0, p, q, n);"
        " r += (int)hipGetLastError();\n"
        for k in range(kernels)
    )
    parts.append(
        'extern "C" int launch_all(float *p, const float *q, int n) {\n'
        f"  int r = 0;\n{launches}  return r;\n}}"
    )
    return "\n".join(parts) + "\n"


def _hip_library(kernels: int, cache: Path) -> Path:
    """The extension library with ``kernels`` kernels, compiled once (cached by digest)."""
    source = _kernel_source(kernels)
    flags = [*(f"--offload-arch={t}" for t in TARGETS), "-O2", "-fPIC", "-shared"]
    key = hashlib.sha256("\0".join([source, *flags]).encode()).hexdigest()[:16]
    lib = cache / key / "libhipext.so"
    if lib.is_file():
        return lib
    work = cache / f"{key}.partial"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / "ext.hip").write_text(source)
    env = {**os.environ, "HIP_PLATFORM": "amd"}
    cmd = ["hipcc", *flags, "ext.hip", "-o", "libhipext.so"]
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout}{proc.stderr}")
    shutil.rmtree(lib.parent, ignore_errors=True)
    work.rename(lib.parent)
    return lib


#: Debian bookworm's ROCm host libraries a wheel may vendor: package -> library file, SONAME
VENDORED = {
    "libhsa-runtime64-1": ("libhsa-runtime64.so.1.5.0", "libhsa-runtime64.so.1"),
    "libamdhip64-5": ("libamdhip64.so.5.2.21153", "libamdhip64.so.5"),
}


def _hip_wheel(kernels: int, cache: Path, dest: Path, vendored: tuple[str, ...] = ()) -> Path:
    """A wheel ``hipext<kernels>`` around the extension, with a small Python package and,
    auditwheel's way, the ROCm host libraries of the Debian packages ``vendored`` in
    ``<name>.libs/`` (host code only: nothing of theirs is split)."""
    from kpack.wheelfile import Member, write_wheel

    name = f"hipext{kernels}" + "".join(f"_{p.split('-')[0][3:]}" for p in vendored)
    init = (
        b"import ctypes, os\n\n"
        b'_LIB = ctypes.CDLL(os.path.join(os.path.dirname(__file__), "lib", "libhipext.so"))\n'
    )
    members = [
        Member(f"{name}/__init__.py", init),
        Member(f"{name}/lib/libhipext.so", _hip_library(kernels, cache), executable=True),
    ]
    if vendored:
        from sample_tree.debian_inputs import fetch_debs

        roots = fetch_debs(list(vendored))
        for package in vendored:
            filename, soname = VENDORED[package]
            library = roots[package] / "usr/lib/x86_64-linux-gnu" / filename
            members.append(Member(f"{name}.libs/{soname}", library, executable=True))
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode()
    result = write_wheel(
        dest, dist_name=name, version="1.0", tag="cp311-cp311-linux_x86_64",
        members=members, metadata=metadata,
    )  # fmt: skip
    return result.path


def _inputs(args: argparse.Namespace, work: Path) -> list[Input]:
    inputs = []
    if not args.no_pypi:
        from tests.pypi_inputs import JAX_PLUGIN, fetch_wheel

        wheel = fetch_wheel(JAX_PLUGIN)
        inputs.append(Input(name="jax-rocm7-plugin", wheel=wheel, what="PyPI"))
    if not args.no_hipcc and shutil.which("hipcc"):
        from sample_tree.debian_inputs import default_cache_dir

        cache = default_cache_dir() / "bench-hipcc"
        for kernels in HIP_SIZES:
            wheel = _hip_wheel(kernels, cache, work / "inputs")
            inputs.append(Input(name=f"hipcc {kernels} kernels", wheel=wheel, what="hipcc"))
        for vendored, label in VENDORING:
            wheel = _hip_wheel(64, cache, work / "inputs", vendored)
            inputs.append(Input(name=f"hipcc 64 + {label}", wheel=wheel, what="hipcc"))
    elif not args.no_hipcc:
        print("hipcc not found: no hipcc-built wheels (apt-get install hipcc)")
    inputs += [Input(name=w.name, wheel=w, what="given") for w in args.wheel]
    return inputs


@dataclass(frozen=True, kw_only=True)
class Tree:
    """A copy of the project whose split commands are timed: this checkout (label ``""``)
    or, with ``--against REV``, that revision (label ``@REV``), in the same rounds."""

    label: str
    root: Path


def _against(rev: str, dest: Path) -> Tree:
    """The tree of ``rev`` (``git archive``) extracted below ``dest``."""
    import io
    import tarfile

    proc = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"git archive {rev} failed: {proc.stderr.decode(errors='replace')}")
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return Tree(label=f"@{rev}", root=dest)


def _env(work: Path, tree: Tree) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree.root), env.get("PYTHONPATH")]))
    return env


Command = tuple[list[str], dict[str, str]]


def _timed(command: Command, cwd: Path) -> float:
    """Wall time of one run (in a directory of no tree: ``-m`` looks there first)."""
    cmd, env = command
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr}")
    return wall


def _commands(wheel: Path, out: Path, trees: list[Tree], work: Path) -> dict[str, Command]:
    py = sys.executable
    split = ["--input", str(wheel), "--output-dir", str(out), *SPLIT_ARGS]
    commands = {"rezip": ([py, str(REZIP), str(wheel), str(out)], _env(work, trees[0]))}
    for tree in trees:
        env = _env(work, tree)
        commands[f"split-wheel{tree.label}"] = ([py, "-m", "kpack", "split-wheel", *split], env)
        commands[f"split_python_wheels{tree.label}"] = (
            [py, "-m", "kpack.tools.split_python_wheels", *split],
            env,
        )
    return commands


@dataclass(frozen=True, kw_only=True)
class Row:
    input: str
    wheel: str
    bytes: int
    walls: dict[str, float]  # command -> best wall time (s)
    identical: bool  # each tree's split outputs byte-identical across its runs and commands

    def ratio(self, mode: str) -> float:
        return self.walls[mode] / self.walls["rezip"]


def _measure(item: Input, work: Path, trees: list[Tree], repeat: int) -> Row:
    from benchmarks.bench_split_wheel import tree_digests

    out, runs = work / "out", work / "runs"
    runs.mkdir(exist_ok=True)
    best: dict[str, float] = {}
    digests: dict[str, set[tuple[tuple[str, str], ...]]] = {t.label: set() for t in trees}
    for round_ in range(repeat + 1):  # round 0 warms the .pyc cache and the page cache
        for mode, command in _commands(item.wheel, out, trees, work).items():
            shutil.rmtree(out, ignore_errors=True)
            shutil.rmtree(work / "out-split-reports", ignore_errors=True)
            wall = _timed(command, runs)
            if mode != "rezip":
                digests[mode[mode.find("@") :] if "@" in mode else ""].add(tree_digests(out))
            if round_:
                best[mode] = min(best.get(mode, wall), wall)
    return Row(
        input=item.name, wheel=item.wheel.name, bytes=item.wheel.stat().st_size, walls=best,
        identical=all(len(d) == 1 for d in digests.values()),
    )  # fmt: skip


_LOADED = """
import json, sys
from kpack.cli import main
status = main({argv!r})
print(json.dumps([m for m in sys.modules if m != "__main__"]))
"""


def _split_imports(wheel: Path, work: Path, env: dict[str, str], *, ours: bool = True) -> str:
    """A program importing what a split of ``wheel`` imports, in the same order, and doing
    nothing else: the floor of the split's time (the interpreter and the imports). Without
    ``ours``, kpack's own modules are left out: the part of the floor that the standard
    library and the project's dependencies (pyelftools, packaging, zstandard, ...) set."""
    out = work / "floor-out"
    argv = ["split-wheel", "--input", str(wheel), "--output-dir", str(out), "-q", *SPLIT_ARGS]
    code = _LOADED.format(argv=argv)
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=work / "runs",
                          capture_output=True, text=True, check=True)  # fmt: skip
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(work / "floor-out-split-reports", ignore_errors=True)
    names = json.loads(proc.stdout.splitlines()[-1])
    if not ours:
        names = [n for n in names if n != "kpack" and not n.startswith("kpack.")]
    return "import importlib\nfor m in " + repr(names) + ": importlib.import_module(m)\n"


def _startup(work: Path, trees: list[Tree], repeat: int, smallest: Path | None
             ) -> dict[str, float]:  # fmt: skip
    py = sys.executable
    commands: dict[str, Command] = {"python -c pass": ([py, "-c", "pass"], _env(work, trees[0]))}
    (work / "runs").mkdir(exist_ok=True)
    for tree in trees:
        env = _env(work, tree)
        if smallest is not None:
            commands[f"import what its split imports{tree.label}"] = (
                [py, "-c", _split_imports(smallest, work, env)],
                env,
            )
            commands[f"import what its split imports but kpack's{tree.label}"] = (
                [py, "-c", _split_imports(smallest, work, env, ours=False)],
                env,
            )
        commands[f"kpack split-wheel -V{tree.label}"] = (
            [py, "-m", "kpack", "split-wheel", "-V"],
            env,
        )
        commands[f"import kpack.wheelsplit{tree.label}"] = (
            [py, "-c", "import kpack.wheelsplit"],
            env,
        )
    (work / "runs").mkdir(exist_ok=True)
    best: dict[str, float] = {}
    for round_ in range(repeat + 1):
        for name, command in commands.items():
            wall = _timed(command, work / "runs")
            if round_:
                best[name] = min(best.get(name, wall), wall)
    return best


def _report(rows: list[Row], trees: list[Tree]) -> bool:
    """Print one line per input; whether every wheel under 10 MB met the target (this
    checkout's splits) and every tree's outputs were byte-identical."""
    modes = [f"{m}{t.label}" for t in trees for m in ("split-wheel", "split_python_wheels")]
    print(f"\n{'input':22s} {'MB':>6s} {'rezip':>7s}  " + "  ".join(f"{m:>24s}" for m in modes)
          + "  identical")  # fmt: skip
    met = True
    for r in rows:
        cells = "  ".join(f"{r.walls[m]:7.3f}s {r.ratio(m):5.2f}x".rjust(24) for m in modes)
        print(
            f"{r.input:22s} {r.bytes / 1e6:6.2f} {r.walls['rezip']:6.3f}s  {cells}  {r.identical}"
        )
        small_ok = r.bytes >= SMALL or all(r.ratio(m) <= 1.0 for m in modes[:2])
        met = met and small_ok and r.identical
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-hipcc", action="store_true", help="no hipcc-built wheels")
    parser.add_argument("--no-pypi", action="store_true", help="not the PyPI wheel")
    parser.add_argument("--wheel", type=Path, action="append", default=[], help="another wheel")
    parser.add_argument(
        "--against", metavar="REV", help="also time the splits of this git revision, same rounds"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=Path.home()) as tmp:
        work = Path(tmp)
        trees = [Tree(label="", root=ROOT)]
        if args.against:
            trees.append(_against(args.against, work / "against"))
        inputs = _inputs(args, work)
        smallest = min((i.wheel for i in inputs), key=lambda w: w.stat().st_size, default=None)
        startup = _startup(work, trees, args.repeat, smallest)
        rows = [_measure(item, work, trees, args.repeat) for item in inputs]
    print(f"start-up, best of {args.repeat} (whole processes; the imports: those of the "
          f"smallest input's split, {smallest.name if smallest else 'none'}):")  # fmt: skip
    for name, wall in startup.items():
        print(f"  {name:36s} {wall * 1e3:7.1f} ms")
    met = _report(rows, trees)
    print(f"\ntarget: every wheel under 10 MB splits in <= 1.0x its rezip: "
          f"{'met' if met else 'NOT met'}")  # fmt: skip
    if args.json:
        doc = {
            "repeat": args.repeat,
            "against": args.against,
            "startup": startup,
            "wheels": [
                dataclasses.asdict(r) | {"ratios": {m: r.ratio(m) for m in r.walls}} for r in rows
            ],
            "met": met,
        }
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
