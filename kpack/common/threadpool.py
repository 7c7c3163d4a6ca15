"""A thread pool whose threads are always joined, even when a signal lands mid-submit.

``ThreadPoolExecutor.submit`` starts a new worker thread when the pool has room for one,
and ``Thread.start`` waits for the thread to run. A signal handled in that wait (in the
main thread, where :mod:`kpack.common.boundary` turns it into an exception) unwinds the
caller with the thread started but not yet in the pool's table, so ``shutdown(wait=True)``
does not join it: the orphan takes the next queued job and keeps writing while the caller
removes its staging directory, leaving ``.staging-…/out/dist`` behind (seen under load in
``test_signal_while_writing_packages_keeps_dist``, about one run in seventy).
:class:`ThreadPool` holds SIGINT, SIGTERM and SIGHUP for the few microseconds of each
submit, so a signal acts just after it, with every thread accounted for. Threads it starts
inherit the held mask, so signals keep going to the main thread.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from kpack.common.staging import signals_held

__all__ = ["ThreadPool"]

P = ParamSpec("P")
T = TypeVar("T")


class ThreadPool(ThreadPoolExecutor):
    """``ThreadPoolExecutor`` whose ``submit`` (and so ``map``) cannot be cut in two by a
    signal (see the module doc)."""

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        with signals_held():
            return super().submit(fn, *args, **kwargs)
