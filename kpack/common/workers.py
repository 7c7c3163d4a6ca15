"""When workers pay: work below a size is done by the thread that has it.

A worker costs before it does anything. A thread has to be created and scheduled (about
0.1 ms on an idle machine, milliseconds on a busy one) and a pool's hand-offs wait on
locks; a worker process costs a fork server importing the engine. A small wheel's split
started nine threads (a deflate pool per wheel written, the frame compressors, the output
record's hashing) for a few milliseconds of work, and waited longer for them than the work
took. So each pool of a run starts only once its work passes a size, and below it the
caller does the work itself, with the same bytes out (every pool's output is independent
of its thread timing):

- :data:`THREAD_MIN_BYTES`: bytes a thread pool's work must reach (the deflate of a wheel's
  members, the frames of a fat binary's kernels, the hashing of a run's outputs);
- :data:`POOL_MIN_BYTES`: input bytes a run's jobs must reach to go to worker processes.

Both are measured: the threads by ``benchmarks/bench_worker_start.py`` (on this project's
2-core machine, shared with other jobs, two threads lost or broke even on every kind of
work below 4 MiB: 1.03-1.57x the time of one thread at 1 MiB, 1.12-2.21x at 256 KiB;
deflate won from 4 MiB, 0.83x), the processes by the 144 MB sample tree's build (2.5 s
with a pool, 2.0 s without). ``KPACK_THREAD_MIN_BYTES`` and
``KPACK_POOL_MIN_BYTES`` override them (tests set 0 to run small inputs through the workers).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

from kpack.errors import UsageError

__all__ = [
    "POOL_MIN_BYTES",
    "THREAD_MIN_BYTES",
    "done_future",
    "pool_min_bytes",
    "thread_min_bytes",
]

T = TypeVar("T")

#: Below this many bytes of work a thread pool is not started (``KPACK_THREAD_MIN_BYTES``).
THREAD_MIN_BYTES = 4 << 20
#: Below this many input bytes in all, jobs run in-process (``KPACK_POOL_MIN_BYTES``).
POOL_MIN_BYTES = 32 << 20


def thread_min_bytes() -> int:
    """``$KPACK_THREAD_MIN_BYTES``, else :data:`THREAD_MIN_BYTES`."""
    return _bytes_from_env("KPACK_THREAD_MIN_BYTES", THREAD_MIN_BYTES)


def pool_min_bytes() -> int:
    """``$KPACK_POOL_MIN_BYTES``, else :data:`POOL_MIN_BYTES`."""
    return _bytes_from_env("KPACK_POOL_MIN_BYTES", POOL_MIN_BYTES)


def done_future(fn: Callable[..., T], *args: object) -> Future[T]:
    """``fn(*args)`` run now, on this thread, as a completed future: what it returned or
    the error it raised, handed over as a pool's future would hand it. An interruption (a
    signal, a cancelled run: not an ``Exception``) is raised at once, as on this thread."""
    future: Future[T] = Future()
    try:
        future.set_result(fn(*args))
    except Exception as exc:  # handed to whoever asks for the result, as a pool does
        future.set_exception(exc)
    return future


def _bytes_from_env(name: str, default: int) -> int:
    """``$name`` as a number of bytes (anything else is a usage error naming it), else
    ``default``."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    if not value.isdigit() or len(value) >= 20:
        raise UsageError(f"{name}={value[:30]!r} is not a number of bytes")
    return int(value)
