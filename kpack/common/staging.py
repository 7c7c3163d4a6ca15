"""Marked staging directories inside an output directory, and the debris of killed runs.

Every tool builds its outputs in a staging directory inside the destination (one file
system, so publishing is a rename), named ``.<tool>.staging-<pid>-<random>`` and holding a
marker file that names the tool. While a run lives it holds an exclusive lock on that marker
(``flock`` on POSIX, ``msvcrt.locking`` on Windows). A run killed with ``kill -9`` cannot
remove its staging; the next run of the same tool into the same destination finds it by
name *and* marker, takes the lock (proof that its owner is gone), removes it and prints one
notice. Nothing else is ever recognised as debris: a directory with another name, a marker
naming another tool, a symlink, or a staging whose lock is held (a run still working) stays.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import stat
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from kpack.common.tempdirs import make_temp_dir, temp_dir_name
from kpack.errors import PackagingError

__all__ = ["MARKER", "Staging", "refuse_symlinked", "remove_debris", "signals_held", "staging"]

log = logging.getLogger(__name__)

MARKER = ".rocm-packaging-staging"
_MARKER_MAX = 4096
#: passes at removing a staging's contents before its marker is left for the next run
_REMOVE_TRIES = 3


def _slug(tool: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in tool)


def _prefix(tool: str) -> str:
    return f".{_slug(tool)}.staging-"


def _marker_text(tool: str) -> bytes:
    return f"rocm-packaging staging of {tool}\n".encode()


def _lock(fd: int) -> bool:
    """Take the marker's exclusive lock without waiting; False while another holds it."""
    try:
        if sys.platform == "win32":
            import msvcrt

            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        else:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


@contextmanager
def signals_held() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP wait until the block is done (then act as usual): for a
    step that must not be cut in two, such as making a staging directory and taking note of
    it, or a rollback. POSIX main thread only; elsewhere the block runs as is."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(
        signal, "pthread_sigmask"
    ):
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@dataclass
class Staging:
    """A staging directory of ``tool`` in ``dest``; the marker's descriptor holds its lock."""

    path: Path
    fd: int

    @classmethod
    def make(cls, dest: Path, tool: str, *, purpose: str = "") -> Staging:
        path = temp_dir_name(dest, _prefix(tool), f"-{purpose}" if purpose else "")
        try:
            make_temp_dir(path)
            flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
            fd = os.open(path / MARKER, flags, 0o600)
        except BaseException:
            shutil.rmtree(path, ignore_errors=True)
            raise
        try:
            os.write(fd, _marker_text(tool))
            _lock(fd)
        except BaseException:
            os.close(fd)
            shutil.rmtree(path, ignore_errors=True)
            raise
        return cls(path, fd)

    def remove(self) -> None:
        """Remove the directory; the marker goes last, so its lock guards the removal. When
        something cannot be removed (a file made while the removal ran), the marker stays:
        the next run of the tool removes the rest as a dead staging."""
        cleared = any(not self._remove_entries() for _ in range(_REMOVE_TRIES))
        with suppress(OSError):
            os.close(self.fd)
        if cleared:
            with suppress(OSError):
                os.unlink(self.path / MARKER)
            with suppress(OSError):
                os.rmdir(self.path)

    def _remove_entries(self) -> list[str]:
        """Remove everything but the marker; returns what is left besides it."""
        try:
            entries = [e for e in os.listdir(self.path) if e != MARKER]
        except OSError:
            return []
        for entry in entries:
            target = self.path / entry
            if os.path.isdir(target) and not os.path.islink(target):
                shutil.rmtree(target, ignore_errors=True)
            else:
                with suppress(OSError):
                    os.unlink(target)
        try:
            return [e for e in os.listdir(self.path) if e != MARKER]
        except OSError:
            return []


def _dead_staging(path: Path, tool: str) -> int | None:
    """The locked marker's descriptor when ``path`` is a staging of ``tool`` whose run is
    gone; None for anything else."""
    try:
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode):
            return None
        fd = os.open(path / MARKER, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError("not a regular file")
        if os.read(fd, _MARKER_MAX) != _marker_text(tool) or not _lock(fd):
            raise OSError("not a dead staging of this tool")
    except OSError:
        os.close(fd)
        return None
    return fd


def remove_debris(dest: Path, tool: str) -> list[Path]:
    """Remove the stagings of ``tool`` in ``dest`` that killed runs left; returns them."""
    try:
        names = sorted(n for n in os.listdir(dest) if n.startswith(_prefix(tool)))
    except OSError:
        return []
    removed = []
    for name in names:
        fd = _dead_staging(dest / name, tool)
        if fd is not None:
            Staging(dest / name, fd).remove()
            removed.append(dest / name)
    if removed:
        log.warning(
            "%s: removed %d staging director%s left by an interrupted run of %s",
            dest,
            len(removed),
            "y" if len(removed) == 1 else "ies",
            tool,
        )
    return removed


def refuse_symlinked(dest: Path) -> None:
    """An output directory that is a symlink (or reparse point) is refused: a planted link
    would send every output, the record and the staging elsewhere."""
    try:
        st = os.lstat(dest)
    except (FileNotFoundError, NotADirectoryError):
        return
    if stat.S_ISLNK(st.st_mode) or getattr(st, "st_file_attributes", 0) & getattr(
        stat, "FILE_ATTRIBUTE_REPARSE_POINT", 0
    ):
        raise PackagingError("output directory is a symlink; give the real directory", path=dest)


@contextmanager
def staging(dest: Path, tool: str) -> Iterator[Path]:
    """A fresh staging directory of ``tool`` inside ``dest`` (made, with its parents, when
    missing; those made go again when the block fails and they are empty). Debris of
    ``tool``'s killed runs in ``dest`` is removed first. Yields the directory to build the
    outputs in (a subdirectory, so the marker is never among them)."""
    dest = Path(os.path.abspath(dest))
    refuse_symlinked(dest)
    made = [d for d in (dest, *dest.parents) if not os.path.lexists(d)]
    stage: Staging | None = None
    try:
        try:
            dest.mkdir(parents=True, exist_ok=True)
            remove_debris(dest, tool)
            with signals_held():  # a signal between making it and noting it would leak it
                stage = Staging.make(dest, tool)
            work = stage.path / "out"
            work.mkdir()
        except OSError as exc:
            raise PackagingError(
                f"output directory is not writable: {exc.strerror}", path=dest
            ) from exc
        yield work
    except BaseException:
        if stage is not None:
            stage.remove()
        for directory in made:  # innermost first
            with suppress(OSError):
                directory.rmdir()
        raise
    with signals_held():  # the work is done: a signal now must not cut the removal short
        stage.remove()
