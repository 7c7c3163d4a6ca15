"""A minimal PE/COFF reader: the section table of a Windows DLL or EXE.

The kpack self-test reads kpack-transformed Windows binaries through it: their wrapper
array (``.hipFatB``) and marker (``.kpackrf``). Sections come back as ``ElfSection``
values (name, type, address = RVA, file offset, size), so one code path reads both
formats; a section without file bytes has the NOBITS type.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from ._elf import SHT_NOBITS, ElfError, ElfSection

MZ = b"MZ"
PE_SIGNATURE = b"PE\0\0"
SHT_PROGBITS = 1
MAX_SECTIONS = 96  # the PE loader's limit


def is_pe(path: Path) -> bool:
    """A DOS header whose ``e_lfanew`` leads to a PE signature."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 64 or head[:2] != MZ:
                return False
            (offset,) = struct.unpack_from("<I", head, 0x3C)
            f.seek(offset)
            return f.read(4) == PE_SIGNATURE
    except OSError:
        return False


def read_pe_sections(path: Path) -> list[ElfSection]:
    """Every section of the PE image ``path``, in table order (``ElfError`` if the
    headers do not fit the file)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(64)
        if len(head) < 64 or head[:2] != MZ:
            raise ElfError(f"{path}: not a PE image")
        (pe,) = struct.unpack_from("<I", head, 0x3C)
        f.seek(pe)
        coff = f.read(24)
        if len(coff) < 24 or coff[:4] != PE_SIGNATURE:
            raise ElfError(f"{path}: no PE signature")
        count, opt_size = (
            struct.unpack_from("<H", coff, 6)[0],
            struct.unpack_from("<H", coff, 20)[0],
        )
        if count > MAX_SECTIONS:
            raise ElfError(f"{path}: {count} sections")
        table = pe + 24 + opt_size
        if table + 40 * count > size:
            raise ElfError(f"{path}: truncated section table")
        f.seek(table)
        raw = f.read(40 * count)
    sections = []
    for i in range(count):
        name, vsize, rva, raw_size, raw_ptr, *_rest, chars = struct.unpack_from(
            "<8sIIIIIIHHI", raw, 40 * i
        )
        in_file = min(vsize, raw_size) if vsize else raw_size
        if in_file and raw_ptr + in_file > size:
            raise ElfError(f"{path}: section {i} extends past the end of the file")
        kind = SHT_PROGBITS if in_file else SHT_NOBITS
        text = name.rstrip(b"\0").decode("latin-1")
        sections.append(ElfSection(name=text, sh_type=kind, flags=chars, addr=rva,
                                   offset=raw_ptr, size=in_file or vsize))
    return sections
