"""``normalize_phdr_tree``: re-pin executables' program-header tables after later edits.

rocm-kpack's tool of the same name, on the same command line::

    python -m rocm_kpack.tools.normalize_phdr_tree PATH...          # fix in place
    python -m rocm_kpack.tools.normalize_phdr_tree --check PATH...  # gate

Every regular file (not a symlink) below each PATH that is an ELF64 little-endian file is
looked at. An executable whose program-header table is not where old kernels (EL8) look
for it (see :mod:`kpack.elf._pin`) is listed as ``NONCOMPLIANT  <path>  (<reason>)`` with
``--check`` (exit status 1 when any is), and otherwise rewritten in place (a new file
renamed over it, mode kept) and listed as ``FIXED  <path>``. A last line counts the files.
A file that cannot be read or fixed is a ``WARN`` line on stderr as upstream prints it;
unlike upstream, the run then exits 1, so the gate never passes a file it could not check.
Also unlike upstream, an executable whose PT_LOADs overlap in memory (GNU strip 2.40 run
after the split writes them) is such a file, left as it is: it crashes on every kernel,
and pinning its table (upstream does, and prints ``FIXED``) would not change that.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the package importable by name
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import rocm_kpack  # noqa: F401  (puts kpack on the path in a checkout)

from kpack.common.boundary import guarded
from kpack.common.cli import Parser, add_version
from kpack.elf import phdr_pin_problem, pin_phdr
from kpack.elf.reader import open_reader, read_layout
from kpack.errors import RocmPackagingError, UsageError

__all__ = ["main"]

PROG = "python -m rocm_kpack.tools.normalize_phdr_tree"


def _parser() -> argparse.ArgumentParser:
    p = Parser(
        prog=PROG,
        description="Pin relocated program-header tables of executables across a tree of ELFs.",
    )
    add_version(p)
    p.add_argument("paths", nargs="+", type=Path, help="ELF files or directories to scan")
    p.add_argument(
        "--check",
        action="store_true",
        help="report non-compliant executables and exit 1; do not modify",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="list compliant files too")
    return p


def _files(roots: Sequence[Path]) -> Iterator[Path]:
    for root in roots:
        if root.is_file():
            yield root
            continue
        for dirpath, dirs, names in os.walk(root):
            dirs.sort()
            for name in sorted(names):
                path = Path(dirpath) / name
                if path.is_file() and not path.is_symlink():
                    yield path


def _is_elf(path: Path) -> bool:
    """ELF64 little-endian: the hosts this toolchain edits (a 32-bit or big-endian ELF is
    no program of a ROCm tree and is passed over, not counted)."""
    try:
        with path.open("rb") as f:
            return f.read(6) == b"\x7fELF\x02\x01"
    except OSError:
        return False


def _run(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    for root in args.paths:
        if not root.exists():
            raise UsageError("no such file or directory", path=root)
    scanned = flagged = failed = 0
    for path in _files(args.paths):
        if not _is_elf(path):
            continue
        scanned += 1
        try:
            with open_reader(path) as reader:
                problem = phdr_pin_problem(read_layout(reader, with_sections=False))
            if problem is not None and not args.check:
                pin_phdr(path)
        except RocmPackagingError as exc:
            print(f"WARN  {path}: {exc}", file=sys.stderr)
            failed += 1
            continue
        if problem is None:
            if args.verbose:
                print(f"ok    {path}")
            continue
        flagged += 1
        print(f"NONCOMPLIANT  {path}  ({problem})" if args.check else f"FIXED  {path}")
    verb = "non-compliant" if args.check else "fixed"
    print(f"\nScanned {scanned} ELF file(s); {flagged} {verb}.")
    return 1 if failed or (args.check and flagged) else 0


def main(argv: Sequence[str] | None = None) -> int:
    return guarded(_run, argv)


if __name__ == "__main__":
    sys.exit(main())
