"""Read kpack-split host binaries as the ROCm runtime finds them (standard library only).

- :func:`read_kpack_ref`: the ``.rocm_kpack_ref`` marker (``{"kpack_search_paths": [...],
  "kernel_name": str}``) and the ``co_index`` of every HIPK wrapper in
  ``.hipFatBinSegment`` of a transformed host binary;
- :func:`candidate_targets`: the target strings the runtime tries for an ISA, most specific
  first (``gfx942:sramecc+:xnack-`` -> itself, ``gfx942:sramecc+``, ``gfx942:xnack-``,
  ``gfx942``).

The ``.kpack`` archives the markers lead to are read by :mod:`rocm_sdk._kpack_archive`.
Every problem with a file is a :class:`KpackError` (or ``ElfError``) naming the file.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path

from ._elf import ElfError, ElfSection, is_elf, read_section_data, read_sections
from ._msgpack import MsgpackError, unpack_one
from ._pe import is_pe, read_pe_sections

__all__ = [
    "GFXARCH",
    "HIPF_MAGIC",
    "HIPK_MAGIC",
    "KpackError",
    "KpackRef",
    "base_target",
    "candidate_targets",
    "decode_marker",
    "is_target_id",
    "read_kpack_ref",
    "read_wrappers",
]

MARKER_SECTION = ".rocm_kpack_ref"
WRAPPER_SECTION = ".hipFatBinSegment"
PE_MARKER_SECTION = ".kpackrf"  # the same two in Windows PE images (8-byte names)
PE_WRAPPER_SECTION = ".hipFatB"
GFXARCH = "@GFXARCH@"
ISA_PREFIX = "amdgcn-amd-amdhsa--"
HIPF_MAGIC = 0x48495046
HIPK_MAGIC = 0x4B504948
MARKER_WINDOW = 64 << 10  # the C loader unpacks the marker from a 64 KiB window
MAX_WRAPPER_BYTES = 64 << 20
_WRAPPER = struct.Struct("<IIQQ")
#: A target id (kpack.targets' grammar, which this runtime cannot import; a test feeds both
#: one table): a processor, then ``:feature+`` / ``:feature-`` parts, each feature once.
_TARGET = re.compile(r"gfx[0-9a-z]+(?:-[0-9a-z]+)*(?::[a-z]+[+-])*")
_MAX_TARGET_ID = 64


class KpackError(ValueError):
    """A marker, wrapper array or archive is malformed."""

    def __init__(self, message: str, path: Path | str | None = None) -> None:
        super().__init__(f"{path}: {message}" if path is not None else message)
        self.message = message
        self.path = path


# --- targets -----------------------------------------------------------------------------


def is_target_id(text: str) -> bool:
    """``gfx942``, ``gfx90a:xnack+``, ``gfx9-4-generic:sramecc-`` ... (at most 64 characters;
    not ``gfx942:XNACK+``, ``gfx942:xnack+:xnack-``)."""
    if len(text) > _MAX_TARGET_ID or _TARGET.fullmatch(text) is None:
        return False
    names = [feature[:-1] for feature in text.split(":")[1:]]
    return len(names) == len(set(names))


def base_target(target: str) -> str:
    return target.split(":", 1)[0]


def candidate_targets(isa: str) -> tuple[str, ...]:
    """Compatible target strings, most specific first (kpack.md §7).

    Feature subsets in descending bitmask order: all features, then dropping from the
    right. The ``amdgcn-amd-amdhsa--`` prefix is optional.
    """
    isa = isa.removeprefix(ISA_PREFIX)
    base, *features = isa.split(":")
    if not base or not all(len(f) > 1 and f[-1] in "+-" for f in features):
        raise KpackError(f"invalid ISA {isa!r}: expected gfxNNN[:feature±...]")
    n = len(features)
    out = []
    for mask in range((1 << n) - 1, -1, -1):
        kept = [f for i, f in enumerate(features) if mask & (1 << (n - 1 - i))]
        out.append(":".join([base, *kept]))
    return tuple(out)


# --- the marker and the wrappers ---------------------------------------------------------


@dataclass(frozen=True)
class KpackRef:
    """A transformed binary's marker and its wrappers' ``co_index`` values."""

    path: Path
    kernel_name: str
    search_paths: tuple[str, ...]
    co_indices: tuple[int, ...]  # per HIPK wrapper, in wrapper order

    def key(self, co_index: int) -> str:
        return f"{self.kernel_name}#{co_index}"


def decode_marker(raw: bytes, path: Path | str | None = None) -> tuple[str, tuple[str, ...]]:
    """(kernel_name, search paths) of a marker's MessagePack map."""
    try:
        value, end = unpack_one(raw, max_depth=4)
    except MsgpackError as exc:
        raise KpackError(f"{MARKER_SECTION}: not a MessagePack map ({exc})", path) from None
    if not isinstance(value, dict):
        raise KpackError(f"{MARKER_SECTION}: expected a map, got {type(value).__name__}", path)
    paths, name = value.get("kpack_search_paths"), value.get("kernel_name")
    if not isinstance(paths, list) or not paths or not all(isinstance(p, str) and p for p in paths):
        raise KpackError(
            f"{MARKER_SECTION}: kpack_search_paths must be a non-empty list of strings, "
            f"got {paths!r}",
            path,
        )
    if not isinstance(name, str) or not name:
        raise KpackError(f"{MARKER_SECTION}: kernel_name must be a string, got {name!r}", path)
    if any(raw[end:]):  # zero padding is harmless; anything else is damage
        raise KpackError(f"{MARKER_SECTION}: {len(raw) - end} stray byte(s) after the map", path)
    return name, tuple(paths)


def read_wrappers(
    path: Path, sections: list[ElfSection] | None = None, name: str = WRAPPER_SECTION
) -> list[tuple[int, int, int]]:
    """(magic, binary pointer, reserved1) per wrapper of ``.hipFatBinSegment`` (or none)."""
    if sections is None:
        sections = read_sections(path)
    section = next((s for s in sections if s.name == name), None)
    if section is None:
        return []
    if section.size % _WRAPPER.size:
        raise KpackError(f"{WRAPPER_SECTION}: size {section.size} is not a multiple of 24", path)
    if section.size > MAX_WRAPPER_BYTES:
        raise KpackError(f"{WRAPPER_SECTION}: implausibly large ({section.size} bytes)", path)
    raw = read_section_data(path, section, section.size)
    return [(magic, binary, reserved) for magic, _v, binary, reserved in _WRAPPER.iter_unpack(raw)]


def read_kpack_ref(path: Path) -> KpackRef | None:
    """The marker and HIPK wrappers of ``path``; None if it was not transformed.

    Not transformed: neither ELF nor PE, or no HIPK wrapper and no marker. A PE image
    (Windows) is read through ``.hipFatB`` and ``.kpackrf``. Raises :class:`KpackError`
    (or ``ElfError``) for a malformed marker, unknown wrapper magic, HIPK wrappers without a
    marker, or a marker next to untransformed (HIPF) wrappers.
    """
    path = Path(path)
    if is_pe(path):  # a Windows DLL or EXE
        sections = read_pe_sections(path)
        wrapper_name, marker_name = PE_WRAPPER_SECTION, PE_MARKER_SECTION
    elif is_elf(path):
        sections = read_sections(path)
        wrapper_name, marker_name = WRAPPER_SECTION, MARKER_SECTION
    else:
        return None
    wrappers = read_wrappers(path, sections, wrapper_name)
    for index, (magic, _ptr, _res) in enumerate(wrappers):
        if magic not in (HIPF_MAGIC, HIPK_MAGIC):
            raise KpackError(f"{wrapper_name}: wrapper {index} has magic {magic:#010x}", path)
    hipk = [w for w in wrappers if w[0] == HIPK_MAGIC]
    marker = next((s for s in sections if s.name == marker_name), None)
    if marker is None:
        if hipk:
            raise KpackError(f"{len(hipk)} HIPK wrapper(s) but no {marker_name} section", path)
        return None
    if len(hipk) != len(wrappers):
        raise KpackError(
            f"{wrapper_name}: {len(wrappers) - len(hipk)} of {len(wrappers)} wrapper(s) "
            f"are not HIPK although {marker_name} exists",
            path,
        )
    try:
        raw = read_section_data(path, marker, MARKER_WINDOW)
    except ElfError as exc:
        raise KpackError(f"{marker_name}: {exc}", path) from None
    kernel_name, search_paths = decode_marker(raw, path)
    co_indices = tuple(reserved & 0xFFFFFFFF for _m, _p, reserved in hipk)
    return KpackRef(path, kernel_name, search_paths, co_indices)
