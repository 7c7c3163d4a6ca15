"""``kpack inspect`` and ``kpack extract``: what a fat binary (ELF or PE), an offload
bundle or a ``.kpack`` archive holds, and its code objects written out as files.
"""

from __future__ import annotations

import argparse
import logging
import mmap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kpack.archive import KpackArchive
from kpack.bundle import PLAIN_MAGIC, iter_bundles
from kpack.cli._args import _input_file, _output_dir, _target
from kpack.common.cli import format_size, output_line
from kpack.common.outputs import publish, staging
from kpack.common.safepath import Root, safe_relpath
from kpack.errors import ArchiveError, UsageError
from kpack.hipfmt import PE_FATBIN, identify
from kpack.resolve import read_kpack_ref
from kpack.targets import target_order
from kpack.transform import extract_kernels, inspect_fat_binary, read_pe_fat

log = logging.getLogger(__name__)


def _file_kind(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            head = f.read(len(PLAIN_MAGIC))
    except OSError as exc:
        raise UsageError(f"cannot read: {exc.strerror}", path=path) from exc
    kind = identify(head)
    if kind is not None:
        return kind
    raise UsageError("not an ELF or PE file, an offload bundle or a .kpack archive", path=path)


@contextmanager
def _mapped(path: Path, offset: int = 0, size: int | None = None) -> Iterator[memoryview]:
    """A read-only view of ``path`` (or of a range); unmapped once no view is left."""
    with open(path, "rb") as f:
        if f.seek(0, 2) == 0:
            yield memoryview(b"")
            return
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    end = len(mm) if size is None else offset + size
    yield memoryview(mm)[offset:end]  # no explicit close: code-object views may outlive it


def _bundle_rows(path: Path, offset: int = 0, size: int | None = None) -> list[str]:
    """One line per bundle and code object, then per-target totals."""
    rows: list[str] = []
    totals: dict[str, list[int]] = {}
    with _mapped(path, offset, size) as view:
        for number, bundle in enumerate(iter_bundles(view, name=str(path))):
            kind = (
                f"CCOB v{bundle.ccob_version} {bundle.compression}"
                if bundle.compression
                else "plain"
            )
            rows.append(
                f"  bundle {number} at {bundle.offset:#x}: "
                f"{format_size(bundle.end - bundle.offset)}, {kind}, "
                f"{len(bundle.code_objects)} code objects"
            )
            for co in bundle.code_objects:
                rows.append(f"    {co.target:<20} {format_size(co.size):>9}  {co.triple}")
                total = totals.setdefault(co.target, [0, 0])
                total[0] += 1
                total[1] += co.size
            del bundle
    rows.append("  per target:")
    ordered = sorted(totals.items(), key=lambda item: target_order(item[0]))
    rows += [f"    {t:<20} {c:>5} code objects {format_size(s):>9}" for t, (c, s) in ordered]
    return rows


def _transformed_lines(path: Path, what: str) -> list[str]:
    """What a transformed binary's marker says (ELF or PE)."""
    ref = read_kpack_ref(path)
    lines = [f"{path}: transformed {what} (device code in .kpack archives)"]
    if ref is not None:
        lines += [
            f"  kernel_name: {ref.kernel_name}",
            f"  search paths: {', '.join(ref.search_paths)}",
            f"  wrappers: {len(ref.co_indices)} (HIPK)",
        ]
    return lines


def _inspect_elf(path: Path) -> list[str]:
    info = inspect_fat_binary(path)
    if info is None:
        return [f"{path}: ELF without .hip_fatbin (no device code)"]
    if info.already_transformed:
        return _transformed_lines(path, "host binary")
    lines = [
        f"{path}: HIP fat binary",
        f"  .hip_fatbin: offset {info.hip_fatbin_offset:#x}, {info.hip_fatbin_size} bytes",
        f"  wrappers: {info.wrapper_count}, relocation: {info.relocation_kind}",
    ]
    return lines + _bundle_rows(path, info.hip_fatbin_offset, info.hip_fatbin_size)


def _inspect_pe(path: Path) -> list[str]:
    fat = read_pe_fat(path)
    if fat is None:
        return [f"{path}: PE image without {PE_FATBIN} (no device code)"]
    if fat.marker is not None:
        return _transformed_lines(path, "PE host binary")
    section = fat.fatbin
    lines = [
        f"{path}: HIP fat binary (PE32+ x86-64)",
        f"  {PE_FATBIN}: RVA {section.rva:#x}, file offset {section.raw_offset:#x}, "
        f"{section.file_bytes()} bytes",
        f"  wrappers: {len(fat.wrappers)}, base relocations: {len(fat.relocations)}",
    ]
    return lines + _bundle_rows(path, section.raw_offset, section.file_bytes())


def _inspect_kpack(path: Path) -> list[str]:
    with KpackArchive.open(path) as archive:
        per_target: dict[str, list[int]] = {}
        for key, target in archive:
            total = per_target.setdefault(target, [0, 0])
            total[0] += 1
            total[1] += archive.entry(key, target).original_size
        binaries = {k.rpartition("#")[0] for k, _ in archive}
        original = sum(s for _, s in per_target.values())
        size = path.stat().st_size
        lines = [
            f"{path}: .kpack archive",
            f"  scheme: {archive.scheme}, group: {archive.group_name}, "
            f"family: {archive.gfx_arch_family}",
            f"  gfx_arches: {', '.join(archive.gfx_arches)}",
            f"  kernels: {len(archive)} from {len(binaries)} binaries",
            f"  size: {format_size(size)} for {format_size(original)} of code objects",
        ]
        ordered = sorted(per_target.items(), key=lambda item: target_order(item[0]))
        lines += [f"    {t:<20} {c:>5} kernels {format_size(s):>9}" for t, (c, s) in ordered]
    return lines


def cmd_inspect(args: argparse.Namespace) -> int:
    path = _input_file(args.file)
    kind = _file_kind(path)
    if kind == "elf":
        lines = _inspect_elf(path)
    elif kind == "pe":
        lines = _inspect_pe(path)
    elif kind == "kpack":
        lines = _inspect_kpack(path)
    else:
        lines = [f"{path}: offload bundle file", *_bundle_rows(path)]
    print("\n".join(lines))
    return 0


def _wants(target: str, wanted: str | None) -> bool:
    if wanted is None or target == wanted:
        return True
    return ":" not in wanted and target.split(":", 1)[0] == wanted


def _extract_items(path: Path, kind: str, wanted: str | None) -> Iterator[tuple[str, bytes]]:
    """``(relative output name, bytes)`` for every selected code object.

    Names are made from untrusted bytes (TOC keys, bundle triples) and are validated by the
    caller's :class:`~kpack.common.safepath.Root` before anything is written.
    """
    if kind == "kpack":
        with KpackArchive.open(path) as archive:
            for key, target in archive:
                if _wants(target, wanted):
                    safe_relpath(key, what="binary key", source=path, error=ArchiveError)
                    yield f"{key}.{target}.co", archive.read(key, target)
    elif kind == "bundle":
        with _mapped(path) as view:
            for number, bundle in enumerate(iter_bundles(view, name=str(path))):
                for co in bundle.code_objects:
                    if _wants(co.target, wanted):
                        yield f"{path.name}#{number}.{co.target}.co", bytes(co.data)
                del bundle
    else:  # an ELF or PE host binary
        info = inspect_fat_binary(path)
        if info is None:
            section = PE_FATBIN if kind == "pe" else ".hip_fatbin"
            raise UsageError(f"{kind.upper()} file without {section}: no device code", path=path)
        if info.already_transformed:
            raise UsageError(
                "already transformed: its device code is in .kpack archives; extract from those",
                path=path,
            )
        for kernel in extract_kernels(path):
            if _wants(kernel.target, wanted):
                yield f"{path.name}#{kernel.index}.{kernel.target}.co", kernel.read()


#: What ``kpack extract`` wrote into its output dir (:mod:`kpack.common.outputs`).
EXTRACT_RECORD = ".kpack-extract.json"
EXTRACT_TOOL = "kpack extract"


def _extract_destination(out: Path) -> None:
    """``-o`` must be a new path or a real directory (never a symlink to one)."""
    if out.is_symlink():
        raise UsageError("output is a symlink; give a real directory", path=out)
    _output_dir(out, "output")


def cmd_extract(args: argparse.Namespace) -> int:
    """Code objects into ``-o`` by the project's one output rule: a re-run replaces what
    the last run wrote there (as recorded in ``EXTRACT_RECORD``) and leaves other files
    alone; a file in the way that it did not write is refused unless ``--force``."""
    path = _input_file(args.file)
    _target(args.target)
    kind = _file_kind(path)
    out: Path = args.output
    _extract_destination(out)
    names: list[str] = []
    with staging(out, EXTRACT_TOOL) as staged:
        root = Root(staged, error=UsageError)
        for name, data in _extract_items(path, kind, args.target):
            root.write_bytes(name, data, what=f"output name from {path.name}")
            names.append(name)
        if not names:
            what = f" for target {args.target}" if args.target else ""
            raise UsageError(f"no code objects{what}", path=path)
        publish(out, staged, names, record=EXTRACT_RECORD, tool=EXTRACT_TOOL, force=args.force)
    count = len(names)
    if not getattr(args, "quiet", False):
        print(f"extracted {count} code objects")
    print(output_line(out))
    return 0
