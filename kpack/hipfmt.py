"""The HIP host-binary formats, in one place (kpack.md §2-§3).

- section names: ``.hip_fatbin`` (device code), ``.hipFatBinSegment`` (the wrapper array),
  ``.rocm_kpack_ref`` (the marker a transformed binary carries);
- the 24-byte ``__CudaFatBinaryWrapper``: u32 magic (``HIPF`` before the transform,
  ``HIPK`` after), u32 version, u64 pointer (bundle before, marker after), u64 reserved
  (``co_index`` after);
- the marker: a MessagePack map ``{"kpack_search_paths": [...], "kernel_name": ...}``,
  read by the runtime through a 64 KiB window;
- archive search paths use ``@GFXARCH@`` for the target;
- file identification by leading bytes.

Readers elsewhere (the transform, ``resolve``, the CLI) parse through these functions
and raise their own error type.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from typing import Any, Literal

import msgpack

from kpack.archive import MAGIC as KPACK_MAGIC
from kpack.bundle import CCOB_MAGIC
from kpack.bundle import PLAIN_MAGIC as PLAIN_BUNDLE_MAGIC
from kpack.common.frozen import frozen
from kpack.errors import RocmPackagingError

_Path = str | os.PathLike[str] | None

__all__ = [
    "ELF_MAGIC",
    "FATBIN",
    "GFXARCH",
    "HIPF",
    "HIPK",
    "MARKER",
    "MAX_MARKER_SIZE",
    "MAX_WRAPPER_BYTES",
    "PE_FATBIN",
    "PE_MAGIC",
    "PE_MARKER",
    "PE_SEGMENT",
    "SEGMENT",
    "WRAPPER",
    "FileKind",
    "RawWrapper",
    "decode_marker",
    "encode_marker",
    "identify",
    "parse_wrappers",
    "search_path",
]

FATBIN = ".hip_fatbin"
SEGMENT = ".hipFatBinSegment"
MARKER = ".rocm_kpack_ref"
#: The same three in PE/COFF images, whose section names have at most 8 bytes.
PE_FATBIN = ".hip_fat"
PE_SEGMENT = ".hipFatB"
PE_MARKER = ".kpackrf"
HIPF = 0x48495046  # on disk 46 50 49 48 ("FPIH")
HIPK = 0x4B504948  # on disk 48 49 50 4B ("HIPK")
WRAPPER = struct.Struct("<IIQQ")  # magic, version, pointer, reserved1
#: The C loader unpacks the marker through a 64 KiB window.
MAX_MARKER_SIZE = 64 << 10
#: Wrapper arrays larger than this are refused before they are read.
MAX_WRAPPER_BYTES = 64 << 20
GFXARCH = "@GFXARCH@"

ELF_MAGIC = b"\x7fELF"
PE_MAGIC = b"MZ"
FileKind = Literal["elf", "pe", "kpack", "bundle"]


def identify(head: bytes) -> FileKind | None:
    """What a file is, from its first 24 bytes; ``None`` for anything else."""
    if head.startswith(ELF_MAGIC):
        return "elf"
    if head.startswith(PE_MAGIC):
        return "pe"
    if head.startswith(KPACK_MAGIC):
        return "kpack"
    if head.startswith(PLAIN_BUNDLE_MAGIC) or head.startswith(CCOB_MAGIC):
        return "bundle"
    return None


def search_path(depth: int, group: str) -> str:
    """The marker's search path for a binary ``depth`` directories below the dir that
    holds ``.kpack/``: ``'../' * depth + '.kpack/<group>_@GFXARCH@.kpack'``."""
    return "../" * depth + f".kpack/{group}_{GFXARCH}.kpack"


@frozen
class RawWrapper:
    """One wrapper as stored: ``index`` in the array, its fields."""

    index: int
    magic: int
    version: int
    pointer: int
    reserved1: int

    @property
    def co_index(self) -> int:
        """The code-object index of a HIPK wrapper (low 32 bits of ``reserved1``)."""
        return self.reserved1 & 0xFFFFFFFF


def parse_wrappers(
    raw: bytes, *, error: type[RocmPackagingError], path: _Path = None
) -> tuple[RawWrapper, ...]:
    """Parse a ``.hipFatBinSegment``; every magic must be HIPF or HIPK."""
    if len(raw) % WRAPPER.size:
        raise error(f"{SEGMENT}: size {len(raw)} is not a multiple of {WRAPPER.size}", path=path)
    out = []
    for index, (magic, version, pointer, reserved1) in enumerate(WRAPPER.iter_unpack(raw)):
        if magic not in (HIPF, HIPK):
            raise error(
                f"{SEGMENT} wrapper {index}: magic {magic:#010x} is neither HIPF nor HIPK",
                path=path,
            )
        out.append(RawWrapper(index, magic, version, pointer, reserved1))
    return tuple(out)


def encode_marker(
    kernel_name: str, search_paths: Sequence[str], *, error: type[RocmPackagingError]
) -> bytes:
    """The ``.rocm_kpack_ref`` content for ``kernel_name`` and ``search_paths``."""
    if isinstance(search_paths, str):
        raise error("search_paths must be a sequence of strings, not one string")
    paths = list(search_paths)
    if not isinstance(kernel_name, str) or not kernel_name:
        raise error(f"kernel_name must be a non-empty string, got {kernel_name!r}")
    if not paths or not all(isinstance(p, str) and p for p in paths):
        raise error(f"search_paths must be non-empty strings, got {paths!r}")
    data: bytes = msgpack.packb(
        {"kpack_search_paths": paths, "kernel_name": kernel_name}, use_bin_type=True
    )
    if len(data) > MAX_MARKER_SIZE:
        raise error(f"marker is {len(data)} bytes; the runtime reads at most 64 KiB")
    return data


def decode_marker(
    raw: bytes, *, error: type[RocmPackagingError], path: _Path = None
) -> tuple[str, tuple[str, ...]]:
    """``(kernel_name, search_paths)`` of a marker (the first 64 KiB are read, as the
    runtime does)."""
    unpacker = msgpack.Unpacker(raw=False, max_buffer_size=MAX_MARKER_SIZE)
    unpacker.feed(raw[:MAX_MARKER_SIZE])
    try:
        value: Any = next(unpacker)
    except (StopIteration, ValueError, msgpack.UnpackException) as exc:
        raise error(f"{MARKER}: not a MessagePack map ({exc})", path=path) from exc
    if not isinstance(value, dict):
        raise error(f"{MARKER}: expected a map, got {type(value).__name__}", path=path)
    paths = value.get("kpack_search_paths")
    kernel_name = value.get("kernel_name")
    if not isinstance(paths, list) or not paths or not all(isinstance(p, str) for p in paths):
        raise error(
            f"{MARKER}: kpack_search_paths must be a non-empty list of strings, got {paths!r}",
            path=path,
        )
    if not isinstance(kernel_name, str) or not kernel_name:
        raise error(f"{MARKER}: kernel_name must be a string, got {kernel_name!r}", path=path)
    return kernel_name, tuple(paths)
