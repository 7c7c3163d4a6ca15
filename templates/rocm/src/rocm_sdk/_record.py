"""Installed-distribution RECORD files: reading, appending rows, and locking.

Paths that rocm_sdk creates after installation are appended to the owning
distribution's RECORD as ``path,,`` rows (no hash, no size), so that
``pip uninstall`` removes them too. Only the path column is read here (the hashes
are the installer's business); a RECORD that is not UTF-8 CSV is one error naming it.
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

from ._errors import RocmSdkError


def _rows(data: bytes, record: Path) -> list[list[str]]:
    """The non-empty rows of a RECORD file's bytes; RocmSdkError naming it if unreadable."""
    try:
        text = data.decode("utf-8")
        return [row for row in csv.reader(io.StringIO(text, newline="")) if row and row[0]]
    except (UnicodeDecodeError, csv.Error) as exc:
        raise RocmSdkError(
            f"{record} is not a RECORD file ({exc}); reinstall the package it belongs to"
        ) from None


def read_record_paths(record: Path) -> list[str]:
    """The first column of every non-empty RECORD row, in file order."""
    return [row[0] for row in _rows(record.read_bytes(), record)]


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
    rows = _rows(record.read_bytes(), record)
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
    _write_new(tmp, out.getvalue())
    os.replace(tmp, record)
    return True


def _write_all(handle: BinaryIO, data: bytes) -> None:
    """Write all of ``data`` to an unbuffered handle (a raw write may be partial)."""
    view = memoryview(data)
    while view:
        written = handle.write(view)
        if not written:
            raise OSError("the write made no progress")
        view = view[written:]


def _write_new(path: Path, text: str) -> None:
    """Write ``text`` to the new file ``path``: a leftover of that name (a symlink even) is
    removed, never written through; on a failed write the file is removed again."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags | getattr(os, "O_BINARY", 0), 0o644)
    try:
        with open(fd, "wb", buffering=0) as out:
            _write_all(out, text.encode("utf-8"))
    except OSError as exc:
        os.unlink(path)
        if exc.filename is None:
            exc.filename = str(path)
        raise


class LockedRecord:
    """A RECORD file held under an exclusive lock; all I/O goes through its (unbuffered)
    handle, so a failed append can be undone exactly.

    POSIX record locks are released when the process closes *any* descriptor of
    the file, so the RECORD must not be reopened while the lock is held.
    """

    def __init__(self, handle: BinaryIO, path: Path) -> None:
        self._handle = handle
        self._path = path

    def paths(self) -> list[str]:
        self._handle.seek(0)
        return [row[0] for row in _rows(self._handle.read(), self._path)]

    def end(self) -> int:
        """The RECORD's size now: :meth:`truncate` takes it back there."""
        return self._handle.seek(0, os.SEEK_END)

    def truncate(self, end: int) -> None:
        """Drop every row appended since :meth:`end` returned ``end``."""
        self._handle.truncate(end)
        os.fsync(self._handle.fileno())

    def append(self, paths: Iterable[str]) -> list[str]:
        """Append a ``path,,`` row for each path not yet listed; return those added."""
        existing = set(self.paths())
        added = [p for p in dict.fromkeys(paths) if p not in existing]
        if not added:
            return []
        f = self._handle
        end = f.seek(0, os.SEEK_END)
        data = format_rows(added).encode("utf-8")
        if end > 0:
            f.seek(end - 1)
            if f.read(1) not in (b"\n", b"\r"):
                data = b"\n" + data
        try:
            f.seek(end)
            _write_all(f, data)
            os.fsync(f.fileno())
        except OSError as exc:  # a full disk: the RECORD is left as it was
            f.truncate(end)
            if exc.filename is None:
                exc.filename = str(self._path)
            raise
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
    with open(record, "r+b", buffering=0) as handle, _locked(handle):
        yield LockedRecord(handle, record)


@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the lock file ``path`` (created if missing)."""
    with open(path, "a+b") as handle, _locked(handle):
        yield
