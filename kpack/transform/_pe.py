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

import mmap
import struct
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from kpack import hipfmt
from kpack.bundle import BundleSink
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
from kpack.transform._model import ExtractedKernel, index_section, kernels_of_wrappers
from kpack.transform._pe_plan import (
    PeTransformPlan,
    Piece,
    PlannedOutput,
    output_chunks,
    write_pe_transform,
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
        indexed = index_section(
            path, fat.fatbin.raw_offset, fat.fatbin.file_bytes(), PE_FATBIN, decoded
        )
        kernels = kernels_of_wrappers(indexed, targets)
        plan = _plan(
            fat,
            data,
            marker=marker,
            kernel_name=kernel_name,
            search_paths=tuple(search_paths),
            kernels=tuple(kernels),
        )
        total = Checksum()
        for chunk in output_chunks(plan, data, (*plan.patches, (plan.checksum_offset, b"\0" * 4))):
            total.update(chunk)
        checksum = total.value()
        _verify(PlannedOutput(plan, data, struct.pack("<I", checksum)), plan)
    return replace(plan, checksum=checksum)


def _plan(
    fat: PeFat,
    data: mmap.mmap,
    *,
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
    name = PE_MARKER.encode().ljust(8, b"\0")
    flags = IMAGE_SCN_CNT_INITIALIZED_DATA | IMAGE_SCN_MEM_READ
    # Name, VirtualSize, VirtualAddress, SizeOfRawData, PointerToRawData, no relocations or
    # line numbers, Characteristics
    header = SECTION.pack(
        name, len(marker), marker_rva, marker_raw, marker_offset, 0, 0, 0, 0, flags
    )
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
        Piece(0, cut) if removed else Piece(0, raw_end),
        *([Piece(cut + removed, raw_end)] if removed else []),
        Piece(0, marker_offset - moved(raw_end), b"\0" * (marker_offset - moved(raw_end))),
        Piece(0, marker_raw, marker.ljust(marker_raw, b"\0")),
        Piece(raw_end, image.file_size),
    ]
    return PeTransformPlan(
        source=path,
        kernel_name=kernel_name,
        search_paths=search_paths,
        removed_bytes=removed,
        kernels=kernels,
        marker_rva=marker_rva,
        pieces=tuple(p for p in pieces if (p.end > p.start if p.data is None else p.data)),
        patches=tuple(sorted(patches)),
        checksum_offset=opt + OPT_CHECKSUM,
    )


def _verify(output: PlannedOutput, plan: PeTransformPlan) -> None:
    """Read the planned output back before anything is written: headers valid, every
    wrapper HIPK pointing at the marker, the marker decodes to what was planned,
    ``.hip_fat`` without file bytes, no base relocation into it, the checksum right."""
    path = plan.source
    try:
        image = read_image(output, path)
        fat = _fat_of(image, output)
    except PeError as exc:
        message = f"the planned image does not read back: {exc.message}"
        raise TransformError(message, path=path, problems=exc.problems) from exc
    if fat is None or fat.marker is None or fat.segment is None:
        raise TransformError("the planned image lacks its marker or wrappers", path=path)
    problems = transformed_problems(fat, output)
    decoded = hipfmt.decode_marker(
        _section_bytes(image, output, fat.marker), error=TransformError, path=path
    )
    if decoded != (plan.kernel_name, plan.search_paths):
        problems.append("the marker does not decode to the planned content")
    if problems:
        message = "the transformed image fails its check"
        raise TransformError(message, path=path, problems=problems)


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
