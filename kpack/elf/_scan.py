"""Classify files by their bytes and scan ELF files into a frozen :class:`ElfInfo`."""

from __future__ import annotations

import enum
import logging
from pathlib import Path

from kpack.common.frozen import frozen
from kpack.elf.reader import (
    ElfLayout,
    Reader,
    is_regular_file,
    open_reader,
    read_ident,
    read_layout,
)
from kpack.elf.structs import (
    AR_MAGIC,
    DF_1_PIE,
    DT_FLAGS_1,
    DT_NEEDED,
    DT_RPATH,
    DT_RUNPATH,
    DT_SONAME,
    ELF_MAGIC,
    ELFCLASS32,
    ELFCLASS64,
    ELFDATA2LSB,
    ELFDATA2MSB,
    EM_AMDGPU,
    EM_X86_64,
    ET_DYN,
    ET_EXEC,
    PT_INTERP,
)
from kpack.errors import ElfError

__all__ = ["ElfInfo", "FileKind", "classify", "scan_elf"]

log = logging.getLogger(__name__)

_MAX_INTERP = 4096


class FileKind(enum.Enum):
    """What a file is, decided from its leading bytes and ELF headers only."""

    EXECUTABLE = "exe"
    SHARED_LIBRARY = "so"
    STATIC_ARCHIVE = "archive"
    DEVICE_CODE = "device"
    OTHER = "other"


@frozen(kw_only=True)
class ElfInfo:
    """The dynamic-linking facts of one ELF file."""

    path: Path
    kind: FileKind
    soname: str | None
    needed: tuple[str, ...]
    rpath: tuple[str, ...] | None
    runpath: tuple[str, ...] | None
    interp: str | None
    has_hip_fatbin: bool

    @classmethod
    def other(cls, path: Path, kind: FileKind = FileKind.OTHER) -> ElfInfo:
        """A file of ``kind`` without dynamic-linking facts (not ELF64 LE)."""
        return cls(
            path=path,
            kind=kind,
            soname=None,
            needed=(),
            rpath=None,
            runpath=None,
            interp=None,
            has_hip_fatbin=False,
        )


def classify(path: Path) -> FileKind:
    """Classify ``path`` from its bytes. Symlinks and non-regular files are :attr:`OTHER`.

    Raises :class:`ElfError` for a file with the ELF magic that is truncated or corrupt.
    """
    if not is_regular_file(path):
        return FileKind.OTHER
    with open_reader(path) as reader:
        ident = read_ident(reader)
        if ident[:8] == AR_MAGIC:
            return FileKind.STATIC_ARCHIVE
        if ident[:4] != ELF_MAGIC or not _is_elf64le(ident, reader):
            return FileKind.OTHER
        return _kind(read_layout(reader, with_sections=False))


def scan_elf(path: Path) -> ElfInfo | None:
    """Scan ``path``: ``None`` if it is not an ELF file (or not a regular file).

    Reads only headers, the dynamic table, the strings it references and the section
    names. 32-bit, big-endian and other non-ELF64-LE files yield an :class:`ElfInfo` of
    kind :attr:`FileKind.OTHER` with no dynamic information.
    """
    if not is_regular_file(path):
        return None
    with open_reader(path) as reader:
        return scan_reader(reader, path)


def scan_reader(reader: Reader, path: Path, layout: ElfLayout | None = None) -> ElfInfo | None:
    """:func:`scan_elf` on an already open reader (also used to check planned edits), given
    its ``layout`` if read already."""
    ident = read_ident(reader)
    if ident[:4] != ELF_MAGIC:
        return None
    if not _is_elf64le(ident, reader):
        return ElfInfo.other(path)
    layout = read_layout(reader) if layout is None else layout
    strings = _DynStrings(reader, layout)
    soname = _one(strings.values(DT_SONAME))
    rpath = _one(strings.values(DT_RPATH))
    runpath = _one(strings.values(DT_RUNPATH))
    return ElfInfo(
        path=path,
        kind=_kind(layout),
        soname=soname,
        needed=tuple(strings.values(DT_NEEDED)),
        rpath=tuple(rpath.split(":")) if rpath is not None else None,
        runpath=tuple(runpath.split(":")) if runpath is not None else None,
        interp=_interp(reader, layout),
        has_hip_fatbin=".hip_fatbin" in layout.section_names,
    )


def decode(raw: bytes) -> str:
    """Decode a dynamic string the way :func:`os.fsdecode` does (lossless)."""
    return raw.decode("utf-8", "surrogateescape")


def _one(values: list[str]) -> str | None:
    if len(values) > 1:
        log.warning("several entries of one dynamic tag; using the first: %r", values)
    return values[0] if values else None


def _is_elf64le(ident: bytes, reader: Reader) -> bool:
    """False (with a log message) for well-formed ELF files we never edit."""
    if len(ident) < 16:
        raise ElfError(f"ELF identification truncated ({len(ident)} bytes)", path=reader.name)
    elf_class, data = ident[4], ident[5]
    if elf_class not in (ELFCLASS32, ELFCLASS64) or data not in (ELFDATA2LSB, ELFDATA2MSB):
        raise ElfError(f"invalid EI_CLASS {elf_class} / EI_DATA {data}", path=reader.name)
    if elf_class == ELFCLASS32 or data == ELFDATA2MSB:
        bits = 32 if elf_class == ELFCLASS32 else 64
        order = "big" if data == ELFDATA2MSB else "little"
        log.info("%s: %d-bit %s-endian ELF; treated as OTHER", reader.name, bits, order)
        return False
    return True


def _kind(layout: ElfLayout) -> FileKind:
    ehdr = layout.ehdr
    if ehdr.e_machine == EM_AMDGPU:
        return FileKind.DEVICE_CODE
    if ehdr.e_machine != EM_X86_64:
        log.info("%s: e_machine %d is neither x86-64 nor AMDGPU", layout.name, ehdr.e_machine)
        return FileKind.OTHER
    if ehdr.e_type == ET_EXEC:
        return FileKind.EXECUTABLE
    if ehdr.e_type != ET_DYN:
        return FileKind.OTHER
    flags_1 = layout.dyn_value(DT_FLAGS_1) or 0
    if flags_1 & DF_1_PIE:
        return FileKind.EXECUTABLE
    if layout.first(PT_INTERP) is not None and layout.dyn_value(DT_SONAME) is None:
        return FileKind.EXECUTABLE
    return FileKind.SHARED_LIBRARY


class _DynStrings:
    """Resolves string-valued dynamic entries with bounded reads of ``.dynstr``."""

    def __init__(self, reader: Reader, layout: ElfLayout) -> None:
        self.reader = reader
        self.layout = layout

    def values(self, tag: int) -> list[str]:
        offsets = self.layout.dyn_values(tag)
        if not offsets:
            return []
        base, size = self.layout.dynstr_range()
        out = []
        for offset in offsets:
            if offset >= size:
                raise ElfError(
                    f"dynamic tag {tag:#x} string offset {offset:#x} beyond DT_STRSZ {size:#x}",
                    path=self.reader.name,
                )
            raw = self.reader.read_cstring(
                base + offset, base + size, f"dynamic string (tag {tag:#x})"
            )
            out.append(decode(raw))
        return out


def _interp(reader: Reader, layout: ElfLayout) -> str | None:
    seg = layout.first(PT_INTERP)
    if seg is None:
        return None
    if seg.p_filesz == 0 or seg.p_filesz > _MAX_INTERP:
        raise ElfError(f"PT_INTERP has implausible size {seg.p_filesz:#x}", path=reader.name)
    raw = reader.read_at(seg.p_offset, seg.p_filesz, "PT_INTERP")
    return decode(raw.split(b"\0", 1)[0])
