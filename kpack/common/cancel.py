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

The main thread waits for its workers through :func:`result`, :func:`completed`, :func:`get`
and :func:`join_queue`, in slices of :data:`POLL` seconds. A signal may be delivered to any
thread of the process; Python then runs its handler in the main thread, but a main thread
blocked in a wait without a timeout wakes only when the wait ends: measured, a SIGTERM in a
build then took 0.8-0.9 s to act, the whole package being written. Waiting in slices, the
handler runs within one of them.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from concurrent import futures
from contextlib import contextmanager
from typing import TypeVar

__all__ = [
    "POLL",
    "Cancelled",
    "cancel",
    "cancelled",
    "check",
    "completed",
    "get",
    "join_queue",
    "result",
    "scope",
]

T = TypeVar("T")

#: How long one slice of a wait lasts (seconds): the longest a signal waits to be handled.
POLL = 0.01


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


def result(future: futures.Future[T]) -> T:
    """``future.result()``, waited for in slices (see the module doc)."""
    while True:
        try:
            return future.result(timeout=POLL)
        except futures.TimeoutError:
            continue


def completed(pending: Iterable[futures.Future[T]]) -> Iterator[futures.Future[T]]:
    """The futures of ``pending`` as they complete (``as_completed``), waited for in slices."""
    left = set(pending)
    while left:
        done, left = futures.wait(left, timeout=POLL, return_when=futures.FIRST_COMPLETED)
        yield from done


def get(source: queue.Queue[T]) -> T:
    """``source.get()``, waited for in slices."""
    while True:
        try:
            return source.get(timeout=POLL)
        except queue.Empty:
            continue


def join_queue(source: queue.Queue[T]) -> None:
    """``source.join()``, waited for in slices."""
    with source.all_tasks_done:
        while source.unfinished_tasks:
            source.all_tasks_done.wait(POLL)
