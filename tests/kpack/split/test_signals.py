"""A signal while a split (of jax-rocm7-pjrt: one fat library, CCOB bundles, split in
process) compresses frames on worker threads: one line, the signal's exit
status, nothing left behind, no worker left running. (The workers see the cancellation
too; their own ``Cancelled`` must not replace the signal's unwinding.)"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pytest

from kpack import cli
from kpack.common import boundary
from kpack.split._frames import FrameWorkers
from tests.progress_lines import without_progress
from tests.pypi_inputs import JAX_PJRT, pypi_wheel

pytestmark = pytest.mark.real


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_frames_are_compressed(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    signum: int,
) -> None:
    wheel = pypi_wheel(JAX_PJRT)
    out = tmp_path / "out"
    out.mkdir()
    (out / "kept.txt").write_text("an earlier output")
    calls = 0
    put = FrameWorkers._put

    def put_then_signal(self: FrameWorkers, q: object, item: object) -> None:
        nonlocal calls
        calls += 1
        if calls == 40:  # as the signal handler does, in the main thread, mid-decode
            handler = boundary._raise if signum == signal.SIGTERM else boundary._interrupt
            handler(signum, None)
        put(self, q, item)  # type: ignore[arg-type]

    monkeypatch.setattr(FrameWorkers, "_put", put_then_signal)
    argv = ["split-wheel", "-j", "2", "--input", str(wheel), "--output-dir", str(out)]
    argv += ["--overlay-root", JAX_PJRT.overlay_root, "--device-package-prefix", "amd-device"]
    status = cli.main(argv)
    err = without_progress(capsys.readouterr().err)
    assert calls >= 40, "the split never compressed frames on workers"
    if signum == signal.SIGTERM:
        assert (status, err) == (143, ["interrupted by SIGTERM; temporary files removed"])
    else:
        assert (status, err) == (130, ["interrupted"])
    assert sorted(p.name for p in out.iterdir()) == ["kept.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert not [t for t in threading.enumerate() if t.name.startswith("kpack-frames")]
