"""A KFD topology node that is not what the kernel driver writes (a FIFO or a directory in the
place of ``properties``, a symlink to a FIFO, an oversize file, a value too long or invalid for
a target version) is skipped with one warning naming its file; the good nodes beside it are
still detected. One reader serves the runtime (``rocm-sdk targets``,
``rocm_sdk.initialize_process()``) and the rocm sdist's build backend (``pip install rocm``):
both are checked. Every run is a fresh interpreter with a timeout, so a reader that blocks
fails the test instead of hanging it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.templates.backend.test_hooks import CALL_HOOK
from tests.templates.rocm_sdk.test_coverage import legacy_site
from tests.templates.tpl_kit import rocm_sdk_tree
from tests.templates.tpl_rendering import context, render

KPACK = context("kpack", ("gfx90a", "gfx1030"), version="7.1.0")
#: seconds a detection may take before the test calls it blocked (it takes milliseconds)
TIMEOUT = 30
GOOD = ("gfx90a", "gfx1030")
CAP = 64 << 10  # the reader's documented cap (_KFD_MAX_PROPERTIES)


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="ascii")


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _symlink_to_fifo(path: Path) -> None:
    os.mkfifo(path.with_name("fifo"))
    path.symlink_to("fifo")


def _directory(path: Path) -> None:
    path.mkdir()
    _write(path / "properties", "simd_count 64\ngfx_target_version 90402\n")


def _huge(path: Path) -> None:
    # the real lines first: a reader that took the first 64 KiB would claim a gfx942
    _write(path, "simd_count 64\ngfx_target_version 90402\n" + "x 1\n" * (CAP // 4))


def _long_version(path: Path) -> None:
    _write(path, "simd_count 64\ngfx_target_version " + "9" * 5000 + "\n")


def _no_number(path: Path) -> None:
    _write(path, "simd_count 64\ngfx_target_version 9x402\n")


def _no_processor(path: Path) -> None:
    _write(path, "simd_count 64\ngfx_target_version 90099\n")  # stepping 99: no hex digit


BAD: dict[str, Callable[[Path], None]] = {
    "fifo": _fifo,
    "symlink-to-fifo": _symlink_to_fifo,
    "directory": _directory,
    "huge": _huge,
    "5000-digit-version": _long_version,
    "non-decimal-version": _no_number,
    "version-naming-no-processor": _no_processor,
}


def kfd_tree(root: Path, bad: Callable[[Path], None]) -> Path:
    """Nodes 0 (the CPU), 1 (gfx90a), 2 (bad: ``bad`` makes its properties) and 3 (gfx1030);
    the path of node 2's properties."""
    nodes = {"0": "simd_count 0\ngfx_target_version 0\n",
             "1": "simd_count 104\ngfx_target_version 90010\n",
             "3": "simd_count 96\ngfx_target_version 100300\n"}  # fmt: skip
    for name, text in nodes.items():
        (root / name).mkdir(parents=True)
        _write(root / name / "properties", "cpu_cores_count 8\n" + text)
    (root / "2").mkdir()
    bad(root / "2" / "properties")
    return root / "2" / "properties"


def run(argv: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``python argv`` with no variable of this machine's ROCm or GPUs; a run that does not
    end within TIMEOUT fails the test (the reader blocked)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ROCM_", "PYTHON"))}
    base |= {"PATH": "/usr/bin:/bin", "SOURCE_DATE_EPOCH": "1700000000"}
    try:
        return subprocess.run(
            [sys.executable, *argv], cwd=cwd, env=base | env, capture_output=True, text=True,
            timeout=TIMEOUT,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"GPU detection did not finish within {TIMEOUT} s: it blocked")


def assert_one_warning(stderr: str, bad_file: Path) -> None:
    """Exactly one warning line, naming the bad file; no traceback."""
    warnings = [line for line in stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1, stderr
    assert str(bad_file) in warnings[0] and "skipped" in warnings[0], stderr
    assert len(warnings[0]) < 400, stderr
    assert "Traceback" not in stderr and "Exceeds the limit" not in stderr, stderr


DETECT = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("di", sys.argv[1])
di = importlib.util.module_from_spec(spec)
sys.modules["di"] = di
spec.loader.exec_module(di)
for _ in range(2):  # one warning per process, however often detection runs
    found = [(g.target, g.source) for g in di.detect_gpus()]
print(json.dumps(found))
"""


@pytest.mark.parametrize("kind", sorted(BAD))
def test_a_bad_node_is_skipped_with_one_warning(tmp_path: Path, kind: str) -> None:
    module = tmp_path / "_dist_info.py"
    module.write_text(render("common/_dist_info.py.j2", KPACK), encoding="utf-8")
    bad_file = kfd_tree(tmp_path / "nodes", BAD[kind])
    proc = run(["-c", DETECT, str(module)], tmp_path, ROCM_SDK_KFD_TOPOLOGY=str(tmp_path / "nodes"))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [[target, "kfd"] for target in GOOD]
    assert_one_warning(proc.stderr, bad_file)


def test_a_properties_file_at_the_cap_is_read(tmp_path: Path) -> None:
    """The cap bounds the read; a file of exactly that size is still KFD's."""
    module = tmp_path / "_dist_info.py"
    module.write_text(render("common/_dist_info.py.j2", KPACK), encoding="utf-8")
    head = "simd_count 64\ngfx_target_version 90402\n"
    kfd_tree(tmp_path / "nodes", lambda p: _write(p, head + "x" * (CAP - len(head) - 1) + "\n"))
    proc = run(["-c", DETECT, str(module)], tmp_path, ROCM_SDK_KFD_TOPOLOGY=str(tmp_path / "nodes"))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert json.loads(proc.stdout) == [["gfx90a", "kfd"], ["gfx942", "kfd"], ["gfx1030", "kfd"]]


INIT_SCRIPT = "import rocm_sdk\nrocm_sdk.initialize_process()\nprint('initialized')\n"


@pytest.mark.parametrize("kind", ["fifo", "symlink-to-fifo", "5000-digit-version"])
def test_the_runtime_finishes_and_names_the_file(tmp_path: Path, kind: str) -> None:
    """``rocm-sdk targets`` and ``rocm_sdk.initialize_process()`` over a bad node: they
    finish, warn once naming the file, and still report the good GPU (gfx90a is served)."""
    site = legacy_site(tmp_path)
    bad_file = kfd_tree(tmp_path / "nodes", BAD[kind])
    env = {"PYTHONPATH": str(site), "ROCM_SDK_KFD_TOPOLOGY": str(tmp_path / "nodes")}
    targets = run(["-m", "rocm_sdk", "targets"], tmp_path, **env)
    assert targets.returncode == 0, targets.stderr
    assert "rocm: GPU gfx90a (found by kfd): device code from" in targets.stderr
    assert "rocm: GPU gfx1030 (found by kfd): NO device code installed" in targets.stderr
    assert_one_warning(targets.stderr, bad_file)
    script = tmp_path / "app.py"
    script.write_text(INIT_SCRIPT)
    init = run([str(script)], tmp_path, **env)
    assert init.returncode == 0 and init.stdout == "initialized\n", init.stderr
    bad_lines = [line for line in init.stderr.splitlines() if str(bad_file) in line]
    assert len(bad_lines) == 1 and "Traceback" not in init.stderr, init.stderr


@pytest.mark.parametrize("kind", ["5000-digit-version", "fifo"])
def test_pip_install_rocm_skips_the_node(tmp_path: Path, kind: str) -> None:
    """The sdist's build backend (what ``pip install rocm`` runs): the wheel is built for
    the good nodes' GPUs (its 'device' extra pulls both's code), with one clean warning for
    the bad one; no traceback, no int-conversion error."""
    tree = rocm_sdk_tree(KPACK, tmp_path / "rocm")
    bad_file = kfd_tree(tmp_path / "nodes", BAD[kind])
    out = tmp_path / "out"
    proc = run(["-c", CALL_HOOK, "build_wheel", str(out)], tree,
               ROCM_SDK_KFD_TOPOLOGY=str(tmp_path / "nodes"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert_one_warning(proc.stderr, bad_file)
    with zipfile.ZipFile(out / json.loads(proc.stdout.splitlines()[-1])) as zf:
        chosen = json.loads(zf.read("rocm_sdk/_selection.json"))
    assert chosen["target_family"] == "gfx90a" and chosen["source"] == "discovered"
    assert chosen["device_extra"] == ["rocm-sdk-device-gfx90a", "rocm-sdk-device-gfx1030"]
    assert "gfx90a (found by kfd), gfx1030 (found by kfd)" in chosen["how"]


def test_a_node_named_by_a_digit_int_refuses_is_ordered_last(tmp_path: Path) -> None:
    """'²' is a digit to str.isdigit() and no number to int(): the node is still read."""
    module = tmp_path / "_dist_info.py"
    module.write_text(render("common/_dist_info.py.j2", KPACK), encoding="utf-8")
    kfd_tree(tmp_path / "nodes", lambda p: _write(p, "simd_count 0\n"))
    (tmp_path / "nodes" / "²").mkdir()
    _write(tmp_path / "nodes" / "²" / "properties", "simd_count 64\ngfx_target_version 90402\n")
    proc = run(["-c", DETECT, str(module)], tmp_path, ROCM_SDK_KFD_TOPOLOGY=str(tmp_path / "nodes"))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert json.loads(proc.stdout) == [["gfx90a", "kfd"], ["gfx1030", "kfd"], ["gfx942", "kfd"]]
