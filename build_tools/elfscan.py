"""Classify every regular file of a selection once, by its bytes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kpack.elf import ElfInfo, scan_elf

__all__ = ["scan_files"]


def scan_files(paths: Iterable[Path], *, jobs: int = 2) -> Mapping[Path, ElfInfo | None]:
    """ELF facts for each path (None for non-ELF files); ElfError for corrupt ELF."""
    unique = sorted(set(paths))
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return dict(zip(unique, pool.map(scan_elf, unique), strict=True))
