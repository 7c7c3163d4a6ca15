"""SIGTERM (what CI sends on cancel) and SIGHUP clean up like SIGINT: the previous dist/ stays
byte-identical, no temp dir is left in dest or in TMPDIR, no worker process survives."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ..conftest import require

REPO = Path(__file__).resolve().parents[2]
VERSION = "7.99.0.dev0"
pytestmark = [pytest.mark.real, pytest.mark.compile, pytest.mark.slow]


@pytest.fixture(scope="module")
def kpack_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real kpack-mode sample tree: fat artifacts split in-process by a worker pool."""
    require(shutil.which("hipcc") is not None, "hipcc is not installed")
    from sample_tree.make_sample_tree import make_sample_tree

    out = tmp_path_factory.mktemp("kpack-signals") / "artifacts"
    return make_sample_tree(out, cache_dir=None, family="gfx90a-dcgpu", kpack_split=True)


def _digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _wait_for(condition: Callable[[], bool], proc: subprocess.Popen[str], what: str) -> None:
    """Poll (synchronise on a condition, not on time) until ``condition`` holds."""
    deadline = time.monotonic() + 120
    while not condition():
        assert proc.poll() is None, f"the build ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def _descendants(pid: int) -> set[int]:
    out: set[int] = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            child = int(stat.parent.name)
            out |= {child} | _descendants(child)
    return out


@pytest.mark.parametrize(
    ("signum", "group"),
    [(signal.SIGTERM, False), (signal.SIGTERM, True), (signal.SIGHUP, False)],
)
def test_signal_during_the_split_cleans_up(
    kpack_tree: Path, tmp_path: Path, signum: int, group: bool
) -> None:
    dest = tmp_path / "out"
    (dest / "dist").mkdir(parents=True)
    (dest / "dist" / "previous.whl").write_bytes(b"the previous build")
    before = _digests(dest)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    cmd = [sys.executable, "-m", "build_tools.build_python_packages", "--artifact-dir",
           str(kpack_tree), "--dest-dir", str(dest), "--version", VERSION, "-j", "2"]  # fmt: skip
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        # apply spools the planned archives' kernels first, into
        # DEST/.build-python-packages.staging-*/out/kpack-spool: signal once that has begun
        _wait_for(
            lambda: any(dest.glob(".build-python-packages.staging-*/out/kpack-spool")),
            proc,
            "the split started",
        )
        children = _descendants(proc.pid)
        if group:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 128 + signum, err
    assert f"interrupted by {signal.Signals(signum).name}" in err
    assert "Traceback" not in err, err
    assert _digests(dest) == before
    assert sorted(p.name for p in dest.iterdir()) == ["dist"]
    assert list(tmpdir.iterdir()) == []
    survivors = {pid for pid in children if _running(pid)}
    assert not survivors, f"worker processes left running: {survivors}"


def _running(pid: int) -> bool:
    """``pid`` exists and is not a zombie (an exited process its new parent has yet to
    reap: the fork server and resource tracker the builder leaves when a signal ends it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _slow_core_tree(tree: Path) -> Path:
    """A legacy tree whose core package holds 96 MiB of incompressible data: deflating it
    takes seconds, long enough to be interrupted in the middle."""
    from .treeutil import add_artifact, write_manifest

    write_manifest(tree)
    block = os.urandom(1 << 20)
    add_artifact(
        tree, "core-hip_lib_generic", "core/clr/stage",
        {f"share/blob{i}.bin": block * 24 for i in range(4)},
    )  # fmt: skip
    return tree


def test_signal_while_writing_packages_keeps_dist(tmp_path: Path) -> None:
    """Legacy mode, interrupted while the temp build dir inside dest fills up."""
    tree = _slow_core_tree(tmp_path / "tree")
    dest = tmp_path / "out"
    (dest / "dist").mkdir(parents=True)
    (dest / "dist" / "previous.whl").write_bytes(b"the previous build")
    before = _digests(dest)
    proc = subprocess.Popen(
        [sys.executable, "-m", "build_tools.build_python_packages", "--artifact-dir", str(tree),
         "--dest-dir", str(dest), "--version", VERSION],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        building = lambda: any(".staging-" in p.name for p in dest.iterdir())  # noqa: E731
        _wait_for(building, proc, "the temp build dir appeared")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert _digests(dest) == before
    left = sorted(str(p.relative_to(dest)) for p in dest.rglob("*"))
    assert sorted(p.name for p in dest.iterdir()) == ["dist"], (left, err)


def test_a_signal_stops_the_packages_being_written(tmp_path: Path) -> None:
    """Workers stop at their next chunk: the package being compressed is never finished (no
    "wrote" line for it), where the pool used to write every package already started to its
    end."""
    import threading

    tree = _slow_core_tree(tmp_path / "tree")
    dest = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "build_tools.build_python_packages", "--artifact-dir", str(tree),
         "--dest-dir", str(dest), "--version", VERSION, "-j", "2"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines: list[str] = []
    writing = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "wrote " in line:  # a small package is done; core's 96 MiB are being deflated
                writing.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        _wait_for(writing.is_set, proc, "a first package was written")
        seen = len(lines)
        assert "rocm_sdk_core" not in "".join(lines), "core was done before the signal"
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
        reader.join(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        reader.join(timeout=10)
        assert proc.stderr is not None
        proc.stderr.close()
    after = lines[seen:]
    assert proc.returncode == 130, "".join(lines)
    # core's 96 MiB were being deflated when the signal came: it is never finished (the old
    # pool wrote it to the end and printed its "wrote" line). Small packages may have
    # finished in the moment between the first "wrote" line and the signal.
    assert not [line for line in lines if "wrote rocm_sdk_core" in line], "".join(lines)
    assert "".join(after).strip().endswith("interrupted"), "".join(after)
    assert not dest.exists() or not any(dest.rglob("*.whl"))


def test_a_late_writer_never_makes_a_removed_staging_again(tmp_path: Path) -> None:
    """A package writer still running after its run's staging is gone fails to make its
    output directory instead of making the staging (and leaving it behind)."""
    from build_tools.build import _make_below

    root = tmp_path / "staging" / "out"
    root.mkdir(parents=True)
    _make_below(root, root / "dist" / "gfx110X-all")
    assert (root / "dist" / "gfx110X-all").is_dir()
    shutil.rmtree(tmp_path / "staging")
    with pytest.raises(FileNotFoundError):
        _make_below(root, root / "dist" / "gfx110X-all")
    assert list(tmp_path.iterdir()) == []
