"""The one error boundary of every command-line tool (``kpack``, the wheel splitter,
``build-python-packages``, ``assemble-shards``).

- A deliberate error (:class:`~kpack.errors.RocmPackagingError`) becomes one ``error: ...``
  line on stderr and exit status 1; a usage error (:class:`~kpack.errors.UsageError`: a bad
  flag value, a path on the command line that cannot be used, options that exclude each
  other, an argument argparse refuses) exits with status 2, as argparse, rocm-kpack and
  TheRock's ``rocm-sdk`` do.
- An ``OSError`` from the machine — a full disk, a quota, a read-only or missing
  destination, a file name too long for the file system — is not a bug either: one
  ``error: <file>: <reason>`` line, exit status 1.
- SIGINT, SIGTERM (what CI sends on cancel) and SIGHUP unwind the stack like
  ``KeyboardInterrupt``, so every ``finally`` and context manager removes its temporary
  directories and leaves the destination as it was; exit status 128 + the signal number.
  They also cancel the run (:mod:`kpack.common.cancel`): threads and worker processes
  stop at their next check instead of finishing their job.
- Anything else escaping is a bug and keeps its traceback.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import FrameType

from kpack.common import cancel
from kpack.errors import RocmPackagingError, UsageError

__all__ = ["EXIT_FAILURE", "EXIT_USAGE", "Interrupted", "guarded", "os_error_line"]

#: The exit status of a failed run: bad input data, a failed write, a failed check.
EXIT_FAILURE = 1
#: The exit status of a usage error (argparse's own).
EXIT_USAGE = 2

_SIGNALS = tuple(
    s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None
)


class Interrupted(KeyboardInterrupt):
    """Raised in the main thread when SIGTERM or SIGHUP arrives; unwinds like Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_received: list[int] = []  # the signal that started the unwinding, for a Cancelled that escapes


def _raise(signum: int, frame: FrameType | None) -> None:
    # Later signals while we clean up are ignored: the first one already unwinds.
    for sig in _SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    _received.append(signum)
    cancel.cancel()  # threads and worker processes stop at their next check
    raise Interrupted(signum)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    cancel.cancel()
    raise KeyboardInterrupt


@contextmanager
def _signals_unwind() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in (*_SIGNALS, signal.SIGINT)}
    for sig in _SIGNALS:
        signal.signal(sig, _raise)
    if previous[signal.SIGINT] is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupt)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def os_error_line(exc: OSError) -> str:
    """``<file>: <reason>`` (both files for a rename), without Python's ``[Errno N]``."""
    reason = exc.strerror or str(exc)
    names = [n for n in (exc.filename, exc.filename2) if n is not None]
    where = " -> ".join(os.fsdecode(n) if isinstance(n, bytes) else str(n) for n in names)
    return f"{where}: {reason}" if where else reason


def _interrupted(signum: int) -> int:
    if signum == signal.SIGINT:
        print("interrupted", file=sys.stderr)
        return 130
    name = signal.Signals(signum).name
    print(f"interrupted by {name}; temporary files removed", file=sys.stderr)
    return 128 + signum


def guarded(
    run: Callable[[Sequence[str] | None], int],
    argv: Sequence[str] | None,
    *,
    one_line: bool = False,
) -> int:
    """Run a CLI's ``run(argv)`` inside the boundary; returns the exit status.

    ``one_line`` folds a multi-problem error into one line (``; ``-separated), for tools
    whose output is parsed line by line.
    """
    _received.clear()
    try:
        with cancel.scope(), _signals_unwind():
            return run(argv)
    except RocmPackagingError as exc:
        text = str(exc).replace("\n  - ", "; ") if one_line else str(exc)
        print(f"error: {text}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, UsageError) else EXIT_FAILURE
    except OSError as exc:
        print(f"error: {os_error_line(exc)}", file=sys.stderr)
        return EXIT_FAILURE
    except Interrupted as exc:
        return _interrupted(exc.signum)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except cancel.Cancelled:  # a worker's cancellation that reached here first: the signal's
        return _interrupted(_received[-1] if _received else signal.SIGINT)
