"""Installed-distribution RECORD files: reading, appending rows, and locking.

Paths that rocm_sdk creates after installation are appended to the owning
distribution's RECORD as ``path,,`` rows (no hash, no size), so that
``pip uninstall`` removes them too.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO


def read_record_paths(record: Path) -> list[str]:
    """The first column of every non-empty RECORD row, in file order."""
    with open(record, encoding="utf-8", newline="") as f:
        return [row[0] for row in csv.reader(f) if row and row[0]]


def format_rows(paths: Iterable[str]) -> str:
    """``path,,`` rows, quoted as the csv module does for RECORD."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for path in paths:
        writer.writerow([path, "", ""])
    return out.getvalue()


def rewrite_record_deduplicated(record: Path, extra_paths: Iterable[str]) -> bool:
    """Drop duplicate rows and add missing ``path,,`` rows; True if changed.

    The file is replaced atomically, so this must not be used on a RECORD that
    serves as a lock file.
    """
    with open(record, encoding="utf-8", newline="") as f:
        rows = [row for row in csv.reader(f) if row and row[0]]
    seen: set[str] = set()
    kept: list[list[str]] = []
    for row in rows:
        if row[0] not in seen:
            seen.add(row[0])
            kept.append(row)
    missing = [p for p in dict.fromkeys(extra_paths) if p not in seen]
    if not missing and len(kept) == len(rows):
        return False
    kept.extend([p, "", ""] for p in missing)
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(kept)
    tmp = record.with_name(f"{record.name}.{os.getpid()}.tmp")
    tmp.write_text(out.getvalue(), encoding="utf-8", newline="")
    os.replace(tmp, record)
    return True


class LockedRecord:
    """A RECORD file held under an exclusive lock; all I/O goes through its handle.

    POSIX record locks are released when the process closes *any* descriptor of
    the file, so the RECORD must not be reopened while the lock is held.
    """

    def __init__(self, handle: BinaryIO) -> None:
        self._handle = handle

    def paths(self) -> list[str]:
        self._handle.seek(0)
        text = self._handle.read().decode("utf-8")
        return [row[0] for row in csv.reader(text.splitlines()) if row and row[0]]

    def append(self, paths: Iterable[str]) -> list[str]:
        """Append a ``path,,`` row for each path not yet listed; return those added."""
        existing = set(self.paths())
        added = [p for p in dict.fromkeys(paths) if p not in existing]
        if not added:
            return []
        f = self._handle
        f.seek(0, os.SEEK_END)
        if f.tell() > 0:
            f.seek(-1, os.SEEK_END)
            if f.read(1) not in (b"\n", b"\r"):
                f.seek(0, os.SEEK_END)
                f.write(b"\n")
        f.seek(0, os.SEEK_END)
        f.write(format_rows(added).encode("utf-8"))
        f.flush()
        os.fsync(f.fileno())
        return added


@contextlib.contextmanager
def _locked(handle: BinaryIO) -> Iterator[None]:
    """An exclusive lock on an open file: ``fcntl.lockf``, or ``msvcrt`` on Windows."""
    if sys.platform == "win32":
        import msvcrt

        handle.seek(0)
        while True:
            try:
                msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)
                break
            except OSError:  # LK_LOCK gives up after 10 s; keep waiting
                continue
        try:
            yield
        finally:
            handle.seek(0)
            msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
    else:
        import fcntl

        fcntl.lockf(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.lockf(handle.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def locked_record(record: Path) -> Iterator[LockedRecord]:
    """Open ``record`` for update under an exclusive lock."""
    with open(record, "r+b") as handle, _locked(handle):
        yield LockedRecord(handle)


@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the lock file ``path`` (created if missing)."""
    with open(path, "a+b") as handle, _locked(handle):
        yield
