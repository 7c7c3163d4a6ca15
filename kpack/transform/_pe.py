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
from kpack.errors import PeError, TransformError
from kpack.hipfmt import HIPF, HIPK, PE_FATBIN, PE_MARKER, PE_SEGMENT, WRAPPER, RawWrapper
from kpack.pe.image import (
    DIR_CERTIFICATE,
    OPT_CHECKSUM,
    REL_BASED_DIR64,
    SECTION,
    Buffer,
    Checksum,
    DebugEntry,
    PeImage,
    Section,
    base_relocations,
    debug_entries,
    pe_checksum,
    read_image,
)
from kpack.transform._model import (
    ExtractedKernel,
    FatBinaryInfo,
    check_transformable,
    index_section,
    kernels_of_wrappers,
)

__all__ = [
    "PeFat",
    "PeKpackRef",
    "PeTransformPlan",
    "extract_pe_kernels",
    "inspect_pe",
    "plan_pe_transform",
    "read_pe_fat",
    "read_pe_kpack_ref",
    "relocations_into_fatbin",
    "transform_pe",
    "transformed_problems",
    "write_pe_transform",
]

IMAGE_SCN_CNT_INITIALIZED_DATA = 0x40
IMAGE_SCN_MEM_READ = 0x40000000
_CHUNK = 1 << 20


@dataclass(frozen=True)
class PeFat:
    """A PE image with a ``.hip_fat`` section: its headers, wrappers and relocations."""

    image: PeImage
    fatbin: Section
    segment: Section | None
    marker: Section | None
    wrappers: tuple[RawWrapper, ...]
    relocations: dict[int, int]  # RVA -> base relocation type

    @property
    def path(self) -> Path:
        return self.image.path

    def pointer_rva(self, index: int) -> int:
        assert self.segment is not None
        return self.segment.rva + index * WRAPPER.size + 8


@contextlib.contextmanager
def _mapped(path: Path) -> Iterator[mmap.mmap]:
    try:
        with open(path, "rb") as f:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:
        raise PeError(f"cannot map the file: {exc}", path=path) from exc
    try:
        yield mapped
    finally:
        mapped.close()


def _section_bytes(image: PeImage, data: Buffer, section: Section) -> bytes:
    size = section.virtual_size or section.raw_size
    if section.file_bytes() < size:
        raise PeError(
            f"{section.name}: {size} bytes but only {section.file_bytes()} in the file",
            path=image.path,
        )
    return bytes(data[section.raw_offset : section.raw_offset + size])


def _read(path: Path, data: mmap.mmap) -> PeFat | None:
    return _fat_of(read_image(data, path), data)


def _fat_of(image: PeImage, data: Buffer) -> PeFat | None:
    path = image.path
    fatbin = image.section(PE_FATBIN)
    if fatbin is None:
        return None
    segment = image.section(PE_SEGMENT)
    wrappers: tuple[RawWrapper, ...] = ()
    if segment is not None:
        raw = _section_bytes(image, data, segment)
        wrappers = hipfmt.parse_wrappers(raw, error=PeError, path=path)
    relocations = base_relocations(image, data)
    return PeFat(image, fatbin, segment, image.section(PE_MARKER), wrappers, relocations)


def relocations_into_fatbin(
    fat: PeFat, data: Buffer, skip: frozenset[int] = frozenset()
) -> list[int]:
    """RVAs of the DIR64 base relocations (other than ``skip``) whose pointer lands in
    ``.hip_fat``: references that emptying the section would leave dangling."""
    image = fat.image
    out = []
    for rva, kind in sorted(fat.relocations.items()):
        offset = image.rva_to_offset(rva, 8)
        if rva in skip or kind != REL_BASED_DIR64 or offset is None:
            continue
        (value,) = struct.unpack("<Q", bytes(data[offset : offset + 8]))
        if fat.fatbin.contains_rva(value - image.image_base):
            out.append(rva)
    return out


def transformed_problems(fat: PeFat, data: Buffer) -> list[str]:
    """What a transformed image must satisfy, for the check before writing and for
    ``kpack verify``: a marker section; every wrapper HIPK, pointing at it, its co_index its
    index; ``.hip_fat`` without file bytes and no base relocation into it; the CheckSum
    (when set) right."""
    image = fat.image
    if fat.marker is None:
        return [f"no {PE_MARKER} section"]
    problems = []
    if fat.fatbin.raw_size:
        problems.append(f"{PE_FATBIN} still holds {fat.fatbin.raw_size} bytes of device code")
    marker = image.image_base + fat.marker.rva
    for wrapper in fat.wrappers:
        if (wrapper.magic, wrapper.pointer, wrapper.co_index) != (HIPK, marker, wrapper.index):
            problems.append(f"wrapper {wrapper.index} is not redirected to {PE_MARKER}: {wrapper}")
    problems += [
        f"base relocation at RVA {rva:#x} points into {PE_FATBIN}"
        for rva in relocations_into_fatbin(fat, data)
    ]
    if image.checksum and pe_checksum(data, image.opt_offset + OPT_CHECKSUM) != image.checksum:
        problems.append("CheckSum does not match the bytes")
    return problems


def read_pe_fat(path: Path) -> PeFat | None:
    """The fat-binary layout of the PE image ``path``; None without ``.hip_fat``."""
    path = Path(path)
    with _mapped(path) as data:
        return _read(path, data)


def _checked(fat: PeFat) -> list[tuple[int, int, str]]:
    """(wrapper index, ``.hip_fat`` offset, label) of every wrapper of a file that can be
    transformed."""
    path = fat.path
    check_transformable(
        path, fat.wrappers, has_marker=fat.marker is not None,
        has_segment=fat.segment is not None, names=(PE_FATBIN, PE_SEGMENT, PE_MARKER),
    )  # fmt: skip
    image, fatbin = fat.image, fat.fatbin
    out = []
    for wrapper in fat.wrappers:
        assert wrapper.magic == HIPF
        where = f"{PE_SEGMENT} wrapper {wrapper.index} points at {wrapper.pointer:#x}"
        rva = fat.pointer_rva(wrapper.index)
        if image.relocatable and fat.relocations.get(rva) != REL_BASED_DIR64:
            raise TransformError(
                f"{PE_SEGMENT} wrapper {wrapper.index}: its pointer at RVA {rva:#x} has no "
                "DIR64 base relocation",
                path=path,
            )
        target = wrapper.pointer - image.image_base
        if not (0 <= target - fatbin.rva < fatbin.file_bytes()):
            raise TransformError(f"{where}, outside {PE_FATBIN}", path=path)
        out.append((wrapper.index, target - fatbin.rva, where))
    return out


def extract_pe_kernels(path: Path) -> list[ExtractedKernel]:
    """Every code object of the PE image ``path``, keyed by the wrapper that reaches it."""
    path = Path(path)
    fat = read_pe_fat(path)
    if fat is None:
        raise TransformError(f"no {PE_FATBIN} section; nothing to extract", path=path)
    targets = _checked(fat)
    section, name, bundles = index_section(
        path, fat.fatbin.raw_offset, fat.fatbin.file_bytes(), PE_FATBIN
    )
    return kernels_of_wrappers(path, PE_FATBIN, section, name, bundles, targets)


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
    _check_debug_data(image, debug)
    problems = _references_into(fat, data, debug)
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
        _check_symbol_table(image, data)
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


def _check_symbol_table(image: PeImage, data: Buffer) -> None:
    """The COFF symbol table (``PointerToSymbolTable``, 18 bytes a symbol) and the string
    table after it must lie in the file: they move with the bytes after the sections, and
    a pointer past the end would be shifted and shipped, still pointing nowhere."""
    end = image.symbol_table + 18 * image.symbol_count
    strings = 4
    if end + 4 <= image.file_size:
        (strings,) = struct.unpack("<I", bytes(data[end : end + 4]))
    if end + max(strings, 4) > image.file_size:
        raise PeError(
            f"COFF header: PointerToSymbolTable {image.symbol_table:#x} with NumberOfSymbols "
            f"{image.symbol_count} and a {max(strings, 4)}-byte string table ends past the "
            f"end of the file ({image.file_size:#x})",
            path=image.path,
        )


def _check_debug_data(image: PeImage, debug: Sequence[DebugEntry]) -> None:
    """Every debug directory entry's data (``PointerToRawData`` + ``SizeOfData``) must lie
    in the file, and in the sections or after them, not across their end: the transform
    moves it with the bytes around it."""
    problems = []
    for number, entry in enumerate(debug):
        end = entry.pointer + entry.size
        where = f"entry {number}: PointerToRawData {entry.pointer:#x}"
        if not entry.pointer:
            continue
        if end > image.file_size:
            problems.append(
                f"{where} + SizeOfData {entry.size:#x} ends past the end of the file "
                f"({image.file_size:#x})"
            )
        elif entry.pointer < image.raw_end < end:
            problems.append(
                f"{where} + SizeOfData {entry.size:#x} crosses the end of the sections "
                f"({image.raw_end:#x})"
            )
    if problems:
        raise PeError("malformed debug directory", path=image.path, problems=problems)


def _references_into(fat: PeFat, data: Buffer, debug: Sequence[DebugEntry]) -> list[str]:
    """Base relocations (other than the wrapper pointers) whose pointer lands in
    ``.hip_fat``, and data directories that point into it."""
    image, fatbin = fat.image, fat.fatbin
    cut = fatbin.raw_offset
    wrapper_pointers = frozenset(fat.pointer_rva(w.index) for w in fat.wrappers)
    problems = [
        f"a base relocation at RVA {rva:#x} points into {PE_FATBIN}"
        for rva in relocations_into_fatbin(fat, data, wrapper_pointers)
    ]
    for index, (rva, size) in enumerate(image.directories):
        if size and index != DIR_CERTIFICATE and fatbin.contains_rva(rva):
            problems.append(f"data directory {index} lies in {PE_FATBIN}")
    for entry in debug:
        start, end = entry.pointer, entry.pointer + entry.size
        if entry.size and start and start < fatbin.raw_offset + fatbin.raw_size and end > cut:
            problems.append(f"debug data at file offset {entry.pointer:#x} lies in {PE_FATBIN}")
        elif entry.size and entry.rva and fatbin.contains_rva(entry.rva):
            problems.append(f"debug data at RVA {entry.rva:#x} lies in {PE_FATBIN}")
    return problems


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
        with os.fdopen(fd, "wb") as out:
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


@dataclass(frozen=True)
class PeKpackRef:
    """The marker of a transformed PE image and its wrappers' ``co_index`` values."""

    path: Path
    kernel_name: str
    search_paths: tuple[str, ...]
    co_indices: tuple[int, ...]


def read_pe_kpack_ref(path: Path) -> PeKpackRef | None:
    """The ``.kpackrf`` marker of ``path``; None when it has none."""
    path = Path(path)
    with _mapped(path) as data:
        fat = _read(path, data)
        if fat is None or fat.marker is None:
            return None
        raw = _section_bytes(fat.image, data, fat.marker)
    kernel_name, paths = hipfmt.decode_marker(raw, error=PeError, path=path)
    indices = tuple(w.co_index for w in fat.wrappers if w.magic == HIPK)
    return PeKpackRef(path, kernel_name, paths, indices)


def inspect_pe(path: Path) -> FatBinaryInfo | None:
    """A PE image's fat binary, described like an ELF one (addresses are VAs)."""
    fat = read_pe_fat(path)
    if fat is None:
        return None
    hipk = sum(w.magic == HIPK for w in fat.wrappers)
    return FatBinaryInfo(
        path,
        fat.image.image_base + fat.fatbin.rva,
        fat.fatbin.raw_offset,
        fat.fatbin.file_bytes(),
        len(fat.wrappers),
        fat.marker is not None or bool(hipk),
        "base",
    )
