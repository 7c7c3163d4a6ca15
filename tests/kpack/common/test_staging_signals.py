"""A signal landing just after a staging directory is made leaves nothing behind.

The window is the one between ``Staging.make`` returning and its caller taking note of the
directory (to remove it when the run unwinds). Each case runs in a child process whose
``Staging.make`` sends the process SIGTERM right after making the directory, so the signal
arrives in exactly that window; the handler unwinds the way the tools' boundary does (an
exception). The directory must be gone after the unwinding, and an output directory must
hold what it held before.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

_PRELUDE = """
import os, signal, sys
from pathlib import Path
from kpack.common import staging as st

def unwind(signum, frame):
    raise KeyboardInterrupt

signal.signal(signal.SIGTERM, unwind)
made = []
original = st.Staging.make.__func__

def make_then_signal(cls, *args, **kwargs):
    stage = original(cls, *args, **kwargs)
    made.append(stage.path)
    os.kill(os.getpid(), signal.SIGTERM)  # lands before the caller sees the directory
    return stage

st.Staging.make = classmethod(make_then_signal)
dest = Path(sys.argv[1])
"""


def _run(tmp_path: Path, body: str) -> list[str]:
    script = _PRELUDE + textwrap.dedent(body)
    proc = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "out")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def _tree(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def test_staging_made_then_signalled_is_removed(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "kept.txt").write_bytes(b"an earlier output")
    before = _tree(tmp_path / "out")
    seen = _run(
        tmp_path,
        """
        try:
            with st.staging(dest, "signal-test") as work:
                print("entered")  # never: the signal unwinds first
        except KeyboardInterrupt:
            print("unwound")
        print(*made)
        """,
    )
    assert seen[0] == "unwound", seen
    assert len(seen) == 2 and Path(seen[1]).parent == tmp_path / "out", seen
    assert not Path(seen[1]).exists(), "the staging directory outlived the signal"
    assert _tree(tmp_path / "out") == before


def test_publish_trash_made_then_signalled_is_removed(tmp_path: Path) -> None:
    """publish_all's directory for replaced files, signalled as it is made: the earlier
    output stays as it was and no directory is left."""
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "a.txt").write_bytes(b"the earlier a")
    staged = tmp_path / "staged"
    staged.mkdir()
    (staged / "a.txt").write_bytes(b"the new a")
    before = _tree(tmp_path / "out")
    seen = _run(
        tmp_path,
        f"""
        from kpack.common.outputs import Publication, publish_all
        pub = Publication(dest=dest, staged=Path({str(staged)!r}), outputs=("a.txt",),
                          record=None)
        try:
            publish_all([pub], tool="signal-test", force=True, owns="recorded")
            print("published")
        except KeyboardInterrupt:
            print("unwound")
        print(*made)
        """,
    )
    assert seen[0] == "unwound", seen
    assert len(seen) == 2 and not Path(seen[1]).exists(), seen
    assert _tree(tmp_path / "out") == before
