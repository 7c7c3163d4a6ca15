"""Split a HIP fat binary: extract its device code and redirect it to ``.kpack`` archives.

Implements kpack.md §3 for ELF64 x86-64 host binaries (:mod:`._elf`) and PE/COFF x86-64
images (:mod:`._pe`), over one format-neutral kernel model (:mod:`._model`). Which transform
applies is decided once per file, by its bytes (:func:`host_format`):

- :func:`inspect_fat_binary` reads headers and the wrapper array into a
  :class:`FatBinaryInfo` (``None`` for files without device code);
- :func:`extract_kernels` finds each wrapper's bundle through the wrapper's original
  pointer and returns its code objects (zero-copy views of an ``mmap`` for plain bundles);
- :func:`plan_host_transform` plans the rewritten file as a :class:`PlannedBinary` (an ELF
  :class:`TransformPlan` or a :class:`PeTransformPlan`) and verifies the planned bytes;
  nothing is written;
- :func:`transform_binary` does both and writes the result as a new file.

An already transformed file raises :class:`AlreadyTransformed`; a file that cannot be
transformed safely raises :class:`TransformError` (malformed ELF: ``ElfError``). A broken
file is never written.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from kpack.bundle import BundleSink
from kpack.hipfmt import MAX_MARKER_SIZE
from kpack.pe.signature import is_pe_file
from kpack.transform._elf import (
    TransformPlan,
    elf_kernels,
    fat_binary_info,
    inspect_elf,
    plan_transform,
)
from kpack.transform._model import (
    AlreadyTransformed,
    ExtractedKernel,
    FatBinaryInfo,
    IndexedSection,
    KernelSink,
    PlannedBinary,
    check_transformable,
    encode_marker,
    index_section,
    kernels_of_wrappers,
    stream_kernels,
)
from kpack.transform._scan import is_elf64le

if TYPE_CHECKING:
    from kpack.transform._pe import (
        PeTransformPlan,
        plan_pe_transform,
        transform_pe,
        write_pe_transform,
    )
    from kpack.transform._pe_read import (
        PeFat,
        PeKpackRef,
        extract_pe_kernels,
        read_pe_fat,
        read_pe_kpack_ref,
        transformed_problems,
    )
else:  # the PE transform is imported when a PE image is met (kpack.common.lazy)
    from kpack.common.lazy import lazy_face

    __getattr__, __dir__ = lazy_face(
        __name__,
        {
            **dict.fromkeys(
                ("PeTransformPlan", "plan_pe_transform", "transform_pe", "write_pe_transform"),
                "_pe",
            ),
            **dict.fromkeys(
                ("PeFat", "PeKpackRef", "extract_pe_kernels", "read_pe_fat", "read_pe_kpack_ref",
                 "transformed_problems"),
                "_pe_read",
            ),
        },
    )  # fmt: skip

__all__ = [
    "MAX_MARKER_SIZE",
    "AlreadyTransformed",
    "ExtractedKernel",
    "FatBinaryInfo",
    "IndexedSection",
    "KernelSink",
    "PeFat",
    "PeKpackRef",
    "PeTransformPlan",
    "PlannedBinary",
    "TransformPlan",
    "check_transformable",
    "encode_marker",
    "extract_kernels",
    "extract_pe_kernels",
    "fat_binary_info",
    "host_format",
    "index_section",
    "inspect_fat_binary",
    "is_elf64le",
    "kernels_of_wrappers",
    "plan_host_transform",
    "plan_pe_transform",
    "plan_transform",
    "read_pe_fat",
    "read_pe_kpack_ref",
    "stream_kernels",
    "transform_binary",
    "transform_pe",
    "transformed_problems",
    "write_pe_transform",
]

log = logging.getLogger(__name__)


def host_format(path: Path) -> Literal["elf", "pe"]:
    """Which transform applies to ``path``, by its bytes: a PE image (``MZ`` and a PE
    signature) or anything else, which the ELF reader accepts or refuses."""
    return "pe" if is_pe_file(path) else "elf"


def inspect_fat_binary(path: Path) -> FatBinaryInfo | None:
    """Describe ``path``'s fat binary; ``None`` if it has none (or is not ELF64 LE or PE).

    Relocatable objects (``.o``) give ``None`` too: their device code is for the link.
    Reads the headers, the section names, the wrapper array and the RELR table (if any);
    a symlink is not followed (:class:`ElfError`). A ``.hip_fatbin`` without
    ``.hipFatBinSegment`` gives ``wrapper_count`` 0; callers keep such a file unchanged
    (:func:`transform_binary` refuses it). A fat binary for another machine than x86-64
    raises :class:`TransformError`.
    """
    path = Path(path)
    if host_format(path) == "pe":
        from kpack.transform._pe_read import inspect_pe

        return inspect_pe(path)
    return inspect_elf(path)


def extract_kernels(path: Path) -> list[ExtractedKernel]:
    """Every code object of ``path``, keyed by the wrapper that points at its bundle.

    Code objects of plain bundles are views of a read-only ``mmap`` of ``path`` (it
    stays mapped while a view is alive); nothing copies the section.
    """
    path = Path(path)
    if host_format(path) == "pe":
        from kpack.transform._pe_read import extract_pe_kernels

        return extract_pe_kernels(path)
    return elf_kernels(path)


def plan_host_transform(
    path: Path,
    *,
    kernel_name: str,
    search_paths: Sequence[str],
    decoded: BundleSink | None = None,
) -> TransformPlan | PeTransformPlan:
    """:func:`plan_transform` for an ELF file, the PE transform for a Windows image."""
    path = Path(path)
    if host_format(path) == "pe":
        from kpack.transform._pe import plan_pe_transform

        return plan_pe_transform(
            path, kernel_name=kernel_name, search_paths=search_paths, decoded=decoded
        )
    return plan_transform(path, kernel_name=kernel_name, search_paths=search_paths, decoded=decoded)


def transform_binary(
    src: Path,
    dest: Path,
    *,
    kernel_name: str,
    search_paths: Sequence[str],
    decoded: BundleSink | None = None,
) -> TransformPlan | PeTransformPlan:
    """Plan, verify and write the transform of ``src`` to ``dest`` as a new file; the code
    objects of compressed bundles go to ``decoded`` as the check decodes them.

    ``dest`` is written to a temporary sibling and renamed into place, so a hard link
    at ``dest`` (or ``dest`` being ``src`` itself) is replaced, never written through.
    """
    if host_format(Path(src)) == "pe":  # its own layout, same contract
        from kpack.transform._pe import transform_pe

        return transform_pe(
            src, dest, kernel_name=kernel_name, search_paths=search_paths, decoded=decoded
        )
    plan = plan_transform(
        Path(src), kernel_name=kernel_name, search_paths=search_paths, decoded=decoded
    )
    plan.edit.write_to(Path(dest), replace_source=True)
    for note in plan.notes:
        log.info("%s: %s", dest, note)
    return plan
