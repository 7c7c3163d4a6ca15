"""A planned edit of one file: byte patches inside the original plus appended bytes.

The result is never materialised in memory. It is streamed from the source (read once,
in chunks) or viewed through a read-only seekable stream for verification.
"""

from __future__ import annotations

import bisect
import io
import os
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from kpack.errors import ElfError

__all__ = ["ElfEdit"]


@dataclass(frozen=True)
class ElfEdit:
    """The result is ``source`` with ``patches`` applied, then ``appended`` at the end."""

    source: Path
    original_size: int
    patches: tuple[tuple[int, bytes], ...]
    appended: bytes

    def __post_init__(self) -> None:
        end = 0
        for offset, data in self.patches:
            if offset < end or offset + len(data) > self.original_size or not data:
                raise ElfError(
                    f"invalid edit plan: patch at {offset:#x} (+{len(data):#x}) overlaps, "
                    f"is empty or lies beyond the original size {self.original_size:#x}",
                    path=self.source,
                )
            end = offset + len(data)

    @property
    def size(self) -> int:
        return self.original_size + len(self.appended)

    @property
    def is_identity(self) -> bool:
        return not self.patches and not self.appended

    def iter_chunks(self, chunk_size: int = 1 << 20) -> Iterator[bytes]:
        """Yield the result in order, reading the source once."""
        with self._open_source() as src:
            pos = 0
            while pos < self.size:
                data = self._read(src, pos, min(chunk_size, self.size - pos))
                pos += len(data)
                yield data

    def open(self) -> BinaryIO:
        """A read-only, seekable view of the result (close it when done)."""
        return io.BufferedReader(_EditView(self, self._open_source()))

    def write_to(self, dest: Path) -> None:
        """Write the result to ``dest`` atomically (temporary sibling, then rename).

        ``dest`` must not be the source file. The source's permission bits are kept.
        An existing ``dest`` is replaced, never written through (hardlinks break).
        """
        dest = Path(dest)
        if dest.exists() and os.path.samefile(dest, self.source):
            raise ElfError("refusing to write an edit over its own source", path=dest)
        mode = stat.S_IMODE(os.stat(self.source).st_mode)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as out:
                for chunk in self.iter_chunks():
                    out.write(chunk)
            os.chmod(tmp, mode)
            os.replace(tmp, dest)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    def read_at(self, src: BinaryIO, offset: int, size: int) -> bytes:
        """Bytes ``[offset, offset + size)`` of the result, given an open source stream."""
        return self._read(src, offset, size)

    def _open_source(self) -> BinaryIO:
        try:
            src = open(self.source, "rb")  # noqa: SIM115 - returned to the caller
        except OSError as exc:
            raise ElfError(f"cannot open: {exc.strerror}", path=self.source) from exc
        actual = os.fstat(src.fileno()).st_size
        if actual != self.original_size:
            src.close()
            raise ElfError(
                f"file changed since the edit was planned ({actual} != {self.original_size} bytes)",
                path=self.source,
            )
        return src

    def _read(self, src: BinaryIO, offset: int, size: int) -> bytes:
        offset = max(0, offset)
        end = min(self.size, offset + max(0, size))
        if offset >= end:
            return b""
        out = bytearray()
        if offset < self.original_size:
            stop = min(end, self.original_size)
            src.seek(offset)
            out += src.read(stop - offset)
            if len(out) != stop - offset:
                raise ElfError(f"short read at {offset:#x}", path=self.source)
            self._overlay(out, offset, stop)
        if end > self.original_size:
            start = max(offset, self.original_size) - self.original_size
            out += self.appended[start : end - self.original_size]
        return bytes(out)

    def _overlay(self, buf: bytearray, start: int, stop: int) -> None:
        index = bisect.bisect_right([p[0] for p in self.patches], start) - 1
        for patch_offset, data in self.patches[max(index, 0) :]:
            if patch_offset >= stop:
                break
            lo = max(start, patch_offset)
            hi = min(stop, patch_offset + len(data))
            if lo < hi:
                buf[lo - start : hi - start] = data[lo - patch_offset : hi - patch_offset]


class _EditView(io.RawIOBase):
    """Raw stream over an :class:`ElfEdit`; owns the source stream."""

    def __init__(self, edit: ElfEdit, src: BinaryIO) -> None:
        super().__init__()
        self._edit = edit
        self._src = src
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos, os.SEEK_END: self._edit.size}[whence]
        if base + offset < 0:
            raise OSError(22, "negative seek position")
        self._pos = base + offset
        return self._pos

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        data = self._edit.read_at(self._src, self._pos, len(buffer))
        buffer[: len(data)] = data
        self._pos += len(data)
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._src.close()
        super().close()
