"""The split's parallel runner (private to :mod:`kpack.split`): one job per fat binary, in
worker processes, largest first.

Every front-end's per-binary work runs here: the artifact splitter's and the wheel
splitter's transforms and spools, the package builder's planned transforms. The first
failure (or a signal, :mod:`kpack.common.cancel`) cancels the rest and ends the workers; a
worker that dies is one error naming the binary it was working on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import BrokenExecutor, Future
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from kpack.common import cancel
from kpack.common.workers import pool_min_bytes
from kpack.errors import TransformError

if TYPE_CHECKING:  # multiprocessing is imported when a pool starts: in-process runs skip it
    from concurrent.futures import ProcessPoolExecutor

__all__ = ["run_jobs"]


class Job(Protocol):
    @property
    def source(self) -> Path: ...
    @property
    def size(self) -> int: ...
    @property
    def kernel_name(self) -> str: ...


J = TypeVar("J", bound=Job)
R = TypeVar("R")


def run_jobs(
    jobs: Sequence[J], workers: int, *, work: Callable[[J], R], here: Callable[[J], R]
) -> list[R]:
    """``work(job)`` for every job in up to ``workers`` processes, largest job first; one
    worker (or one job) runs ``here(job)`` in-process instead. Results in the order run."""
    ordered = sorted(jobs, key=lambda j: (-j.size, j.kernel_name))
    small = sum(j.size for j in ordered) < pool_min_bytes()  # less work than the workers cost
    pool = None if small else _pool(workers, len(ordered), preload=work.__module__)
    if pool is None:
        return [here(job) for job in ordered]
    with pool:
        results = []
        try:  # a signal can arrive while a worker is being started: submitting is inside
            futures = {pool.submit(work, job): job for job in ordered}
            for future in cancel.completed(futures):
                results.append(_result(future, futures[future]))
        except BaseException:
            _stop(pool)
            raise
    return results


def _pool(jobs: int, count: int, preload: str = __name__) -> ProcessPoolExecutor | None:
    """Up to ``jobs`` workers for ``count`` jobs, or ``None`` for one of either. Workers
    are forked from a server that imported ``preload`` (the work's module) once, so a
    run's pools do not each import the engine again."""
    if jobs <= 1 or count <= 1:
        return None
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return ProcessPoolExecutor(max_workers=min(jobs, count))
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["__main__", preload])  # once the server runs: no effect
    return ProcessPoolExecutor(max_workers=min(jobs, count), mp_context=context)


def _stop(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and end the workers now: a worker in the middle of a
    large binary would otherwise finish it while the caller waits (a signal, a failure)."""
    import multiprocessing

    pool.shutdown(wait=False, cancel_futures=True)
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14
    if terminate is not None:
        terminate()
        return
    workers = {*(getattr(pool, "_processes", None) or {}).values()}
    # a worker a signal interrupted the start of is not in the pool's table yet, but is
    # among this process's children
    for process in {*workers, *multiprocessing.active_children()}:
        process.terminate()


def _result(future: Future[R], job: Job) -> R:
    """The result of ``job``; a worker that died (killed, out of memory) is one error
    naming the file it was working on, not a stray ``BrokenProcessPool``."""
    try:
        return future.result()
    except BrokenExecutor as exc:
        raise TransformError(
            f"the worker process splitting it died ({exc}); killed, or out of memory?",
            path=job.source,
        ) from None
