"""The new section-header table of a transformed file (kpack.md §3 step 2).

Private to :mod:`kpack.transform`. Every original section keeps its index: the
``.rocm_kpack_ref`` header is appended at the end of the table and its name at the end
of a fresh ``.shstrtab`` (written after the file's content, at the same index). No
``sh_link``, ``sh_info``, ``e_shstrndx`` or symbol ``st_shndx`` changes, so ``.dynsym``
and ``.symtab`` keep their bytes.
"""

from __future__ import annotations

from dataclasses import replace

from kpack.common.frozen import frozen
from kpack.elf.reader import Reader
from kpack.elf.structs import SHF_ALLOC, SHN_LORESERVE, Shdr
from kpack.errors import TransformError
from kpack.hipfmt import MARKER
from kpack.transform._scan import FatLayout

__all__ = ["SHT_SYMTAB", "SectionTable"]

SHT_PROGBITS = 1
SHT_SYMTAB = 2


@frozen
class SectionTable:
    """The new section-header table: the old headers in place, then the marker's."""

    order: tuple[int | None, ...]  # new index -> old index; None is the marker (last)
    headers: tuple[Shdr, ...]  # .shstrtab's offset is set by pack()
    shstrtab: bytes
    shstrndx: int

    @classmethod
    def build(
        cls,
        reader: Reader,
        fat: FatLayout,
        shdrs: list[Shdr],
        *,
        marker: bytes,
        marker_vaddr: int,
        marker_offset: int,
    ) -> SectionTable:
        """``shdrs`` are the headers after the cut, in the old order."""
        if len(shdrs) + 1 >= SHN_LORESERVE:
            raise TransformError(f"{len(shdrs)} sections; too many to add one", path=fat.path)
        shstrndx = fat.layout.ehdr.e_shstrndx
        if not 0 < shstrndx < len(shdrs):
            raise TransformError(f"e_shstrndx {shstrndx} is not usable", path=fat.path)
        names = fat.layout.shdrs[shstrndx]
        raw = reader.read_at(names.sh_offset, names.sh_size, "section-name table (.shstrtab)")
        raw += b"" if raw.endswith(b"\0") else b"\0"
        shstrtab = raw + MARKER.encode() + b"\0"
        marker_header = Shdr(
            sh_name=len(raw),
            sh_type=SHT_PROGBITS,
            sh_flags=SHF_ALLOC,
            sh_addr=marker_vaddr,
            sh_offset=marker_offset,
            sh_size=len(marker),
            sh_link=0,
            sh_info=0,
            sh_addralign=1,
            sh_entsize=0,
        )
        headers = list(shdrs)
        headers[shstrndx] = replace(headers[shstrndx], sh_size=len(shstrtab))
        order: tuple[int | None, ...] = (*range(len(shdrs)), None)
        return cls(order, (*headers, marker_header), shstrtab, shstrndx)

    def pack(self, shstrtab_offset: int) -> bytes:
        return b"".join(
            (replace(h, sh_offset=shstrtab_offset) if i == self.shstrndx else h).pack()
            for i, h in enumerate(self.headers)
        )
