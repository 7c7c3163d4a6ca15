"""Split a PE/COFF (x86-64) HIP fat binary: extract its device code, redirect its wrappers.

The Windows toolchain puts the device code in ``.hip_fat`` and the 24-byte
``__CudaFatBinaryWrapper`` array in ``.hipFatB``; each wrapper's bundle pointer carries a
DIR64 base relocation. The transform (what the Windows HIP runtime expects, after
rocm-kpack's COFF layout):

- a new read-only ``.kpackrf`` section holds the MessagePack marker, after the last
  section in memory and in the file;
- every wrapper becomes HIPK, its pointer the marker's address (its base relocation stays:
  the loader rebases it like before), ``reserved1`` its ``co_index``;
- ``.hip_fat`` keeps its VirtualSize and loses all its raw data (SizeOfRawData 0: the
  loader maps zeros), so the file shrinks by the whole section; later sections' raw data,
  the debug directory's file offsets and the COFF symbol table move down;
- SizeOfImage, SizeOfInitializedData, NumberOfSections and the CheckSum are recomputed.

Refused with one error: PE32 and non-x86-64 images, a ``.hip_fat`` without ``.hipFatB``,
a wrapper pointer without a DIR64 base relocation in a relocatable image, pointers that do
not land on a bundle start, any other base relocation or data directory that points into
``.hip_fat``, a signed image (certificate table), no room for one more section header,
and a debug directory entry's data or the COFF symbol table (with its string table) past
the end of the file, which the transform would shift and ship. The output is written to
a temporary sibling, re-read and checked, then renamed.
"""

from __future__ import annotations

import contextlib
import io
import mmap
import os
import struct
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO

from kpack import hipfmt
from kpack.bundle import BundleSink
from kpack.common.outfile import output_file
from kpack.errors import PeError, TransformError
from kpack.hipfmt import HIPK, PE_FATBIN, PE_MARKER, WRAPPER
from kpack.pe.image import (
    DIR_CERTIFICATE,
    OPT_CHECKSUM,
    SECTION,
    Checksum,
    debug_entries,
    read_image,
)
from kpack.transform._model import (
    ExtractedKernel,
    index_section,
    kernels_of_wrappers,
)
from kpack.transform._pe_read import (
    PeFat,
    _checked,
    _fat_of,
    _mapped,
    _read,
    _section_bytes,
    check_debug_data,
    check_symbol_table,
    references_into,
    transformed_problems,
)

__all__ = [
    "PeTransformPlan",
    "plan_pe_transform",
    "transform_pe",
    "write_pe_transform",
]

IMAGE_SCN_CNT_INITIALIZED_DATA = 0x40
IMAGE_SCN_MEM_READ = 0x40000000
_CHUNK = 1 << 20


# --- the transform --------------------------------------------------------------------


@dataclass(frozen=True)
class _Piece:
    """Output bytes: a source range (``data`` None) or new bytes."""

    start: int
    end: int
    data: bytes | None = None


@dataclass(frozen=True)
class PeTransformPlan:
    """A planned, not yet written PE transform of ``source``."""

    source: Path
    kernel_name: str
    search_paths: tuple[str, ...]
    removed_bytes: int
    kernels: tuple[ExtractedKernel, ...]
    marker_rva: int
    pieces: tuple[_Piece, ...]
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
            yield from _chunks(self, data, (*self.patches, final))

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
        self._chunks = chunks
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._pending = chunk
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def close(self) -> None:
        close = getattr(self._chunks, "close", None)
        if close is not None:
            close()
        super().close()


class _Output:
    """The planned output, readable by offset without being written: source ranges with
    patches applied, and the new bytes."""

    def __init__(self, plan: PeTransformPlan, data: mmap.mmap, checksum: bytes) -> None:
        self._data = data
        self._patches = (*plan.patches, (plan.checksum_offset, checksum))
        self._pieces: list[tuple[int, _Piece]] = []
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


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) & ~(alignment - 1)


def plan_pe_transform(
    path: Path, *, kernel_name: str, search_paths: Sequence[str], decoded: BundleSink | None = None
) -> PeTransformPlan:
    """Plan the transform of the PE image ``path``; write nothing. The code objects of
    compressed bundles go to ``decoded`` as the check decodes them."""
    path = Path(path)
    marker = hipfmt.encode_marker(kernel_name, search_paths, error=TransformError)
    with _mapped(path) as data:
        fat = _read(path, data)
        if fat is None:
            raise TransformError(f"no {PE_FATBIN} section; nothing to transform", path=path)
        targets = _checked(fat)
        # the kernels keep views of their own mapping (plain bundles), beyond this one
        section, name, bundles = index_section(
            path, fat.fatbin.raw_offset, fat.fatbin.file_bytes(), PE_FATBIN, decoded
        )
        kernels = kernels_of_wrappers(path, PE_FATBIN, section, name, bundles, targets)
        plan = _plan(fat, data, marker, kernel_name, tuple(search_paths), tuple(kernels))
        total = Checksum()
        for chunk in _chunks(plan, data, (*plan.patches, (plan.checksum_offset, b"\0" * 4))):
            total.update(chunk)
        checksum = total.value()
        _verify(_Output(plan, data, struct.pack("<I", checksum)), plan)
    return replace(plan, checksum=checksum)


def _plan(
    fat: PeFat,
    data: mmap.mmap,
    marker: bytes,
    kernel_name: str,
    search_paths: tuple[str, ...],
    kernels: tuple[ExtractedKernel, ...],
) -> PeTransformPlan:
    image, fatbin, path = fat.image, fat.fatbin, fat.path
    debug = list(debug_entries(image, data))
    check_debug_data(image, debug)
    problems = references_into(fat, data, debug)
    if problems:
        raise TransformError(
            f"other references into {PE_FATBIN}: the section cannot be emptied",
            path=path,
            problems=problems,
        )
    if image.directory(DIR_CERTIFICATE)[1]:
        raise TransformError(
            "a signed image (certificate table): transform it before signing", path=path
        )
    first_raw = min((s.raw_offset for s in image.sections if s.raw_size), default=image.file_size)
    if image.section_table_end + SECTION.size > min(image.size_of_headers, first_raw):
        raise TransformError(
            f"no room for one more section header after the section table "
            f"(ends at {image.section_table_end:#x}, SizeOfHeaders {image.size_of_headers:#x})",
            path=path,
        )
    removed = fatbin.raw_size
    cut = fatbin.raw_offset

    def moved(offset: int) -> int:
        return offset - removed if removed and offset > cut else offset

    raw_end = image.raw_end
    marker_raw = _align(len(marker), image.file_alignment)
    marker_offset = _align(moved(raw_end), image.file_alignment)
    marker_rva = _align(max(s.rva + s.mapped_size for s in image.sections), image.section_alignment)
    end_of_image = _align(marker_rva + len(marker), image.section_alignment)
    if end_of_image > 0xFFFFFFFF or marker_offset + marker_raw > 0xFFFFFFFF:
        raise TransformError(
            "no 32-bit address or file offset is left for the marker section", path=path
        )
    patches: list[tuple[int, bytes]] = []
    for s in image.sections:  # section headers: .hip_fat emptied, later raw data moved
        if s.index == fatbin.index:
            patches.append((s.header_offset + 16, struct.pack("<II", 0, 0)))
        elif s.raw_size and s.raw_offset > cut:
            patches.append((s.header_offset + 20, struct.pack("<I", moved(s.raw_offset))))
    header = SECTION.pack(
        PE_MARKER.encode().ljust(8, b"\0"), len(marker), marker_rva, marker_raw, marker_offset,
        0, 0, 0, 0, IMAGE_SCN_CNT_INITIALIZED_DATA | IMAGE_SCN_MEM_READ,
    )  # fmt: skip
    patches.append((image.section_table_end, header))
    coff = image.pe_offset + 4
    patches.append((coff + 2, struct.pack("<H", len(image.sections) + 1)))
    overlay = marker_offset + marker_raw - raw_end  # where the bytes after the sections go
    if image.symbol_table:
        if image.symbol_table < raw_end:
            raise TransformError(
                "the COFF symbol table lies inside the sections; cannot move it", path=path
            )
        check_symbol_table(image, data)
        patches.append((coff + 8, struct.pack("<I", image.symbol_table + overlay)))
    opt = image.opt_offset
    initialized = image.size_of_initialized_data + marker_raw
    if fatbin.characteristics & IMAGE_SCN_CNT_INITIALIZED_DATA:
        initialized = max(0, initialized - removed)
    patches.append((opt + 8, struct.pack("<I", initialized)))
    patches.append((opt + 56, struct.pack("<I", end_of_image)))
    for entry in debug:
        if entry.pointer:
            new = moved(entry.pointer) if entry.pointer < raw_end else entry.pointer + overlay
            patches.append((entry.offset + 24, struct.pack("<I", new)))
    assert fat.segment is not None
    pointer = image.image_base + marker_rva
    for wrapper in fat.wrappers:
        at = fat.segment.raw_offset + wrapper.index * WRAPPER.size
        patches.append((at, WRAPPER.pack(HIPK, wrapper.version, pointer, wrapper.index)))
    pieces = [
        _Piece(0, cut) if removed else _Piece(0, raw_end),
        *([_Piece(cut + removed, raw_end)] if removed else []),
        _Piece(0, marker_offset - moved(raw_end), b"\0" * (marker_offset - moved(raw_end))),
        _Piece(0, marker_raw, marker.ljust(marker_raw, b"\0")),
        _Piece(raw_end, image.file_size),
    ]
    return PeTransformPlan(
        path, kernel_name, search_paths, removed, kernels, marker_rva,
        tuple(p for p in pieces if (p.end > p.start if p.data is None else p.data)),
        tuple(sorted(patches)), opt + OPT_CHECKSUM,
    )  # fmt: skip


def _chunks(
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


def _verify(output: _Output, plan: PeTransformPlan) -> None:
    """Read the planned output back before anything is written: headers valid, every
    wrapper HIPK pointing at the marker, the marker decodes to what was planned,
    ``.hip_fat`` without file bytes, no base relocation into it, the checksum right."""
    path = plan.source
    try:
        image = read_image(output, path)
        fat = _fat_of(image, output)
    except PeError as exc:
        raise TransformError(
            f"the planned image does not read back: {exc.message}", path=path,
            problems=exc.problems,
        ) from exc  # fmt: skip
    if fat is None or fat.marker is None or fat.segment is None:
        raise TransformError("the planned image lacks its marker or wrappers", path=path)
    problems = transformed_problems(fat, output)
    decoded = hipfmt.decode_marker(
        _section_bytes(image, output, fat.marker), error=TransformError, path=path
    )
    if decoded != (plan.kernel_name, plan.search_paths):
        problems.append("the marker does not decode to the planned content")
    if problems:
        raise TransformError("the transformed image fails its check", path=path,
                             problems=problems)  # fmt: skip


def transform_pe(
    src: Path,
    dest: Path,
    *,
    kernel_name: str,
    search_paths: Sequence[str],
    decoded: BundleSink | None = None,
) -> PeTransformPlan:
    """Plan, write and check the transform of the PE image ``src`` into ``dest``."""
    plan = plan_pe_transform(
        Path(src), kernel_name=kernel_name, search_paths=search_paths, decoded=decoded
    )
    write_pe_transform(plan, Path(dest))
    return plan
