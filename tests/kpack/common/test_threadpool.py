"""A signal that lands while a pool starts a thread: ThreadPool still joins every thread.

The child process makes the race deterministic: ``Thread.start`` is wrapped so that, once
the new thread runs, the process sends itself SIGTERM and sleeps, so the handler (which
raises, as the command-line boundary's does) runs inside ``start``. The job the thread
takes sleeps for a while; after ``shutdown(wait=True)`` the child reports whether any
thread is still alive. ``ThreadPoolExecutor`` is the control: there the thread is started
but not yet in the pool's table, so it outlives the shutdown (the orphan writer that left
staging directories behind).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

CHILD = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    from concurrent.futures import ThreadPoolExecutor
    from kpack.common.threadpool import ThreadPool

    class Stop(Exception):
        pass

    def handler(signum, frame):
        raise Stop

    signal.signal(signal.SIGTERM, handler)
    start = threading.Thread.start

    def start_then_signal(self):
        start(self)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)  # a free signal is handled here, inside start()

    threading.Thread.start = start_then_signal
    cls = {"ThreadPool": ThreadPool, "ThreadPoolExecutor": ThreadPoolExecutor}[sys.argv[1]]
    pool = cls(max_workers=1)
    raised = False
    try:
        pool.submit(time.sleep, 1.0)
    except Stop:
        raised = True
    pool.shutdown(wait=True, cancel_futures=True)
    alive = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    print(raised, len(alive))
    """
)


def _run(pool: str) -> tuple[bool, int]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, pool],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()
    return out[0] == "True", int(out[1])


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_signal_during_thread_start_leaves_no_thread_running() -> None:
    raised, alive = _run("ThreadPool")
    assert raised  # the signal still acts, once the submit is done
    assert alive == 0


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_the_standard_pool_loses_the_thread_it_was_starting() -> None:
    """The control: without the hold, the signal's exception leaves the started thread out of
    the pool's table and running after shutdown(wait=True)."""
    raised, alive = _run("ThreadPoolExecutor")
    assert raised
    assert alive == 1
