"""``.kpack`` archives, format version 1 (kpack.md §1): a deterministic writer and a reader.

Layout: ``KPAK``, u32 version 1, u64 ``toc_offset``, zero padding to 64, the blob area, then
one MessagePack map (the TOC) running to the end of the file. The blob area holds the kernels
back to back (scheme ``none``) or ``u32 num_kernels`` followed by ``(u32 size, zstd frame)``
per ordinal (``zstd-per-kernel``).

:func:`write_kpack` sorts kernels by ``(binary_key, target)`` before assigning ordinals, so
the bytes depend only on the set of kernels; it refuses archives the C runtime cannot load,
empty code objects (``original_size`` 0) and archives over :data:`MAX_ARCHIVE_BYTES`, the
most every reader loads (HRX reads whole archives into memory, up to 2 GiB).
When every kernel is stored already (a frame made at the archive's level, or a code object
for ``none``), :func:`lay_out_kpack` computes the whole archive but its blobs up front, so
it can be streamed (into a wheel) with the same bytes :func:`write_kpack` writes.
:class:`KpackArchive` maps the file and decompresses one kernel at a time. Every problem is
an :class:`~kpack.errors.ArchiveError` naming the file and the field.

This module is the package's face; the work lives in its private modules: ``_kernels`` (the
kernels given and their checks), ``_pack`` (ordinals, TOC, writing and laying out),
``_write`` (frames and the streaming writer), ``_toc`` (the TOC decoded and checked) and
``_read`` (opening, validating and reading).
"""

from __future__ import annotations

from kpack.archive._kernels import KEY_RULES, MAX_KEY_BYTES, KernelInput, KeyRule, StoredKernel
from kpack.archive._pack import KpackLayout, KpackSummary, lay_out_kpack, write_kpack
from kpack.archive._read import KpackArchive
from kpack.archive._toc import SCHEMES, ArchiveEntry, Scheme
from kpack.archive._write import (
    BLOB_ALIGNMENT,
    DEFAULT_LEVEL,
    MAGIC,
    MAX_ARCHIVE_BYTES,
    MAX_KERNELS,
    MAX_ZSTD_BLOB,
    FrameWriter,
    ZstdFrame,
    compressed,
    compressor,
    stored_bound,
    write_chunks,
)

__all__ = [
    "BLOB_ALIGNMENT",
    "DEFAULT_LEVEL",
    "KEY_RULES",
    "MAGIC",
    "MAX_ARCHIVE_BYTES",
    "MAX_KERNELS",
    "MAX_KEY_BYTES",
    "MAX_ZSTD_BLOB",
    "SCHEMES",
    "ArchiveEntry",
    "FrameWriter",
    "KernelInput",
    "KeyRule",
    "KpackArchive",
    "KpackLayout",
    "KpackSummary",
    "Scheme",
    "StoredKernel",
    "ZstdFrame",
    "compressed",
    "compressor",
    "lay_out_kpack",
    "stored_bound",
    "write_chunks",
    "write_kpack",
]
