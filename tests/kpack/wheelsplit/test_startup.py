"""A small wheel's split does only the work its input needs: no worker pool, and none of
the other tools' modules (the artifact splitter, the builder's planner, the recombiner,
``kpack inspect``/``resolve``/``verify``), nor modules only some runs need.

Each split runs in a fresh interpreter, through the command's own entry point, and reports
the modules it imported. Timing is the benchmark's (``benchmarks/bench_small_wheels.py``);
this checks what the time is spent on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pypi_inputs import JAX_PLUGIN, pypi_wheel

pytestmark = pytest.mark.real

ROOT = Path(__file__).resolve().parents[3]
#: the entry points, as ``python -m`` runs them
ENTRIES = {
    "kpack split-wheel": ("kpack.cli", ["split-wheel"]),
    "split_python_wheels": ("kpack.tools.split_python_wheels", []),
}
#: what a split that needs no worker pool must not import: the pool (multiprocessing),
#: other tools' modules, what only ``-V`` or a rarely given option needs, display libraries
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
    "kpack.resolve",
    "kpack.unbundle",
    "kpack.verify",
    "kpack.wheelfile._sdist",
    "tarfile",
    "build_tools",
    "rich",
    "jinja2",
)

_RUN = """
import json, sys
from {module} import main
status = main({argv!r})
with open({report!r}, "w") as f:
    json.dump({{"status": status, "modules": sorted(sys.modules)}}, f)
"""


def _split(entry: str, wheel: Path, tmp: Path, *extra: str, env: dict[str, str] | None = None
           ) -> tuple[int, list[str], Path]:  # fmt: skip
    module, head = ENTRIES[entry]
    out, report = tmp / "out", tmp / "modules.json"
    argv = [*head, "--input", str(wheel), "--output-dir", str(out),
            "--device-package-prefix", "amd-device", "-q", *extra]  # fmt: skip
    code = _RUN.format(module=module, argv=argv, report=str(report))
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=env,
                   capture_output=True, text=True)  # fmt: skip
    doc = json.loads(report.read_text())
    return doc["status"], doc["modules"], out


def _imported(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return [n for n in names if any(m == n or m.startswith(n + ".") for m in modules)]


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_a_small_wheel_splits_without_a_pool_or_other_tools(entry: str, tmp_path: Path) -> None:
    wheel = pypi_wheel(JAX_PLUGIN)  # 8 MB, three fat extension modules
    status, modules, out = _split(entry, wheel, tmp_path, "-j", "2")
    assert status == 0
    assert len(list(out.glob("amd_device_*.whl"))) == 6  # the split happened
    assert _imported(modules, NOT_NEEDED) == []


def test_the_check_sees_a_pool(tmp_path: Path) -> None:
    """The same split with the pool forced on (as for a large input) does import it: what
    the check above looks for is what a pool needs."""
    wheel = pypi_wheel(JAX_PLUGIN)
    env = {**os.environ, "KPACK_POOL_MIN_BYTES": "0"}
    status, modules, _ = _split("kpack split-wheel", wheel, tmp_path, "-j", "2", env=env)
    assert status == 0
    assert _imported(modules, NOT_NEEDED) == ["multiprocessing", "concurrent.futures.process"]
