"""The new section-header table of a transformed file (kpack.md §3 steps 2 and 7).

Private to :mod:`kpack.transform`. Adds the ``.rocm_kpack_ref`` header and a fresh
``.shstrtab``, orders the headers alloc-first (stable otherwise), and renumbers
``sh_link``, ``sh_info`` where it names a section, ``e_shstrndx`` and every symbol's
``st_shndx`` in ``.symtab`` and ``.dynsym`` (patched in place).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace

from kpack.elf import Patch
from kpack.elf.reader import Reader
from kpack.elf.structs import SHF_ALLOC, SHN_LORESERVE, SHT_DYNSYM, Shdr
from kpack.errors import TransformError
from kpack.hipfmt import MARKER
from kpack.transform._scan import FatLayout

__all__ = ["SHT_SYMTAB", "SectionTable"]

SHT_PROGBITS = 1
SHT_SYMTAB = 2
SHT_RELA = 4
SHT_REL = 9
SHT_GROUP = 17
SHT_SYMTAB_SHNDX = 18
SHF_INFO_LINK = 0x40
_SYM_SIZE = 24
_SHNDX = struct.Struct("<H")


@dataclass(frozen=True)
class SectionTable:
    """The new section-header table: alloc sections first, then the rest (step 7)."""

    order: tuple[int | None, ...]  # new index -> old index; None is the marker
    headers: tuple[Shdr, ...]  # in new order; .shstrtab's offset is set by pack()
    shstrtab: bytes
    shstrndx: int
    symbol_patches: tuple[Patch, ...]

    @classmethod
    def build(
        cls,
        reader: Reader,
        fat: FatLayout,
        shdrs: list[Shdr],
        marker: bytes,
        marker_vaddr: int,
        marker_offset: int,
    ) -> SectionTable:
        """``shdrs`` are the headers after the cut, in the old order."""
        old = fat.layout.shdrs
        for s in shdrs:
            if s.sh_type in (SHT_GROUP, SHT_SYMTAB_SHNDX):
                raise TransformError(
                    f"section type {s.sh_type} (group / extended index) is unsupported",
                    path=fat.path,
                )
        if len(shdrs) + 1 >= SHN_LORESERVE:
            raise TransformError(f"{len(shdrs)} sections; too many to add one", path=fat.path)
        old_shstrndx = fat.layout.ehdr.e_shstrndx
        if not 0 < old_shstrndx < len(shdrs):
            raise TransformError(f"e_shstrndx {old_shstrndx} is not usable", path=fat.path)
        names = old[old_shstrndx]
        raw = reader.read_at(names.sh_offset, names.sh_size, "section-name table (.shstrtab)")
        raw += b"" if raw.endswith(b"\0") else b"\0"
        shstrtab = raw + MARKER.encode() + b"\0"
        alloc = [i for i in range(1, len(shdrs)) if shdrs[i].sh_flags & SHF_ALLOC]
        rest = [i for i in range(1, len(shdrs)) if not shdrs[i].sh_flags & SHF_ALLOC]
        order: tuple[int | None, ...] = (0, *alloc, None, *rest)
        mapping = {o: n for n, o in enumerate(order) if o is not None}
        marker_header = Shdr(
            len(raw), SHT_PROGBITS, SHF_ALLOC, marker_vaddr, marker_offset, len(marker), 0, 0, 1, 0
        )
        headers = tuple(
            marker_header if o is None else _relinked(shdrs[o], mapping, o, fat) for o in order
        )
        shstrndx = mapping[old_shstrndx]
        headers = tuple(
            replace(h, sh_size=len(shstrtab)) if i == shstrndx else h for i, h in enumerate(headers)
        )
        patches = _symbol_patches(reader, fat, mapping)
        return cls(order, headers, shstrtab, shstrndx, patches)

    def pack(self, shstrtab_offset: int) -> bytes:
        return b"".join(
            (replace(h, sh_offset=shstrtab_offset) if i == self.shstrndx else h).pack()
            for i, h in enumerate(self.headers)
        )


def _relinked(shdr: Shdr, mapping: dict[int, int], index: int, fat: FatLayout) -> Shdr:
    """``shdr`` with ``sh_link`` (and ``sh_info`` where it names a section) renumbered."""

    def renumber(value: int, field: str) -> int:
        if value == 0:
            return 0
        if value not in mapping:
            raise TransformError(
                f"section {index}: {field} {value} is not a section index", path=fat.path
            )
        return mapping[value]

    info_is_index = shdr.sh_flags & SHF_INFO_LINK or shdr.sh_type in (SHT_REL, SHT_RELA)
    return replace(
        shdr,
        sh_link=renumber(shdr.sh_link, "sh_link"),
        sh_info=renumber(shdr.sh_info, "sh_info") if info_is_index else shdr.sh_info,
    )


def _symbol_patches(reader: Reader, fat: FatLayout, mapping: dict[int, int]) -> tuple[Patch, ...]:
    """Rewrite ``st_shndx`` in ``.symtab`` and ``.dynsym`` where a section moved."""
    moved = {o: n for o, n in mapping.items() if o != n}
    if not moved:
        return ()
    patches: list[Patch] = []
    for index, s in enumerate(fat.layout.shdrs):
        if s.sh_type not in (SHT_SYMTAB, SHT_DYNSYM) or not s.sh_size:
            continue
        if s.sh_size % _SYM_SIZE:
            raise TransformError(
                f"symbol table {fat.layout.section_names[index]!r} size {s.sh_size} is not a "
                f"multiple of {_SYM_SIZE}",
                path=fat.path,
            )
        table = bytearray(reader.read_at(s.sh_offset, s.sh_size, "symbol table"))
        changed = False
        for pos in range(6, len(table), _SYM_SIZE):
            (shndx,) = _SHNDX.unpack_from(table, pos)
            if shndx in moved:
                _SHNDX.pack_into(table, pos, moved[shndx])
                changed = True
        if changed:
            patches.append((s.sh_offset, bytes(table)))
    return tuple(patches)
