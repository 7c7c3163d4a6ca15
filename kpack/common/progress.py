"""What a tool tells a person or a CI log while it works (the CLI's concern only): the
builder (``build-python-packages``) and the wheel splitter (``kpack split-wheel``) alike.

- Not a terminal (a CI log): one line per phase — the builder's scan, split and plan (with
  the ELF edits planned), the splitter's read, split and write — and each package or wheel
  *as it completes* with its size and the time it took; each line flushed at once, with the
  elapsed time in front. A file over :data:`LARGE_FILE` gets a line when its compression
  starts, and another every :data:`LOG_EVERY` seconds.
- A terminal: a live display from ``rich`` (imported only then) — the phase, the elapsed
  time, a bar over every byte to write once that total is known, and the same per-package
  lines above it. A bar never shows more done than its total: bytes the total did not
  foresee (a wheel's METADATA and RECORD) grow it.
- ``-q``: nothing but errors (the CLI still prints its output path last).

Sizes are decimal (kB, MB, GB), as in the live display and the reports.

Library code reports through a :class:`Progress` it is handed; it never prints.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import IO, Protocol

from kpack.common.cli import format_size

__all__ = ["LARGE_FILE", "LineProgress", "Progress", "QuietProgress", "make_progress"]

#: Files at least this large get their own progress lines.
LARGE_FILE = 256 << 20
#: Seconds between two progress lines of one long file in a log.
LOG_EVERY = 10.0


class Progress(Protocol):
    def phase(self, message: str) -> None: ...
    def set_total(self, nbytes: int, what: str = "writing packages") -> None: ...
    def file_started(self, name: str, size: int) -> None: ...
    def advance(self, nbytes: int) -> None: ...
    def package_done(self, name: str, size: int, seconds: float) -> None: ...
    def close(self) -> None: ...


class QuietProgress:
    """``-q``: errors only."""

    def phase(self, message: str) -> None:
        pass

    def set_total(self, nbytes: int, what: str = "writing packages") -> None:
        pass

    def file_started(self, name: str, size: int) -> None:
        pass

    def advance(self, nbytes: int) -> None:
        pass

    def package_done(self, name: str, size: int, seconds: float) -> None:
        pass

    def close(self) -> None:
        pass


class LineProgress:
    """Plain, flushed lines for logs; safe to call from the writer threads."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._start = time.monotonic()
        self._lock = threading.Lock()
        self._large: tuple[str, int, int, float] | None = None  # name, size, done, last line

    def _line(self, message: str) -> None:
        with self._lock:
            elapsed = time.monotonic() - self._start
            self._stream.write(f"[{elapsed:7.1f}s] {message}\n")
            self._stream.flush()

    def phase(self, message: str) -> None:
        self._line(message)

    def set_total(self, nbytes: int, what: str = "writing packages") -> None:
        self._line(f"{what} from {format_size(nbytes)} of input")

    def file_started(self, name: str, size: int) -> None:
        if size >= LARGE_FILE:
            self._large = (name, size, 0, time.monotonic())
            self._line(f"  compressing {name} ({format_size(size)})")

    def advance(self, nbytes: int) -> None:
        large = self._large
        if large is None:
            return
        name, size, done, last = large
        done += nbytes
        now = time.monotonic()
        if done >= size:
            self._large = None
        elif now - last >= LOG_EVERY:
            self._large = (name, size, done, now)
            self._line(f"  compressing {name}: {done / size:.0%} of {format_size(size)}")
        else:
            self._large = (name, size, done, last)

    def package_done(self, name: str, size: int, seconds: float) -> None:
        self._line(f"wrote {name} ({format_size(size)}, {seconds:.1f} s)")

    def close(self) -> None:
        pass


class RichProgress:
    """A live display on a terminal (``rich``), with the package lines above it."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            TextColumn,
            TimeElapsedColumn,
            TransferSpeedColumn,
        )
        from rich.progress import Progress as Bar
        from rich.table import Column

        self._start = time.monotonic()
        self._bar = Bar(
            TextColumn(
                "{task.description}",
                table_column=Column(no_wrap=True, overflow="ellipsis", ratio=1),
            ),
            BarColumn(),
            DownloadColumn(binary_units=False),
            TransferSpeedColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self._task = self._bar.add_task("starting", total=None)
        self._lock = threading.Lock()
        self._total: int | None = None
        self._done = 0
        self._bar.start()

    def _print(self, message: str) -> None:
        self._bar.console.print(  # one line, cut to the terminal's width: never wrapped
            f"[{time.monotonic() - self._start:7.1f}s] {message}",
            markup=False,
            highlight=False,
            no_wrap=True,
            overflow="ellipsis",
            crop=True,
        )

    def phase(self, message: str) -> None:
        self._bar.update(self._task, description=message)
        self._print(message)

    def set_total(self, nbytes: int, what: str = "writing packages") -> None:
        with self._lock:
            self._total, self._done = nbytes, 0
            self._bar.update(self._task, total=nbytes, completed=0, description=what)
        self._bar.refresh()  # drawn now, however short the writing turns out

    def file_started(self, name: str, size: int) -> None:
        if size >= LARGE_FILE:
            self._bar.update(self._task, description=f"compressing {name}")

    def advance(self, nbytes: int) -> None:
        with self._lock:  # the writer threads of several packages advance it
            self._done += nbytes
            if self._total is not None and self._done > self._total:
                self._total = self._done  # bytes no total foresaw: the bar never overflows
                self._bar.update(self._task, total=self._total)
            self._bar.update(self._task, completed=self._done)

    def package_done(self, name: str, size: int, seconds: float) -> None:
        # the project, not the file name: the list at the end gives version and tag once,
        # and the line fits 80 columns whole instead of losing its size to the cut
        from kpack.common.dist_table import short_label

        self._print(f"wrote {short_label(name)} ({format_size(size)}, {seconds:.1f} s)")

    def close(self) -> None:
        self._bar.stop()


def make_progress(*, quiet: bool, stream: IO[str] | None = None) -> Progress:
    """Quiet, live (stderr is a terminal) or line-by-line (a log)."""
    stream = stream or sys.stderr
    if quiet:
        return QuietProgress()
    if stream.isatty():
        return RichProgress()
    return LineProgress(stream)
