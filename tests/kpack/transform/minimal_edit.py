"""The minimal-edit oracle: where a transformed file may differ from its source (issue 23 #2).

- Every original section keeps its index and its header but for ``sh_offset``; the only
  header changes are ``.hip_fatbin`` becoming NOBITS and ``.shstrtab`` growing by the
  marker's name. ``.rocm_kpack_ref`` is the one new header, the last; ``e_shstrndx`` stays.
- Every section keeps its bytes but for what the transform must write: the wrappers' magic,
  pointer and index, their RELA entries, the removed device code and the appended name.
  ``.dynsym`` and ``.symtab`` are identical byte for byte, and ``readelf --dyn-syms`` prints
  the same.
- The loaded memory image (every original PT_LOAD's bytes as the loader maps them) is the
  source's outside those ranges, the ELF header and the room of a program-header table
  grown in place. Every other segment is unchanged; new PT_LOADs lie above the old ones.

Read with readelf and pyelftools, not with our own reader.
"""

from __future__ import annotations

import mmap
import re
import struct
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

from elftools.elf.elffile import ELFFile

__all__ = ["ReadelfSection", "check_minimal_edit", "readelf_sections"]

MARKER = ".rocm_kpack_ref"
PT_LOAD = 1
PT_PHDR = 6
R_X86_64_RELATIVE = 8
_ENTRY = 24  # an Elf64_Rela, an Elf64_Sym and a __CudaFatBinaryWrapper are all 24 bytes
_HEX16 = re.compile(r"[0-9a-f]{16}")
_CHUNK = 1 << 24

Range = tuple[int, int]


@dataclass(frozen=True)
class ReadelfSection:
    """One row of ``readelf -SW`` (the offset kept apart: it may change)."""

    name: str
    type: str
    addr: int
    size: int
    entsize: int
    flags: str
    link: int
    info: int
    align: int
    offset: int


def readelf_sections(path: Path) -> list[ReadelfSection]:
    """``readelf -SW`` parsed by position around the 16-digit address column."""
    out: list[ReadelfSection] = []
    for line in _readelf(path, "-SW").splitlines():
        m = re.match(r"^\s*\[\s*(\d+)\]\s(.*)$", line)
        if m is None:
            continue
        tokens = m[2].split()
        at = next(i for i, t in enumerate(tokens) if _HEX16.fullmatch(t))
        name = tokens[0] if at == 2 else ""
        off, size, es, *flags, lk, inf, al = tokens[at + 1 :]
        assert int(m[1]) == len(out) and len(flags) <= 1, line
        out.append(
            ReadelfSection(
                name,
                tokens[at - 1],
                int(tokens[at], 16),
                int(size, 16),
                int(es, 16),
                "".join(flags),
                int(lk),
                int(inf),
                int(al),
                int(off, 16),
            )
        )
    return out


def check_minimal_edit(before: Path, after: Path) -> int:
    """Assert that ``after`` differs from ``before`` only where the transform must edit;
    return the number of memory-image bytes compared."""
    old, new = readelf_sections(before), readelf_sections(after)
    assert [s.name for s in new] == [s.name for s in old] + [MARKER]
    for index, (a, b) in enumerate(zip(old, new, strict=False)):
        assert replace(b, offset=0) == replace(_expected(a, b), offset=0), (index, a, b)
    if any(s.type == "DYNSYM" for s in old):
        assert _readelf(before, "--dyn-syms") == _readelf(after, "--dyn-syms")
    with before.open("rb") as fa, after.open("rb") as fb:
        ea, eb = ELFFile(fa), ELFFile(fb)
        assert ea["e_shstrndx"] == eb["e_shstrndx"]
        for table in (".dynsym", ".symtab"):
            a_sec, b_sec = ea.get_section_by_name(table), eb.get_section_by_name(table)
            assert (a_sec is None) == (b_sec is None), table
            if a_sec is not None and b_sec is not None:
                assert a_sec.data() == b_sec.data(), table
        wrappers = _wrapper_range(ea)
        _section_bytes(ea, eb, wrappers)
        _segments(ea, eb)
        return _image(fa, fb, ea, eb, _must_change(ea, eb, wrappers))


def _expected(a: ReadelfSection, b: ReadelfSection) -> ReadelfSection:
    if a.name == ".hip_fatbin" and b.type == "NOBITS":
        return replace(a, type="NOBITS")
    if a.name == ".shstrtab":
        return replace(a, size=a.size + len(MARKER) + 1)
    return a


def _readelf(path: Path, *options: str) -> str:
    proc = subprocess.run(["readelf", *options, str(path)], capture_output=True, text=True)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    return proc.stdout


def _wrapper_range(elf: ELFFile) -> Range:
    seg = elf.get_section_by_name(".hipFatBinSegment")
    return (seg["sh_addr"], seg["sh_addr"] + seg["sh_size"])


def _section_bytes(ea: ELFFile, eb: ELFFile, wrappers: Range) -> None:
    """Each original section's bytes, but for what the transform must write."""
    for index in range(1, ea.num_sections()):
        a, b = ea.get_section(index), eb.get_section(index)
        if a["sh_type"] == "SHT_NOBITS" or b["sh_type"] == "SHT_NOBITS":
            assert a.name == ".hip_fatbin" or a["sh_type"] == b["sh_type"], a.name
            continue
        old, new = a.data(), b.data()
        if index == ea["e_shstrndx"]:
            assert new == old + MARKER.encode() + b"\0"
        elif a.name == ".hipFatBinSegment":
            assert len(old) == len(new)
            for i in range(0, len(old), _ENTRY):  # version and reserved1's high half stay
                assert old[i + 4 : i + 8] == new[i + 4 : i + 8]
                assert old[i + 20 : i + 24] == new[i + 20 : i + 24]
        elif a["sh_type"] == "SHT_RELA":
            assert len(old) == len(new), a.name
            for i in range(0, len(old), _ENTRY):
                if old[i : i + _ENTRY] != new[i : i + _ENTRY]:
                    r_offset, r_info = struct.unpack_from("<QQ", new, i)
                    assert wrappers[0] <= r_offset < wrappers[1], (a.name, i)
                    assert new[i : i + 8] == old[i : i + 8] and r_info == R_X86_64_RELATIVE
        else:
            assert old == new, a.name


def _segments(ea: ELFFile, eb: ELFFile) -> None:
    """Other segments unchanged; PT_LOADs inside the old ones keep their flags; new above."""

    def key(s: object) -> tuple[object, ...]:
        h = s.header  # type: ignore[attr-defined]
        return (h.p_type, h.p_vaddr, h.p_memsz, h.p_filesz, h.p_flags, h.p_align)

    others_a = [key(s) for s in ea.iter_segments() if s["p_type"] not in ("PT_LOAD", "PT_PHDR")]
    others_b = [key(s) for s in eb.iter_segments() if s["p_type"] not in ("PT_LOAD", "PT_PHDR")]
    assert others_a == others_b
    old = _loads(ea)
    top = max(s["p_vaddr"] + s["p_memsz"] for s in old)
    for q in _loads(eb):
        lo, hi = q["p_vaddr"], q["p_vaddr"] + q["p_memsz"]
        if lo >= top:
            continue
        home = [p for p in old if p["p_vaddr"] <= lo and hi <= p["p_vaddr"] + p["p_memsz"]]
        assert home and home[0]["p_flags"] == q["p_flags"], (hex(lo), hex(hi))


def _loads(elf: ELFFile) -> list[dict[str, int]]:
    return [s.header for s in elf.iter_segments() if s["p_type"] == "PT_LOAD"]


def _must_change(ea: ELFFile, eb: ELFFile, wrappers: Range) -> list[Range]:
    """Addresses the transform may write: device code, wrappers and their RELA entries, the
    ELF header, and a program-header table grown in place up to the next section."""
    fat = ea.get_section_by_name(".hip_fatbin")
    ranges = [(fat["sh_addr"], fat["sh_addr"] + fat["sh_size"]), wrappers]
    for sec in ea.iter_sections():
        if sec["sh_type"] != "SHT_RELA" or not sec["sh_flags"] & 2:
            continue
        data = sec.data()
        for i in range(0, len(data), _ENTRY):
            (r_offset,) = struct.unpack_from("<Q", data, i)
            if wrappers[0] <= r_offset < wrappers[1]:
                ranges.append((sec["sh_addr"] + i, sec["sh_addr"] + i + _ENTRY))
    first = _loads(ea)[0]
    base = first["p_vaddr"] - first["p_offset"]
    ranges.append((base, base + ea["e_ehsize"]))
    if eb["e_phoff"] == ea["e_phoff"]:
        room = min(s["sh_offset"] for s in ea.iter_sections() if s["sh_offset"] > ea["e_phoff"])
        ranges.append((base + ea["e_phoff"], base + room))
    return ranges


def _image(fa: BinaryIO, fb: BinaryIO, ea: ELFFile, eb: ELFFile, allowed: list[Range]) -> int:
    """Compare the mapped bytes of every original PT_LOAD, ``allowed`` zeroed in both."""
    compared = 0
    with (
        mmap.mmap(fa.fileno(), 0, access=mmap.ACCESS_READ) as ma,
        mmap.mmap(fb.fileno(), 0, access=mmap.ACCESS_READ) as mb,
    ):
        for p in _loads(ea):
            start, end = p["p_vaddr"], p["p_vaddr"] + p["p_memsz"]
            for lo in range(start, end, _CHUNK):
                hi = min(lo + _CHUNK, end)
                a, b = _mapped(ma, _loads(ea), lo, hi), _mapped(mb, _loads(eb), lo, hi)
                for x, y in _clipped(allowed, lo, hi):
                    a[x - lo : y - lo] = b[x - lo : y - lo] = bytes(y - x)
                assert a == b, f"memory image differs in {lo:#x}..{hi:#x}"
                compared += hi - lo - sum(y - x for x, y in _clipped(allowed, lo, hi))
    return compared


def _mapped(m: mmap.mmap, loads: list[dict[str, int]], lo: int, hi: int) -> bytearray:
    """The bytes the loader maps at ``[lo, hi)``: file-backed parts, zeros past p_filesz."""
    out = bytearray(hi - lo)
    for p in loads:
        x, y = max(lo, p["p_vaddr"]), min(hi, p["p_vaddr"] + p["p_filesz"])
        if x < y:
            offset = p["p_offset"] + x - p["p_vaddr"]
            out[x - lo : y - lo] = m[offset : offset + y - x]
    return out


def _clipped(ranges: list[Range], lo: int, hi: int) -> Iterator[Range]:
    for x, y in ranges:
        if max(x, lo) < min(y, hi):
            yield max(x, lo), min(y, hi)
