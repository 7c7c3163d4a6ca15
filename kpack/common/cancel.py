"""Stopping work at once: one cancellation flag that every long loop checks.

A signal unwinds the main thread (:mod:`kpack.common.boundary`), but threads and worker
processes do not see it: a thread compressing a large wheel member, or a process
splitting a 1 GB library, would otherwise run to the end of its job while the main
thread waits for it to finish. So the boundary (and any writer that unwinds on a failure)
calls :func:`cancel`, and the loops that take time — each chunk of a member, each kernel
of a spool, each package of a build — call :func:`check`, which raises :class:`Cancelled`
once the flag is set. Progress lines ("wrote ...") are not printed after it
(:func:`cancelled`).

The flag belongs to the run: :func:`scope` starts each run with it clear, so a run that was
cancelled in a long-lived process (a test, a library caller) does not cancel the next.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Cancelled", "cancel", "cancelled", "check", "scope"]


class Cancelled(BaseException):
    """Raised in a worker once its run is cancelled; like ``KeyboardInterrupt`` it is not
    an ``Exception``, so no ``except Exception`` swallows it. The main thread is already
    unwinding with the reason (a signal or the first failure), so this never reaches a user."""


_flag = threading.Event()
_lock = threading.Lock()
_depth = 0


def cancel() -> None:
    """Stop the current run's workers at their next :func:`check`."""
    _flag.set()


def cancelled() -> bool:
    """Whether a run is going on and was cancelled (outside every :func:`scope`: never)."""
    return _depth > 0 and _flag.is_set()


def check() -> None:
    """Raise :class:`Cancelled` if the current run was cancelled."""
    if cancelled():
        raise Cancelled()


@contextmanager
def scope() -> Iterator[None]:
    """A run. The outermost scope starts with the flag clear; a failure or a signal that
    leaves any scope sets it. Work outside every scope (a library caller) is never
    cancelled: the scope's owner joins its workers before it leaves."""
    global _depth
    with _lock:
        if _depth == 0:
            _flag.clear()
        _depth += 1
    try:
        yield
    except BaseException:
        _flag.set()
        raise
    finally:
        with _lock:
            _depth -= 1
