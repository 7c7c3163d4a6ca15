"""The old-kernel gate over a tree or a wheel: every ELF executable's program-header table
where ``AT_PHDR = load base + e_phoff`` finds it (:func:`kpack.elf.phdr_pin_problem`).

``kpack verify DIR`` and ``kpack verify WHEEL`` run it, so a tree or wheel edited after the
split (``strip`` during rpm/deb packaging, ``patchelf``) is caught before release;
``python -m rocm_kpack.tools.normalize_phdr_tree`` repairs what it finds. Any ELF file
whose PT_LOADs overlap in memory (:func:`kpack.elf.load_overlap_problem`: GNU strip 2.40
writes such executables from split ones) fails too: it loads on no kernel, and no pinning
repairs it. Files that are
not ELF64 little-endian (device code objects are, and pass: they have no PT_INTERP) are
skipped; symlinks are not followed. A wheel's members are read in place, through the zip.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, cast

from kpack.elf import load_overlap_problem, phdr_pin_problem
from kpack.elf.reader import Reader, open_reader, read_layout
from kpack.errors import ElfError

__all__ = ["PinFinding", "scan_executables"]

_ELF64_LE = b"\x7fELF\x02\x01"


@dataclass(frozen=True, kw_only=True)
class PinFinding:
    """One ELF file of the scan: ``problem`` is ``None`` when it passes the gate."""

    path: str  # a file path, or ``<wheel>!<member>``
    problem: str | None


def scan_executables(root: Path) -> Iterator[PinFinding]:
    """A finding for every ELF64 LE file below directory ``root``, or in wheel ``root``,
    in path order. An ELF file that cannot be read is a finding naming the problem."""
    if root.is_dir():
        yield from _scan_dir(root)
    else:
        yield from _scan_wheel(root)


def _check(name: str, opened: AbstractContextManager[Reader]) -> PinFinding | None:
    try:
        with opened as reader:
            if reader.read_at(0, min(6, reader.size), "e_ident") != _ELF64_LE:
                return None
            layout = read_layout(reader, with_sections=False)
            problems = [p for p in (phdr_pin_problem(layout), load_overlap_problem(layout)) if p]
            problem = "; ".join(problems) or None
    except ElfError as exc:
        problem = f"cannot read: {exc.message}"
    return PinFinding(path=name, problem=problem)


def _scan_dir(root: Path) -> Iterator[PinFinding]:
    for dirpath, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            path = Path(dirpath) / name
            if path.is_symlink() or not path.is_file():
                continue
            finding = _check(str(path), open_reader(path))
            if finding is not None:
                yield finding


class _MemberReader(AbstractContextManager[Reader]):
    def __init__(self, archive: zipfile.ZipFile, info: zipfile.ZipInfo, name: str) -> None:
        self._stream = cast(BinaryIO, archive.open(info))
        self._name = name

    def __enter__(self) -> Reader:
        return Reader(self._stream, self._name)

    def __exit__(self, *exc: object) -> None:
        self._stream.close()


def _scan_wheel(wheel: Path) -> Iterator[PinFinding]:
    try:
        archive = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as exc:
        raise ElfError(f"not a readable wheel: {exc}", path=wheel) from exc
    with archive:
        for info in sorted(archive.infolist(), key=lambda i: i.filename):
            if info.is_dir() or info.file_size < len(_ELF64_LE):
                continue
            with archive.open(info) as probe:
                if probe.read(len(_ELF64_LE)) != _ELF64_LE:
                    continue
            finding = _check(
                f"{wheel}!{info.filename}", _MemberReader(archive, info, info.filename)
            )
            if finding is not None:
                yield PinFinding(path=f"{wheel}!{info.filename}", problem=finding.problem)
