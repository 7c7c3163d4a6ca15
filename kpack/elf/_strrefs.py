"""Every reference into the dynamic string table, to prove a string is not shared.

Linkers merge strings by suffix, so one ``.dynstr`` byte range can serve a DT_NEEDED, a
symbol name and a version name at once. Before overwriting a string in place we collect
every offset that the dynamic table, ``.dynsym``, ``.gnu.version_r`` and
``.gnu.version_d`` hold. Any other section linked to ``.dynstr`` makes the answer
"unknown", and callers must then append instead of overwriting.
"""

from __future__ import annotations

import struct

from kpack.elf.reader import ElfLayout, Reader
from kpack.elf.structs import (
    SHF_ALLOC,
    SHT_DYNAMIC,
    SHT_DYNSYM,
    SHT_GNU_VERDEF,
    SHT_GNU_VERNEED,
    SHT_STRTAB,
    STRING_TAGS,
)
from kpack.errors import ElfError

_VERNEED = struct.Struct("<HHIII")  # vn_version, vn_cnt, vn_file, vn_aux, vn_next
_VERNAUX = struct.Struct("<IHHII")  # vna_hash, vna_flags, vna_other, vna_name, vna_next
_VERDEF = struct.Struct("<HHHHIII")  # vd_version, flags, ndx, cnt, hash, aux, next
_VERDAUX = struct.Struct("<II")  # vda_name, vda_next


def dynstr_references(
    reader: Reader, layout: ElfLayout, *, exclude_slots: frozenset[int] = frozenset()
) -> frozenset[int] | None:
    """Offsets into ``.dynstr`` in use, or ``None`` if they cannot all be found.

    ``exclude_slots`` are dynamic-table slot indices whose references are ignored
    (the entries the caller is about to remove).
    """
    refs = {
        value
        for slot, (tag, value) in enumerate(layout.dyn_entries())
        if tag in STRING_TAGS and slot not in exclude_slots
    }
    dynstr_index = _dynstr_section(layout)
    if dynstr_index is None:
        return None
    for shdr in layout.shdrs:
        if shdr.sh_link != dynstr_index or shdr.sh_type == SHT_DYNAMIC:
            continue
        parser = _PARSERS.get(shdr.sh_type)
        if parser is None:
            return None
        data = reader.read_at(shdr.sh_offset, shdr.sh_size, f"section type {shdr.sh_type:#x}")
        try:
            refs.update(parser(data))
        except (struct.error, IndexError) as exc:
            raise ElfError(
                f"malformed section of type {shdr.sh_type:#x} linked to .dynstr: {exc}",
                path=layout.name,
            ) from exc
    return frozenset(refs)


def is_unshared(dynstr: bytes, offset: int, refs: frozenset[int]) -> bool:
    """True if no reference in ``refs`` reads any byte of the string at ``offset``.

    A reference reads our bytes if it points anywhere from the start of the
    NUL-delimited run containing ``offset`` up to and including its terminating NUL.
    """
    end = dynstr.find(b"\0", offset)
    if end < 0:
        return False
    run_start = dynstr.rfind(b"\0", 0, offset) + 1
    return not any(run_start <= r <= end for r in refs)


def _dynstr_section(layout: ElfLayout) -> int | None:
    """Index of the section that is the table DT_STRTAB names, if headers describe it."""
    offset, size = layout.dynstr_range()
    for index, shdr in enumerate(layout.shdrs):
        if (
            index > 0
            and shdr.sh_type == SHT_STRTAB
            and shdr.sh_flags & SHF_ALLOC
            and shdr.sh_offset == offset
            and shdr.sh_size == size
        ):
            return index
    return None


def _dynsym_names(data: bytes) -> list[int]:
    return [name for (name,) in struct.iter_unpack("<I20x", data[: len(data) // 24 * 24])]


def _verneed_names(data: bytes) -> list[int]:
    names: list[int] = []
    pos = 0
    for _ in range(len(data) // _VERNEED.size):
        _, count, file_name, aux, nxt = _VERNEED.unpack_from(data, pos)
        names.append(file_name)
        apos = pos + aux
        for _ in range(count):
            _, _, _, name, anext = _VERNAUX.unpack_from(data, apos)
            names.append(name)
            if anext == 0:
                break
            apos += anext
        if nxt == 0:
            break
        pos += nxt
    return names


def _verdef_names(data: bytes) -> list[int]:
    names: list[int] = []
    pos = 0
    for _ in range(len(data) // _VERDEF.size):
        _, _, _, count, _, aux, nxt = _VERDEF.unpack_from(data, pos)
        apos = pos + aux
        for _ in range(count):
            name, anext = _VERDAUX.unpack_from(data, apos)
            names.append(name)
            if anext == 0:
                break
            apos += anext
        if nxt == 0:
            break
        pos += nxt
    return names


_PARSERS = {
    SHT_DYNSYM: _dynsym_names,
    SHT_GNU_VERNEED: _verneed_names,
    SHT_GNU_VERDEF: _verdef_names,
}
