"""A small wheel's split does only the work its input needs: no worker pool and no thread,
none of the other tools' modules (the artifact splitter, the builder's planner, the
recombiner, ``kpack inspect``/``resolve``/``verify``), nor modules only some runs need; and
importing an entry point loads no format or display library before the work needs it.

Each split runs in a fresh interpreter, through the command's own entry point, and reports
the modules it imported and the threads it started. Timing is the benchmark's
(``benchmarks/bench_small_wheels.py``); this checks what the time is spent on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kpack.wheelfile import Member, write_wheel
from tests.kpack.transform_fixtures import KERNEL_HIP, hip_env, run
from tests.kpack.wheel_fixtures import TAG, VERSION, metadata
from tests.pypi_inputs import JAX_PLUGIN, pypi_wheel

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[3]
#: the entry points, as ``python -m`` runs them
ENTRIES = {
    "kpack split-wheel": ("kpack.cli", ["split-wheel"]),
    "split_python_wheels": ("kpack.tools.split_python_wheels", []),
    "rocm_kpack split_python_wheels": ("rocm_kpack.tools.split_python_wheels", []),
}
#: what a split that needs no worker pool must not import: the pool (multiprocessing),
#: other tools' modules, what only ``-V`` or a rarely given option needs, display libraries,
#: the YAML parser (the manifests are read from their renderings) and pyelftools' ELFFile
#: (its DWARF and section readers; verification reads the record structures alone)
NOT_NEEDED = (
    "multiprocessing",
    "concurrent.futures.process",
    "importlib.metadata",
    "kpack.split._artifacts",
    "kpack.split._inplan",
    "kpack.split._plan",
    "kpack.split._recombine",
    "kpack.split._write",
    "kpack.artifact.tree",
    "kpack.cli._inspect",
    "kpack.wheelsplit._assemble",
    "kpack.wheelsplit._assemble_write",
    "kpack.wheelsplit._report_read",
    "kpack.resolve",
    "kpack.unbundle",
    "kpack.verify",
    "kpack.wheelfile._sdist",
    "tarfile",
    "build_tools",
    "rich",
    "jinja2",
    "yaml",
    "elftools.elf.elffile",
    "elftools.dwarf",
)
#: ... and what a split of a wheel of a few kB must not load either: the shared zlib (for
#: large members only), the PE reader (no PE image in it)
NOT_NEEDED_SMALL = (*NOT_NEEDED, "ctypes.util", "kpack.pe.image")
#: what importing an entry point (and building its parser) must not import: the libraries
#: a split loads when its work needs them
NOT_AT_START = ("elftools", "yaml", "rich", "jinja2", "multiprocessing", "importlib.metadata")

_RUN = """
import json, sys, threading
started = []
_start = threading.Thread.start
def _recording_start(self):
    started.append(self.name)
    _start(self)
threading.Thread.start = _recording_start
from {module} import main
status = main({argv!r})
compiled = sorted(
    f"{{c.__module__}}.{{c.__qualname__}}"
    for m in list(sys.modules.values()) if m.__name__.startswith("kpack")
    for c in vars(m).values()
    if isinstance(c, type) and c.__module__ == m.__name__
    and getattr(getattr(c, "__dataclass_params__", None), "frozen", False)
    and getattr(c.__eq__, "__code__", None) is not None
    and c.__eq__.__code__.co_filename == "<string>"
)
with open({report!r}, "w") as f:
    json.dump({{"status": status, "modules": sorted(sys.modules), "threads": started,
               "compiled": compiled}}, f)
"""
#: the modules a split loads whose frozen value classes are still ``@dataclass(frozen=True)``
#: (each class's methods compiled from source, twice ``@frozen``'s cost: kpack.common.frozen)
COMPILED_CLASSES = ("kpack.wheelfile.", "kpack.wheelfile._deflate.", "kpack.wheelfile._member.",
                    "kpack.wheelfile._wheel.")  # fmt: skip
#: at most this many modules in all (stdlib and site's vary a little), and exactly kpack's,
#: for a split of a wheel of a few kB: 321 and 106 when set (322 and 107 before the shards'
#: assembly was imported when used), then 107 with kpack.common.threadpool (pools whose
#: threads a signal cannot orphan)
MODULE_BUDGET = (330, 107)
#: the wheels' table a split prints (not quiet): the rule under its header
TABLE_RULE = " ─"

_START = """
import contextlib, io, json, sys
from {module} import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        main({argv!r})
    except SystemExit as exc:
        status = exc.code
print(json.dumps({{"status": status, "help": out.getvalue(), "modules": sorted(sys.modules)}}))
"""


def _split(entry: str, wheel: Path, tmp: Path, *extra: str, env: dict[str, str] | None = None
           ) -> tuple[int, list[str], Path, list[str]]:  # fmt: skip
    status, modules, out, threads, _ = _run_split(entry, wheel, tmp, "-q", *extra, env=env)
    return status, modules, out, threads


def _run_split(entry: str, wheel: Path, tmp: Path, *extra: str, env: dict[str, str] | None = None
               ) -> tuple[int, list[str], Path, list[str], str]:  # fmt: skip
    module, head = ENTRIES[entry]
    out, report = tmp / "out", tmp / "modules.json"
    argv = [*head, "--input", str(wheel), "--output-dir", str(out),
            "--device-package-prefix", "amd-device", *extra]  # fmt: skip
    code = _RUN.format(module=module, argv=argv, report=str(report))
    proc = subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=env,
                          capture_output=True, text=True)  # fmt: skip
    doc = json.loads(report.read_text())
    report.unlink()
    (tmp / "stdout.txt").write_text(proc.stdout)
    (tmp / "compiled.json").write_text(json.dumps(doc["compiled"]))
    return doc["status"], doc["modules"], out, doc["threads"], proc.stdout


def _imported(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return [n for n in names if any(m == n or m.startswith(n + ".") for m in modules)]


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_a_small_wheel_splits_without_a_pool_or_other_tools(entry: str, tmp_path: Path) -> None:
    wheel = pypi_wheel(JAX_PLUGIN)  # 8 MB, three fat extension modules
    status, modules, out, _ = _split(entry, wheel, tmp_path, "-j", "2")
    assert status == 0
    assert len(list(out.glob("amd_device_*.whl"))) == 6  # the split happened
    assert _imported(modules, NOT_NEEDED) == []


def test_the_check_sees_a_pool(tmp_path: Path) -> None:
    """The same split with the pool forced on (as for a large input) does import it: what
    the check above looks for is what a pool needs."""
    wheel = pypi_wheel(JAX_PLUGIN)
    env = {**os.environ, "KPACK_POOL_MIN_BYTES": "0"}
    status, modules, _, _ = _split("kpack split-wheel", wheel, tmp_path, "-j", "2", env=env)
    assert status == 0
    assert _imported(modules, NOT_NEEDED) == ["multiprocessing", "concurrent.futures.process"]


@pytest.fixture(scope="module")
def tiny_wheel(hipcc: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel of a few kB around a hipcc-built extension (one kernel, two targets)."""
    root = tmp_path_factory.mktemp("tiny")
    (root / "k.hip").write_text(KERNEL_HIP.replace("NAME", "k").replace("VALUE", "3"))
    arches = ["--offload-arch=gfx900", "--offload-arch=gfx90a"]
    run([hipcc, *arches, "-fPIC", "-shared", "k.hip", "-o", "libk.so"], env=hip_env(), cwd=root)
    members = [
        Member("torch/__init__.py", b""),
        Member("torch/lib/libk.so", root / "libk.so", executable=True),
    ]
    return write_wheel(
        root, dist_name="torch", version=VERSION, tag=TAG, members=members, metadata=metadata()
    ).path


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_a_wheel_of_a_few_kb_splits_on_one_thread(
    entry: str, tiny_wheel: Path, tmp_path: Path
) -> None:
    status, modules, out, threads = _split(entry, tiny_wheel, tmp_path, "-j", "2")
    assert status == 0
    assert sorted(p.name.split("-")[0] for p in out.glob("*.whl")) == [
        "amd_device_gfx900",
        "amd_device_gfx90a",
        "torch",
    ]
    assert threads == []  # two CPUs offered, none worth a thread
    assert _imported(modules, NOT_NEEDED_SMALL) == []


def test_a_wheel_of_a_few_kb_imports_within_its_budget(tiny_wheel: Path, tmp_path: Path) -> None:
    """A split of a small wheel costs its start-up: a module more is a regression to look
    at (raise the budget only for one the split needs), and its value classes are defined
    by ``@frozen``, not compiled from source by ``@dataclass(frozen=True)``."""
    status, modules, _, _ = _split("kpack split-wheel", tiny_wheel, tmp_path)
    assert status == 0
    ours = [m for m in modules if m == "kpack" or m.startswith("kpack.")]
    print(f"{len(modules)} modules, {len(ours)} of kpack")  # for a budget's update
    assert len(modules) <= MODULE_BUDGET[0] and len(ours) <= MODULE_BUDGET[1], ours
    compiled = json.loads((tmp_path / "compiled.json").read_text())
    assert [c for c in compiled if not c.startswith(COMPILED_CLASSES)] == []


def test_a_wheel_of_a_few_kb_shows_its_table_without_rich(tiny_wheel: Path, tmp_path: Path) -> None:
    """Not quiet, into a log (a pipe, 80 columns): the table of wheels is plain text, drawn
    without importing rich (kpack.common.plain_tables)."""
    env = {**os.environ, "COLUMNS": "80"}
    status, modules, _, _, stdout = _run_split("kpack split-wheel", tiny_wheel, tmp_path, env=env)
    assert status == 0
    assert any(line.startswith(TABLE_RULE) for line in stdout.splitlines()), stdout
    assert _imported(modules, ("rich",)) == []


def test_the_check_sees_threads(tiny_wheel: Path, tmp_path: Path) -> None:
    """Threads forced on for any work (as for a large input): the check sees them start."""
    env = {**os.environ, "KPACK_THREAD_MIN_BYTES": "0"}
    status, _, _, threads = _split("kpack split-wheel", tiny_wheel, tmp_path, "-j", "2", env=env)
    assert status == 0
    assert any(t.startswith("deflate") for t in threads), threads


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_an_entry_point_loads_no_format_library_before_the_work(entry: str) -> None:
    """Importing the entry and building its parser (``--help``) imports none of the
    libraries a split loads when its work needs them (pyelftools when an ELF file is
    verified, PyYAML for a manifest without a rendering, rich for a table)."""
    module, head = ENTRIES[entry]
    code = _START.format(module=module, argv=[*head, "--help"])
    proc = subprocess.run(
        [sys.executable, "-c", code], check=True, cwd=ROOT, capture_output=True, text=True
    )
    doc = json.loads(proc.stdout)
    assert doc["status"] == 0 and "--device-package-prefix" in doc["help"]
    assert _imported(doc["modules"], NOT_AT_START) == []
