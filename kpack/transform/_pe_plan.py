"""A planned PE transform as a value: the output as source ranges and new bytes, with
patches over the source; streamed, read back by offset before it is written, and written.

Private to :mod:`kpack.transform`; :mod:`kpack.transform._pe` makes and checks the plans.
"""

from __future__ import annotations

import contextlib
import io
import mmap
import os
import struct
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from kpack.common.outfile import output_file
from kpack.errors import TransformError
from kpack.transform._model import ExtractedKernel
from kpack.transform._pe_read import _mapped

__all__ = ["PeTransformPlan", "Piece", "PlannedOutput", "output_chunks", "write_pe_transform"]

_CHUNK = 1 << 20


@dataclass(frozen=True)
class Piece:
    """Output bytes: a source range (``data`` None) or new bytes."""

    start: int
    end: int
    data: bytes | None = None


@dataclass(frozen=True, kw_only=True)
class PeTransformPlan:
    """A planned, not yet written PE transform of ``source``."""

    source: Path
    kernel_name: str
    search_paths: tuple[str, ...]
    removed_bytes: int
    kernels: tuple[ExtractedKernel, ...]
    marker_rva: int
    pieces: tuple[Piece, ...]
    patches: tuple[tuple[int, bytes], ...]  # source offset -> bytes written over it
    checksum_offset: int  # in the output (the header does not move)
    checksum: int | None = None  # set once the planned output is verified
    notes: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        return sum(p.end - p.start if p.data is None else len(p.data) for p in self.pieces)

    def iter_chunks(self) -> Iterator[bytes]:
        """The transformed image, streamed from the mapped source (at most 1 MiB at a
        time). Only a verified plan (one from :func:`plan_pe_transform`) can be streamed."""
        if self.checksum is None:
            raise TransformError("the plan was not verified", path=self.source)
        final = (self.checksum_offset, struct.pack("<I", self.checksum))
        with _mapped(self.source) as data:
            yield from output_chunks(self, data, (*self.patches, final))

    def open(self) -> BinaryIO:
        """A read-only stream of :meth:`iter_chunks` (close it when done)."""
        return io.BufferedReader(_ChunkReader(self.iter_chunks()))

    @property
    def path(self) -> Path:
        """The file the output is made from (as :attr:`ElfEdit.path`)."""
        return self.source

    def kept_runs(self) -> tuple[tuple[int, int, int], ...]:
        """Where the output holds the source unchanged: ``(output offset, source offset,
        length)`` runs, in order (as :meth:`ElfEdit.kept_runs`); patched bytes, the
        checksum included, are in none."""
        patched = sorted((*self.patches, (self.checksum_offset, b"\0" * 4)))
        runs: list[tuple[int, int, int]] = []
        at = 0
        for piece in self.pieces:
            if piece.data is not None:
                at += len(piece.data)
                continue
            pos = piece.start
            for offset, value in patched:
                if offset + len(value) <= pos or offset >= piece.end:
                    continue
                if offset > pos:
                    runs.append((at + pos - piece.start, pos, offset - pos))
                pos = max(pos, offset + len(value))
            if pos < piece.end:
                runs.append((at + pos - piece.start, pos, piece.end - pos))
            at += piece.end - piece.start
        return tuple(runs)


class _ChunkReader(io.RawIOBase):
    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.output_chunks = chunks
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = next(self.output_chunks, None)
            if chunk is None:
                return 0
            self._pending = chunk
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def close(self) -> None:
        close = getattr(self.output_chunks, "close", None)
        if close is not None:
            close()
        super().close()


class PlannedOutput:
    """The planned output, readable by offset without being written: source ranges with
    patches applied, and the new bytes."""

    def __init__(self, plan: PeTransformPlan, data: mmap.mmap, checksum: bytes) -> None:
        self._data = data
        self._patches = (*plan.patches, (plan.checksum_offset, checksum))
        self._pieces: list[tuple[int, Piece]] = []
        at = 0
        for piece in plan.pieces:
            self._pieces.append((at, piece))
            at += piece.end - piece.start if piece.data is None else len(piece.data)
        self._size = at

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, index: slice, /) -> bytes:
        start, stop, _ = index.indices(self._size)
        out = bytearray()
        for at, piece in self._pieces:
            length = piece.end - piece.start if piece.data is None else len(piece.data)
            lo, hi = max(start, at), min(stop, at + length)
            if lo >= hi:
                continue
            if piece.data is not None:
                out += piece.data[lo - at : hi - at]
                continue
            src = piece.start + lo - at
            out += _patched(self._data, src, src + hi - lo, self._patches)
        return bytes(out)


def output_chunks(
    plan: PeTransformPlan, data: mmap.mmap, patches: Sequence[tuple[int, bytes]]
) -> Iterator[bytes]:
    """The output bytes in order, ``patches`` (source offset, bytes) applied."""
    for piece in plan.pieces:
        if piece.data is not None:
            yield piece.data
            continue
        for start in range(piece.start, piece.end, _CHUNK):
            yield _patched(data, start, min(start + _CHUNK, piece.end), patches)


def _patched(data: mmap.mmap, start: int, end: int, patches: Sequence[tuple[int, bytes]]) -> bytes:
    """Source bytes ``start:end`` with ``patches`` (source offset, bytes) written over."""
    chunk = bytearray(data[start:end])
    for at, value in patches:
        if at < end and at + len(value) > start:
            lo, hi = max(at, start), min(at + len(value), end)
            chunk[lo - start : hi - start] = value[lo - at : hi - at]
    return bytes(chunk)


def write_pe_transform(plan: PeTransformPlan, dest: Path) -> None:
    """Stream a verified ``plan`` into ``dest`` as a new file: written to a temporary
    sibling and renamed into place, never written through an existing file."""
    dest = Path(dest)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    try:
        with output_file(fd, dest) as out:  # a failed write names dest
            for chunk in plan.iter_chunks():
                out.write(chunk)
        os.chmod(tmp, plan.source.stat().st_mode & 0o7777)
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
