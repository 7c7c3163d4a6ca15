"""Dynamic relocations of an x86-64 ELF file: RELA (``.rela.dyn``, ``.rela.plt``) and RELR.

Relocations are found through the dynamic table, as ``ld.so`` finds them, not through
section headers. Each table is read with one bounded read. RELR (``DT_RELR``, from
``-z pack-relative-relocs``) is decoded into the list of relocated addresses; its addends
are the words stored at those addresses, which :func:`read_words` fetches in windows.

Malformed tables raise :class:`ElfError`; layouts we do not handle (``DT_REL``, Android
packed relocations) raise :class:`TransformError`.
"""

from __future__ import annotations

import bisect
import struct
import sys
from array import array
from collections.abc import Iterable
from typing import NamedTuple

from kpack.common.frozen import frozen
from kpack.elf.reader import ElfLayout, Reader
from kpack.errors import ElfError, TransformError

__all__ = [
    "R_X86_64_64",
    "R_X86_64_RELATIVE",
    "Rela",
    "Relocations",
    "decode_relr",
    "read_relocations",
    "read_relr",
    "read_symbol_values",
    "read_words",
]

R_X86_64_NONE = 0
R_X86_64_64 = 1
R_X86_64_RELATIVE = 8
R_X86_64_IRELATIVE = 37

DT_PLTRELSZ = 2
DT_SYMTAB = 6
DT_RELA = 7
DT_RELASZ = 8
DT_RELAENT = 9
DT_REL = 17
DT_PLTREL = 20
DT_JMPREL = 23
DT_RELRSZ = 35
DT_RELR = 36
DT_RELRENT = 37
_ANDROID_PACKED = (0x6000000F, 0x60000010, 0x60000011, 0x60000012)

_RELA = struct.Struct("<QQq")
_SYM = struct.Struct("<IBBHQQ")
_WINDOW = 1 << 20


class Rela(NamedTuple):
    """One ``Elf64_Rela`` and where it is stored in the file."""

    file_offset: int
    r_offset: int
    r_type: int
    r_sym: int
    r_addend: int

    def pack(self) -> bytes:
        return _RELA.pack(self.r_offset, (self.r_sym << 32) | self.r_type, self.r_addend)


@frozen
class Relocations:
    """Every dynamic relocation of a file. RELA entries are held as three columns (a large
    library has hundreds of thousands; one object each would cost more than reading them)."""

    r_offset: array[int]  # "Q"
    r_info: array[int]  # "Q": symbol << 32 | type
    r_addend: array[int]  # "q"
    runs: tuple[tuple[int, int], ...]  # (first entry, its file offset); entries step by 24
    relr: tuple[int, ...]  # addresses relocated by DT_RELR, ascending

    def __len__(self) -> int:
        return len(self.r_offset)

    def entry(self, index: int) -> Rela:
        """Entry ``index`` (in file order: DT_RELA then DT_JMPREL, each stored entry once)."""
        first, file_offset = self.runs[bisect.bisect_right(self.runs, (index, 1 << 64)) - 1]
        info = self.r_info[index]
        return Rela(
            file_offset + (index - first) * _RELA.size,
            self.r_offset[index],
            info & 0xFFFFFFFF,
            info >> 32,
            self.r_addend[index],
        )

    def find(self, places: Iterable[int]) -> dict[int, Rela]:
        """The entry relocating each of ``places`` that has one (a later entry for the same
        place wins, as it would when applied)."""
        wanted = set(places)
        found: dict[int, int] = {}
        if wanted:
            for index, r_offset in enumerate(self.r_offset):
                if r_offset in wanted:
                    found[r_offset] = index
        return {place: self.entry(index) for place, index in found.items()}


def read_relocations(reader: Reader, layout: ElfLayout) -> Relocations:
    """Read RELA (``DT_RELA`` and a RELA ``DT_JMPREL``) and RELR tables."""
    tags = {tag for tag, _ in layout.dyn_entries()}
    if DT_REL in tags:
        raise TransformError(
            "DT_REL relocations are not used on x86-64; unsupported", path=reader.name
        )
    if tags.intersection(_ANDROID_PACKED):
        raise TransformError("Android packed relocations are unsupported", path=reader.name)
    if layout.dyn_value(DT_RELAENT) not in (None, _RELA.size):
        raise ElfError(
            f"DT_RELAENT is {layout.dyn_value(DT_RELAENT)}, expected 24", path=reader.name
        )
    tables: list[tuple[int, bytes]] = []
    for start_tag, size_tag in ((DT_RELA, DT_RELASZ), (DT_JMPREL, DT_PLTRELSZ)):
        start, size = layout.dyn_value(start_tag), layout.dyn_value(size_tag)
        if start is None or not size:
            continue
        if start_tag == DT_JMPREL and layout.dyn_value(DT_PLTREL) not in (None, DT_RELA):
            raise TransformError("DT_JMPREL table is not RELA; unsupported", path=reader.name)
        tables.append(
            _read_table(reader, layout, start, size, entsize=_RELA.size, what="RELA table")
        )
    return _columns(_disjoint(tables, reader.name), read_relr(reader, layout))


def _disjoint(tables: list[tuple[int, bytes]], name: str) -> list[tuple[int, bytes]]:
    """Each stored entry once, in file order: DT_JMPREL may lie inside DT_RELA (or overlap
    its end); a table overlapping another out of step with its entries is malformed."""
    if len(tables) < 2:
        return tables
    out: list[tuple[int, bytes]] = []
    end = 0
    for base, raw in sorted(tables):
        if base < end:
            overlap = end - base
            if overlap % _RELA.size:
                raise ElfError(
                    f"RELA tables overlap at {base:#x} out of step with their 24-byte entries",
                    path=name,
                )
            base, raw = end, raw[overlap:]
        if raw:
            out.append((base, raw))
            end = base + len(raw)
    return out


def _columns(tables: list[tuple[int, bytes]], relr: tuple[int, ...]) -> Relocations:
    words: array[int] = array("Q")
    signed: array[int] = array("q")
    runs: list[tuple[int, int]] = []
    for base, raw in tables:
        runs.append((len(words) // 3, base))
        words.frombytes(raw)
        signed.frombytes(raw)
    if sys.byteorder != "little":  # ELF64 LE on a big-endian host
        words.byteswap()
        signed.byteswap()
    return Relocations(words[0::3], words[1::3], signed[2::3], tuple(runs), relr)


def read_relr(reader: Reader, layout: ElfLayout) -> tuple[int, ...]:
    """Addresses relocated by ``DT_RELR``, ascending (empty without one)."""
    start, size = layout.dyn_value(DT_RELR), layout.dyn_value(DT_RELRSZ)
    if start is None or not size:
        return ()
    if layout.dyn_value(DT_RELRENT) not in (None, 8):
        raise ElfError(
            f"DT_RELRENT is {layout.dyn_value(DT_RELRENT)}, expected 8", path=reader.name
        )
    _, raw = _read_table(reader, layout, start, size, entsize=8, what="RELR table (DT_RELR)")
    return tuple(sorted(decode_relr(raw, name=reader.name)))


def decode_relr(raw: bytes, *, name: str = "<relr>") -> list[int]:
    """Addresses relocated by a RELR table (even words: address; odd words: bitmaps)."""
    out: list[int] = []
    where: int | None = None
    for (word,) in struct.iter_unpack("<Q", raw):
        if word & 1 == 0:
            out.append(word)
            where = word + 8
            continue
        if where is None:
            raise ElfError("RELR table starts with a bitmap entry", path=name)
        bits = word >> 1
        while bits:
            low = bits & -bits
            out.append(where + (low.bit_length() - 1) * 8)
            bits ^= low
        where += 63 * 8
    return out


def read_symbol_values(reader: Reader, layout: ElfLayout, indices: Iterable[int]) -> dict[int, int]:
    """``st_value`` of the given ``.dynsym`` entries that are defined (``st_shndx != 0``)."""
    wanted = sorted(set(indices) - {0})
    symtab = layout.dyn_value(DT_SYMTAB)
    if not wanted:
        return {}
    if symtab is None:
        raise ElfError("relocations name symbols but there is no DT_SYMTAB", path=reader.name)
    size = (wanted[-1] + 1) * _SYM.size
    _, raw = _read_table(
        reader, layout, symtab, size, entsize=_SYM.size, what="dynamic symbol table"
    )
    out: dict[int, int] = {}
    for index in wanted:
        _, _, _, shndx, value, _ = _SYM.unpack_from(raw, index * _SYM.size)
        if shndx != 0:
            out[index] = value
    return out


def read_words(reader: Reader, layout: ElfLayout, addresses: Iterable[int]) -> dict[int, int]:
    """The 8-byte little-endian words at file-backed ``addresses``, read in windows."""
    out: dict[int, int] = {}
    window: tuple[int, bytes] | None = None
    for address in sorted(set(addresses)):
        offset = layout.vaddr_to_offset(address, 8)
        if offset is None:
            raise ElfError(f"relocated address {address:#x} is not file-backed", path=reader.name)
        if window is None or not window[0] <= offset <= window[0] + len(window[1]) - 8:
            size = min(_WINDOW, reader.size - offset)
            window = (offset, reader.read_at(offset, size, "relocated data"))
        (out[address],) = struct.unpack_from("<Q", window[1], offset - window[0])
    return out


def _read_table(
    reader: Reader, layout: ElfLayout, vaddr: int, size: int, *, entsize: int, what: str
) -> tuple[int, bytes]:
    """File offset and bytes of a table given by its address and size."""
    if size % entsize:
        raise ElfError(f"{what} size {size:#x} is not a multiple of {entsize}", path=reader.name)
    offset = layout.vaddr_to_offset(vaddr, size)
    if offset is None:
        raise ElfError(f"{what} at {vaddr:#x} (+{size:#x}) is not file-backed", path=reader.name)
    return offset, reader.read_at(offset, size, what)
