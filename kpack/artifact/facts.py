"""What a build needs to know about each file, read from its headers once.

Two kinds of facts come from a file's headers: its dynamic-linking facts
(:class:`~kpack.elf.ElfInfo`: SONAME, NEEDED, RPATH; the package builder's layout and RPATH
rules need them) and its device code (:class:`~kpack.transform.FatBinaryInfo`: the split's
classification and the builder's archive-reference check need it). :func:`read_facts`
reads both with one open and one header parse; :class:`FactsTable` remembers them per
file for one build, so every consumer asks it instead of parsing again.

A fat binary that cannot be transformed (another machine than x86-64, say) is an error
only for whoever asks about its device code; its ELF facts stay available.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kpack.common.threadpool import ThreadPool
from kpack.elf import ElfInfo, scan_reader
from kpack.elf.reader import is_regular_file, open_reader, read_ident, read_layout
from kpack.elf.structs import ELF_MAGIC
from kpack.errors import TransformError
from kpack.transform import FatBinaryInfo, fat_binary_info, inspect_fat_binary, is_elf64le

__all__ = ["FactsTable", "FileFacts", "read_facts"]


@dataclass(frozen=True)
class FileFacts:
    """One file's facts: ``elf`` is ``None`` for a non-ELF file, ``fat`` for a file without
    device code to split; ``fat_error`` is why its device code cannot be described."""

    elf: ElfInfo | None
    fat: FatBinaryInfo | None
    fat_error: TransformError | None = None


def read_facts(path: Path) -> FileFacts:
    """Both kinds of facts of ``path`` (a regular file; a symlink is not followed).
    :class:`~kpack.errors.ElfError` for a corrupt ELF file, as :func:`~kpack.elf.scan_elf`."""
    path = Path(path)
    if not is_regular_file(path):
        return FileFacts(None, None)
    with open_reader(path) as reader:
        if read_ident(reader)[:4] == ELF_MAGIC:
            layout = read_layout(reader) if is_elf64le(reader) else None
            elf = scan_reader(reader, path, layout)
            try:
                fat = fat_binary_info(reader, path, layout)
            except TransformError as exc:
                return FileFacts(elf, None, exc)
            return FileFacts(elf, fat)
    try:  # a PE image, or no binary at all
        return FileFacts(None, inspect_fat_binary(path))
    except TransformError as exc:
        return FileFacts(None, None, exc)


class FactsTable:
    """The facts of every file one build asks about, each file read once (thread-safe)."""

    def __init__(self) -> None:
        self._facts: dict[Path, FileFacts] = {}
        self._lock = threading.Lock()

    def facts(self, path: Path) -> FileFacts:
        with self._lock:
            known = self._facts.get(path)
        if known is None:
            known = read_facts(path)
            with self._lock:
                known = self._facts.setdefault(path, known)
        return known

    def elf(self, path: Path) -> ElfInfo | None:
        return self.facts(path).elf

    def fat(self, path: Path) -> FatBinaryInfo | None:
        """The device-code facts; :class:`TransformError` if they cannot be had."""
        facts = self.facts(path)
        if facts.fat_error is not None:
            raise facts.fat_error
        return facts.fat

    def scan(self, paths: Iterable[Path], *, jobs: int = 2) -> Mapping[Path, ElfInfo | None]:
        """ELF facts of ``paths``, read on ``jobs`` threads (headers only)."""
        unique = sorted(set(paths))
        with ThreadPool(max_workers=max(1, jobs)) as pool:
            return dict(zip(unique, pool.map(self.elf, unique), strict=True))

    def __len__(self) -> int:
        with self._lock:
            return len(self._facts)
