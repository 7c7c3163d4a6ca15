"""Deflated chunks kept by content, so that content repeated across the archives of one run
is compressed once.

A legacy multi-family build writes one devel wheel per family, each holding a devel tarball
of tens of MB that differs from the others only in a few symbolic links at its end; the
writer streams such a member (:attr:`~kpack.wheelfile._member.Member.shared`) in fixed
chunks, and a chunk whose bytes were deflated before is taken from here instead.

A chunk's deflated bytes depend only on its bytes, the level and whether it ends the
stream (libdeflate, joined chunks: :mod:`kpack.wheelfile._join`), so a hit gives exactly
the bytes a new compression would. Entries are found by the SHA-256 of the chunk. Two
threads asking for the same chunk at once compress it once: the second waits for the
first. The memo holds at most ``max_bytes`` of deflated output; past that the entries
used least recently are dropped (a later repeat is compressed again, nothing else).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable

from kpack.common import cancel

__all__ = ["DEFAULT_MEMO_BYTES", "DeflateMemo"]

#: Deflated bytes a memo keeps by default: a devel tarball's (about 11 MB at level 6)
#: several times over.
DEFAULT_MEMO_BYTES = 96 << 20


class _Entry:
    __slots__ = ("done", "result")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: bytes | None = None  # None once done: the compression failed


class DeflateMemo:
    """Deflated chunks by content (see the module doc); safe to share between threads."""

    def __init__(self, max_bytes: int = DEFAULT_MEMO_BYTES) -> None:
        self._max_bytes = max_bytes
        self._lock = threading.Lock()
        self._entries: OrderedDict[bytes, _Entry] = OrderedDict()
        self._held = 0
        self.hits = 0
        self.misses = 0

    def deflate(
        self, data: bytes | bytearray, *, level: int, final: bool, compress: Callable[[], bytes]
    ) -> bytes:
        """``compress()``'s result for ``data``, from the memo when these bytes were deflated
        before at ``level`` with the same ``final``."""
        key = hashlib.sha256(data).digest() + bytes((level, final))
        with self._lock:
            entry = self._entries.get(key)
            owner = entry is None
            if entry is None:
                entry = self._entries[key] = _Entry()
            else:
                self._entries.move_to_end(key)
        if not owner:
            entry.done.wait()
            cancel.check()
            if entry.result is not None:
                with self._lock:
                    self.hits += 1
                return entry.result
            return compress()  # the first attempt failed: its error was raised there
        try:
            result = compress()
        except BaseException:
            with self._lock:
                self._entries.pop(key, None)
            entry.done.set()
            raise
        entry.result = result
        entry.done.set()
        with self._lock:
            self.misses += 1
            self._held += len(result)
            self._evict()
        return result

    def _evict(self) -> None:
        """Drop the finished entries used least recently until the memo fits its bound."""
        while self._held > self._max_bytes:
            for key, entry in self._entries.items():
                if entry.result is not None:
                    del self._entries[key]
                    self._held -= len(entry.result)
                    break
            else:  # pragma: no cover - only unfinished entries: nothing to drop
                return
