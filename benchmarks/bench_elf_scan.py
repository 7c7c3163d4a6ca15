"""Benchmark: ``kpack.elf.scan_elf`` over a tree, against a plain pyelftools scan.

Both produce (soname, needed, rpath, runpath, has .hip_fatbin) for every regular file.
The baseline opens each file with ``ELFFile`` and walks sections and the dynamic table
the usual way. Also reports the bytes ``scan_elf`` reads (counted through the file
object) against the bytes in the tree, and plan + verify time for the largest library.

    python benchmarks/bench_elf_scan.py                       # Debian cache + /usr/lib
    python benchmarks/bench_elf_scan.py /path/to/tree --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from elftools.common.exceptions import ELFError  # noqa: E402
from elftools.elf.dynamic import DynamicSection  # noqa: E402
from elftools.elf.elffile import ELFFile  # noqa: E402

from kpack.elf import check_rpath_edit, plan_rpath_edit, scan_elf  # noqa: E402
from kpack.elf import reader as _read  # noqa: E402
from kpack.errors import ElfError  # noqa: E402

DEFAULT_ROOTS = [
    Path.home() / ".cache" / "rocm-packaging" / "extracted",
    Path("/usr/lib/x86_64-linux-gnu"),
]


def regular_files(roots: list[Path]) -> list[Path]:
    out: list[Path] = []
    for root in roots:
        for dirpath, _, names in os.walk(root):
            for name in names:
                path = Path(dirpath) / name
                if path.is_file() and not path.is_symlink():
                    out.append(path)
    return sorted(out)


def ours(path: Path) -> object:
    try:
        info = scan_elf(path)
    except ElfError:
        return "error"
    if info is None:
        return None
    return (info.soname, info.needed, info.rpath, info.runpath, info.has_hip_fatbin)


def baseline(path: Path) -> object:
    with path.open("rb") as f:
        try:
            elf = ELFFile(f)
            found: dict[str, list[str]] = {"soname": [], "needed": [], "rpath": [], "runpath": []}
            for section in elf.iter_sections():
                if isinstance(section, DynamicSection):
                    for tag in section.iter_tags():
                        key = str(tag.entry.d_tag)[3:].lower()
                        if key in found:
                            found[key].append(getattr(tag, key))
            hip = elf.get_section_by_name(".hip_fatbin") is not None
        except (ELFError, ValueError, KeyError):
            return "error"
    return (found["soname"], found["needed"], found["rpath"], found["runpath"], hip)


def timed(fn: Callable[[Path], object], files: list[Path], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for path in files:
            fn(path)
        best = min(best, time.perf_counter() - start)
    return best


class _Counting:
    total = 0

    def __init__(self, inner: BinaryIO) -> None:
        self.inner = inner

    def read(self, size: int = -1) -> bytes:
        data = self.inner.read(size)
        _Counting.total += len(data)
        return data

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def __enter__(self) -> _Counting:
        return self

    def __exit__(self, *exc: object) -> None:
        self.inner.close()


def bytes_read(files: list[Path]) -> int:
    real = _read.open_binary
    _read.open_binary = lambda path: _Counting(real(path))  # type: ignore[assignment,return-value]
    try:
        _Counting.total = 0
        for path in files:
            ours(path)
        return _Counting.total
    finally:
        _read.open_binary = real


def elf_files(files: list[Path]) -> Iterator[Path]:
    for path in files:
        with path.open("rb") as f:
            if f.read(4) == b"\x7fELF":
                yield path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="*", type=Path, default=DEFAULT_ROOTS)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    files = regular_files([r for r in args.roots if r.is_dir()])
    elves = list(elf_files(files))
    tree_bytes = sum(p.stat().st_size for p in files)
    result: dict[str, object] = {
        "files": len(files),
        "elf_files": len(elves),
        "tree_mb": round(tree_bytes / 2**20, 1),
        "ours_s": round(timed(ours, files, args.repeat), 3),
        "pyelftools_s": round(timed(baseline, files, args.repeat), 3),
        "ours_read_kb": round(bytes_read(files) / 1024, 1),
    }
    if elves:
        largest = max(elves, key=lambda p: p.stat().st_size)
        start = time.perf_counter()
        try:
            edit = plan_rpath_edit(largest, ("$ORIGIN", "$ORIGIN/../../_rocm_sdk_core/lib"))
            if edit is not None:
                check_rpath_edit(edit, ("$ORIGIN", "$ORIGIN/../../_rocm_sdk_core/lib"))
            result["largest"] = str(largest)
            result["plan_and_verify_s"] = round(time.perf_counter() - start, 3)
        except ElfError as exc:
            result["largest_error"] = str(exc)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
