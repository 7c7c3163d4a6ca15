"""Verify a transformed host binary against its ``.kpack`` archives (``kpack verify``).

Checks, all problems collected and raised together:

- the ELF structure (:func:`kpack.elf.verify_elf`);
- the marker and the wrappers: every wrapper HIPK, ``co_index`` = wrapper index, the
  marker mapped by a PT_LOAD;
- for every target an archive lists (``gfx_arches``) and holds any kernel of this binary
  for, every wrapper's key ``kernel_name#i`` is there (no kernel at all for a listed target
  is a warning: the binary was not built for it); no key points past the last wrapper;
- every kernel of this binary decodes to ``original_size`` bytes and is an AMDGPU ELF.

Target-variant archives lacking keys of the bare-target archive are reported as warnings.
"""

from __future__ import annotations

import fnmatch
import glob
import logging
import mmap
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kpack.archive import KpackArchive
from kpack.elf import verify_elf
from kpack.elf.reader import open_reader, read_layout
from kpack.errors import ArchiveError, ElfError, PeError, TransformError
from kpack.generic_targets import generic_table
from kpack.hipfmt import GFXARCH, MARKER, PE_MARKER
from kpack.pe.image import is_pe_file
from kpack.resolve import KpackRef, check_variant_overlays, read_kpack_ref
from kpack.targets import target_order

__all__ = ["VerifyReport", "find_archives", "verify_binary"]

log = logging.getLogger(__name__)

_EM_AMDGPU = 224


@dataclass(frozen=True, kw_only=True)
class VerifyReport:
    binary: Path
    ref: KpackRef
    archives: tuple[Path, ...]
    targets: tuple[str, ...]
    kernels_checked: int
    warnings: tuple[str, ...]


def find_archives(ref: KpackRef, search_root: Path | None = None) -> tuple[Path, ...]:
    """Archives matching the marker's search paths, ``@GFXARCH@`` read as a wildcard.

    Without ``search_root`` the paths are taken relative to the binary's directory, as
    the runtime does once stage dirs are flattened; with it, any file below
    ``search_root`` whose name matches a search path's file name counts (for split
    output that is not flattened yet).
    """
    found: set[Path] = set()
    if search_root is None:
        for embedded in ref.search_paths:
            pattern = glob.escape(str(ref.path.parent / embedded)).replace(
                glob.escape(GFXARCH), "*"
            )
            found.update(Path(p) for p in glob.glob(pattern) if os.path.isfile(p))
        return tuple(sorted(found))
    names = [os.path.basename(p).replace(GFXARCH, "*") for p in ref.search_paths]
    for dirpath, _dirs, files in os.walk(search_root):
        for name in files:
            if any(fnmatch.fnmatchcase(name, n) for n in names):
                found.add(Path(dirpath) / name)
    return tuple(sorted(found))


def _pe_wrapper_problems(binary: Path, ref: KpackRef) -> list[str]:
    """A transformed PE image: see :func:`kpack.transform.transformed_problems`."""
    from kpack.transform import read_pe_fat, transformed_problems

    problems = [] if ref.co_indices else ["no HIPK wrappers"]
    try:
        fat = read_pe_fat(binary)
    except PeError as exc:
        return [*problems, *(exc.problems or [exc.message])]
    assert fat is not None
    with open(binary, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return [*problems, *transformed_problems(fat, data)]


def _co_index_problems(ref: KpackRef) -> list[str]:
    """Wrappers exist and each one's ``co_index`` is its index."""
    problems: list[str] = []
    if not ref.co_indices:
        problems.append("no HIPK wrappers")
    bad = [(i, c) for i, c in enumerate(ref.co_indices) if i != c]
    if bad:
        problems.append(f"wrappers whose co_index is not their index: {bad[:5]}")
    return problems


def _wrapper_problems(binary: Path, ref: KpackRef) -> list[str]:
    problems = _co_index_problems(ref)
    with open_reader(binary) as reader:
        layout = read_layout(reader)
    index = layout.section_index(".rocm_kpack_ref")
    if index is not None:
        size = layout.shdrs[index].sh_size
        if layout.vaddr_to_offset(ref.marker_addr, size) is None:
            problems.append(f".rocm_kpack_ref at {ref.marker_addr:#x} is not mapped by a PT_LOAD")
    return problems


def _coverage_problems(ref: KpackRef, held: Mapping[str, Mapping[Path, set[str]]]) -> list[str]:
    """A target with kernels of this binary must resolve every wrapper key, as the runtime
    looks it up: in the target's archives (all of them: a target's kernels may sit in
    archive parts, and the runtime tries every archive listing the target), then in those
    of its LLVM generic target with the same features (``gfx942:xnack-`` ->
    ``gfx9-4-generic:xnack-``)."""
    table = generic_table()
    wanted = {ref.key(i) for i in ref.co_indices}
    problems: list[str] = []
    for target in sorted(held):
        paths = sorted(path for path, have in held[target].items() if have)
        if not paths:
            continue
        have = set().union(*(held[target][path] for path in paths))
        generic = table.generic_target_id(target)
        fallback = set().union(*held.get(generic, {}).values()) if generic else set()
        missing = sorted(wanted - have - fallback)
        if missing:
            via = f" or {generic}" if generic else ""
            problems.append(
                f"{', '.join(map(str, paths))}: {len(missing)} wrapper key(s) missing for "
                f"{target}{via}: {', '.join(missing[:5])}"
            )
    return problems


def _archive_problems(
    ref: KpackRef, path: Path, held: dict[str, dict[Path, set[str]]], warnings: list[str]
) -> tuple[list[str], int]:
    """Problems of one archive's entries for ``ref``; records in ``held`` which of the
    binary's keys it holds per target."""
    problems: list[str] = []
    checked = 0
    prefix = f"{ref.kernel_name}#"
    wanted = {ref.key(i) for i in ref.co_indices}
    with KpackArchive.open(path) as archive:
        mine = [(k, t) for k, t in archive if k.startswith(prefix)]
        for target in archive.gfx_arches:
            have = {k for k, t in mine if t == target}
            held.setdefault(target, {})[path] = have
            if not have:
                warnings.append(f"{path}: no kernels of this binary for {target}")
        for key, target in mine:
            if key not in wanted:
                problems.append(f"{path}: {key} ({target}) matches no wrapper of the binary")
                continue
            try:
                data = archive.read(key, target)
            except ArchiveError as exc:
                problems.append(str(exc))
                continue
            checked += 1
            if data[:4] != b"\x7fELF" or int.from_bytes(data[18:20], "little") != _EM_AMDGPU:
                problems.append(f"{path}: {key} ({target}) is not an AMDGPU ELF code object")
    return problems, checked


def verify_binary(
    binary: Path, archives: Sequence[Path] = (), *, search_root: Path | None = None
) -> VerifyReport:
    """Verify ``binary`` against ``archives`` (found from its marker when empty)."""
    problems: list[str] = []
    warnings: list[str] = []
    pe = is_pe_file(binary)
    if not pe:
        try:
            warnings += verify_elf(binary, name=str(binary))
        except ElfError as exc:
            problems += list(exc.problems) or [exc.message]
    ref = read_kpack_ref(binary)
    if ref is None:
        marker = PE_MARKER if pe else MARKER
        raise TransformError(f"not transformed: no {marker} marker", path=binary)
    warnings += ref.notes
    problems += _pe_wrapper_problems(binary, ref) if pe else _wrapper_problems(binary, ref)
    paths = tuple(archives) or find_archives(ref, search_root)
    if not paths:
        problems.append(f"no archive found for search paths {list(ref.search_paths)}")
    held: dict[str, dict[Path, set[str]]] = {}
    checked = 0
    for path in paths:
        found, count = _archive_problems(ref, path, held, warnings)
        problems += found
        checked += count
    problems += _coverage_problems(ref, held)
    targets = set(held)
    for gap in check_variant_overlays(paths):
        warnings.append(
            f"{gap.variant_archive} ({gap.variant_target}) lacks {len(gap.missing)} key(s) of "
            f"{gap.bare_archive} ({gap.bare_target}); older runtimes would fail"
        )
    if problems:
        raise TransformError(
            "verification failed",
            path=binary,
            problems=problems + [f"warning: {w}" for w in warnings],
        )
    log.info("%s: %d kernels in %d archives verified", binary, checked, len(paths))
    return VerifyReport(
        binary=binary,
        ref=ref,
        archives=paths,
        targets=tuple(sorted(targets, key=target_order)),
        kernels_checked=checked,
        warnings=tuple(warnings),
    )
