"""A planned edit of one file: byte patches, an optional removed range, appended bytes.

The result is never materialised in memory. It is streamed from the source (read once,
in chunks) or viewed through a read-only seekable stream for verification.

Result layout, in order: the source with ``patches`` applied (offsets in source
coordinates) and the ``removed`` byte range left out, then ``zero_fill`` zero bytes
(written as a hole where the file system allows), then ``appended``.

The source is a file or another edit: edits compose (an RPATH edit planned on the
result of a device-code transform), and the composed result still streams from the one
file underneath, read once.
"""

from __future__ import annotations

import bisect
import io
import os
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import KW_ONLY
from functools import cached_property
from pathlib import Path
from typing import BinaryIO, NamedTuple

from kpack.common.frozen import frozen
from kpack.common.outfile import output_file
from kpack.errors import ElfError

__all__ = ["ElfEdit", "ElfSource", "root_path"]

#: Zero runs at least this long are written as holes (seek) instead of bytes.
_HOLE_MIN = 64 << 10


class _Region(NamedTuple):
    """A run of the result: ``[start, end)`` comes from ``origin``."""

    start: int
    end: int
    origin: int | None  # source offset of ``start``; None: zeros; -1: ``appended``


@frozen
class ElfEdit:
    """The result of ``source`` with ``patches``, minus ``removed``, plus zeros and ``appended``."""

    source: ElfSource
    original_size: int
    patches: tuple[tuple[int, bytes], ...]
    appended: bytes
    _: KW_ONLY
    removed: tuple[int, int] | None = None  # source byte range [start, end) left out
    zero_fill: int = 0  # zero bytes between the kept source bytes and ``appended``

    def __post_init__(self) -> None:
        end = 0
        for offset, data in self.patches:
            if offset < end or offset + len(data) > self.original_size or not data:
                raise ElfError(
                    f"invalid edit plan: patch at {offset:#x} (+{len(data):#x}) overlaps, "
                    f"is empty or lies beyond the original size {self.original_size:#x}",
                    path=self.path,
                )
            end = offset + len(data)
        if self.zero_fill < 0:
            raise ElfError(f"invalid edit plan: zero_fill {self.zero_fill}", path=self.path)
        if self.removed is not None:
            lo, hi = self.removed
            if not 0 <= lo < hi <= self.original_size:
                raise ElfError(
                    f"invalid edit plan: removed range {lo:#x}..{hi:#x} is empty or lies "
                    f"beyond the original size {self.original_size:#x}",
                    path=self.path,
                )
            for offset, data in self.patches:
                if offset < hi and lo < offset + len(data):
                    raise ElfError(
                        f"invalid edit plan: patch at {offset:#x} (+{len(data):#x}) lies in "
                        f"the removed range {lo:#x}..{hi:#x}",
                        path=self.path,
                    )

    @property
    def removed_size(self) -> int:
        return 0 if self.removed is None else self.removed[1] - self.removed[0]

    @property
    def size(self) -> int:
        return self.original_size - self.removed_size + self.zero_fill + len(self.appended)

    @property
    def is_identity(self) -> bool:
        return (
            not self.patches and not self.appended and self.removed is None and not self.zero_fill
        )

    def result_offset(self, offset: int) -> int:
        """Where source byte ``offset`` ends up in the result (it must not be removed)."""
        if self.removed is None or offset < self.removed[0]:
            return offset
        if offset < self.removed[1]:
            raise ElfError(f"source offset {offset:#x} lies in the removed range", path=self.path)
        return offset - self.removed_size

    @property
    def path(self) -> Path:
        """The file underneath (through any edits this one is planned on)."""
        return root_path(self.source)

    def kept_runs(self) -> tuple[tuple[int, int, int], ...]:
        """Where the result holds the file underneath unchanged: ``(result offset, file
        offset, length)`` runs, in order, through any edits this one is planned on (patched
        bytes, zeros and appended bytes are not in any run)."""
        inner = (
            self.source.kept_runs()
            if isinstance(self.source, ElfEdit)
            else ((0, 0, self.original_size),)
        )
        runs: list[tuple[int, int, int]] = []
        for at, origin, length in self._own_runs():
            # ``origin`` is in source coordinates: map it through the inner runs
            index = max(bisect.bisect_right([r[0] for r in inner], origin) - 1, 0)
            for start, base, size in inner[index:]:
                lo, hi = max(origin, start), min(origin + length, start + size)
                if start >= origin + length:
                    break
                if lo < hi:
                    runs.append((at + lo - origin, base + lo - start, hi - lo))
        return tuple(runs)

    def _own_runs(self) -> Iterator[tuple[int, int, int]]:
        """``(result offset, source offset, length)`` of the source bytes this edit keeps
        unpatched."""
        for region in self._regions:
            if region.origin is None or region.origin < 0:
                continue
            pos, end = region.origin, region.origin + region.end - region.start
            shift = region.start - region.origin
            index = max(bisect.bisect_right(self._patch_offsets, pos) - 1, 0)
            for offset, data in self.patches[index:]:
                if offset >= end:
                    break
                if offset > pos:
                    yield pos + shift, pos, offset - pos
                pos = max(pos, offset + len(data))
            if pos < end:
                yield pos + shift, pos, end - pos

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

    def write_to(self, dest: Path, *, replace_source: bool = False) -> None:
        """Write the result to ``dest`` atomically (temporary sibling, then rename).

        ``dest`` must not be the source file (or a hard link to it) unless
        ``replace_source``: the new file then takes its name and other links keep the old
        content. The source's permission bits are kept. An existing ``dest`` is replaced,
        never written through. Long zero runs become holes in the file.
        """
        dest = Path(dest)
        if not replace_source and dest.exists() and os.path.samefile(dest, self.path):
            raise ElfError("refusing to write an edit over its own source", path=dest)
        mode = stat.S_IMODE(os.stat(self.path).st_mode)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
        tmp = Path(tmp_name)
        try:
            # a failed write names dest (the full disk is the output's, not the input's)
            with output_file(fd, dest) as out, self._open_source() as src:
                for region in self._regions:
                    self._write_region(src, out, region)
                out.truncate(self.size)
            os.chmod(tmp, mode)
            os.replace(tmp, dest)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    def read_at(self, src: BinaryIO, offset: int, size: int) -> bytes:
        """Bytes ``[offset, offset + size)`` of the result, given an open source stream."""
        return self._read(src, offset, size)

    @cached_property
    def _regions(self) -> tuple[_Region, ...]:
        lo, hi = self.removed if self.removed is not None else (self.original_size,) * 2
        kept = self.original_size - (hi - lo)
        regions = [
            _Region(0, lo, 0),
            _Region(lo, kept, hi),
            _Region(kept, kept + self.zero_fill, None),
            _Region(kept + self.zero_fill, self.size, -1),
        ]
        return tuple(r for r in regions if r.end > r.start)

    @cached_property
    def _patch_offsets(self) -> list[int]:
        return [offset for offset, _ in self.patches]

    def _write_region(self, src: BinaryIO, out: BinaryIO, region: _Region) -> None:
        size = region.end - region.start
        if region.origin is None and size >= _HOLE_MIN:
            out.seek(size, os.SEEK_CUR)
            return
        pos = region.start
        while pos < region.end:
            data = self._read(src, pos, min(1 << 20, region.end - pos))
            out.write(data)
            pos += len(data)

    def _open_source(self) -> BinaryIO:
        if isinstance(self.source, ElfEdit):
            if self.source.size != self.original_size:
                raise ElfError(
                    f"edit planned on {self.original_size} bytes, its source edit gives "
                    f"{self.source.size}",
                    path=self.path,
                )
            return self.source.open()
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
        regions = self._regions
        index = bisect.bisect_right([r.start for r in regions], offset) - 1
        for region in regions[max(index, 0) :]:
            if region.start >= end:
                break
            lo, hi = max(offset, region.start), min(end, region.end)
            if region.origin is None:
                out += bytes(hi - lo)
            elif region.origin < 0:
                base = region.start
                out += self.appended[lo - base : hi - base]
            else:
                out += self._read_source(src, region.origin + lo - region.start, hi - lo)
        return bytes(out)

    def _read_source(self, src: BinaryIO, start: int, size: int) -> bytearray:
        src.seek(start)
        data = bytearray(src.read(size))
        if len(data) != size:
            raise ElfError(f"short read at {start:#x}", path=self.path)
        self._overlay(data, start, start + size)
        return data

    def _overlay(self, buf: bytearray, start: int, stop: int) -> None:
        index = bisect.bisect_right(self._patch_offsets, start) - 1
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


ElfSource = Path | ElfEdit
"""What an edit reads: a file, or the result of another edit."""


def root_path(source: ElfSource) -> Path:
    """The file under ``source``."""
    while isinstance(source, ElfEdit):
        source = source.source
    return source
