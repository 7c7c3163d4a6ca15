"""Reference model of the runtime's kernel lookup (kpack.md §7).

Given a transformed host binary, this reports which archive, binary key and target the
ROCm runtime (CLR + ``librocm_kpack``) would load for each of its HIPK wrappers on a
given agent: the marker's search paths relative to the binary's directory, expanded with
``@GFXARCH@`` for every compatible target string, ``ROCM_KPACK_PATH`` /
``ROCM_KPACK_PATH_PREFIX`` / ``ROCM_KPACK_DISABLE``, and the arch-first search. It also
checks that target-variant archives are not partial overlays of the bare-target archive,
which older runtimes cannot use.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kpack import hipfmt
from kpack.archive import KpackArchive
from kpack.elf.reader import open_reader, read_layout
from kpack.errors import ElfError, PeError, UsageError
from kpack.generic_targets import generic_table
from kpack.hipfmt import GFXARCH
from kpack.pe.image import is_pe_file

__all__ = [
    "ArchiveIndex",
    "KpackRef",
    "Lookup",
    "Resolution",
    "VariantGap",
    "candidate_archives",
    "candidate_targets",
    "check_variant_overlays",
    "index_archive",
    "kpack_disabled",
    "read_kpack_ref",
    "resolve_binary",
]

log = logging.getLogger(__name__)

MARKER_SECTION = hipfmt.MARKER
WRAPPER_SECTION = hipfmt.SEGMENT
ISA_PREFIX = "amdgcn-amd-amdhsa--"
_ReadAt = Callable[[int, int, str], bytes]


# --- the marker and the wrappers ----------------------------------------------------------


@dataclass(frozen=True)
class KpackRef:
    """What a transformed binary tells the runtime: where to look, under which name."""

    path: Path
    kernel_name: str
    search_paths: tuple[str, ...]
    marker_addr: int
    co_indices: tuple[int, ...]  # per HIPK wrapper, in wrapper order
    notes: tuple[str, ...] = ()

    def key(self, co_index: int) -> str:
        return f"{self.kernel_name}#{co_index}"


def _read_pe_ref(path: Path) -> KpackRef | None:
    from kpack.transform import read_pe_fat, read_pe_kpack_ref  # PE support loads on use

    ref = read_pe_kpack_ref(path)
    fat = read_pe_fat(path)
    if ref is None or fat is None or fat.marker is None:
        hipk = [w for w in fat.wrappers if w.magic == hipfmt.HIPK] if fat is not None else []
        if hipk:
            raise PeError(f"{len(hipk)} HIPK wrapper(s) but no {hipfmt.PE_MARKER} section",
                          path=path)  # fmt: skip
        return None
    marker_addr = fat.image.image_base + fat.marker.rva
    if len(ref.co_indices) != len(fat.wrappers):
        raise PeError(
            f"{hipfmt.PE_SEGMENT}: {len(fat.wrappers) - len(ref.co_indices)} of "
            f"{len(fat.wrappers)} wrapper(s) are not HIPK although {hipfmt.PE_MARKER} exists",
            path=path,
        )
    notes = tuple(
        f"wrapper {w.index}: pointer {w.pointer:#x} is not the marker address {marker_addr:#x}"
        for w in fat.wrappers
        if w.pointer != marker_addr
    )
    return KpackRef(path, ref.kernel_name, ref.search_paths, marker_addr, ref.co_indices, notes)


def read_kpack_ref(path: Path) -> KpackRef | None:
    """Read the ``.rocm_kpack_ref`` marker and the HIPK wrappers of ``path``.

    Returns ``None`` for a file that was not transformed (no marker, no HIPK wrapper).
    Raises :class:`ElfError` for a malformed marker or inconsistent wrappers. A PE image
    (Windows) is read through its ``.kpackrf`` marker and ``.hipFatB`` wrappers instead.
    """
    name = os.fspath(path)
    if is_pe_file(path):
        return _read_pe_ref(Path(path))
    with open_reader(path) as reader:
        layout = read_layout(reader)
        marker_index = layout.section_index(MARKER_SECTION)
        wrapper_index = layout.section_index(WRAPPER_SECTION)
        marker = None
        if marker_index is not None:
            shdr = layout.shdrs[marker_index]
            window = min(shdr.sh_size, hipfmt.MAX_MARKER_SIZE)
            raw = reader.read_at(shdr.sh_offset, window, MARKER_SECTION)
            marker = (hipfmt.decode_marker(raw, error=ElfError, path=name), shdr.sh_addr)
        wrappers: tuple[hipfmt.RawWrapper, ...] = ()
        if wrapper_index is not None:
            shdr = layout.shdrs[wrapper_index]
            wrappers = _read_wrappers(reader.read_at, shdr.sh_offset, shdr.sh_size, name)
    hipk = [w for w in wrappers if w.magic == hipfmt.HIPK]
    if marker is None:
        if hipk:
            raise ElfError(
                f"{len(hipk)} HIPK wrapper(s) but no {MARKER_SECTION} section", path=name
            )
        return None
    (kernel_name, search_paths), marker_addr = marker
    if len(hipk) != len(wrappers):
        raise ElfError(
            f"{WRAPPER_SECTION}: {len(wrappers) - len(hipk)} of {len(wrappers)} wrapper(s) are "
            f"not HIPK although {MARKER_SECTION} exists",
            path=name,
        )
    notes = [
        f"wrapper {w.index}: pointer {w.pointer:#x} on disk is not the marker address "
        f"{marker_addr:#x} (relies on its relocation addend)"
        for w in hipk
        if w.pointer != marker_addr
    ]
    co_indices = tuple(w.co_index for w in hipk)
    return KpackRef(path, kernel_name, search_paths, marker_addr, co_indices, tuple(notes))


def _read_wrappers(
    read_at: _ReadAt, offset: int, size: int, name: str
) -> tuple[hipfmt.RawWrapper, ...]:
    if size % hipfmt.WRAPPER.size:
        raise ElfError(f"{WRAPPER_SECTION}: size {size} is not a multiple of 24", path=name)
    if size > hipfmt.MAX_WRAPPER_BYTES:
        raise ElfError(f"{WRAPPER_SECTION}: implausibly large ({size} bytes)", path=name)
    return hipfmt.parse_wrappers(read_at(offset, size, WRAPPER_SECTION), error=ElfError, path=name)


# --- candidate targets and archives ---------------------------------------------------------


def candidate_targets(agent_isa: str) -> tuple[str, ...]:
    """Target strings compatible with ``agent_isa``, most specific first.

    Feature subsets in descending bitmask order (all features, then dropping from the
    right): ``gfx942:sramecc+:xnack-`` -> itself, ``gfx942:sramecc+``, ``gfx942:xnack-``,
    ``gfx942``. The ``amdgcn-amd-amdhsa--`` prefix is optional.
    """
    isa = agent_isa.removeprefix(ISA_PREFIX)
    base, *features = isa.split(":")
    if not base or not all(f and f[-1] in "+-" and len(f) > 1 for f in features):
        raise UsageError(f"invalid agent ISA {agent_isa!r}: expected gfxNNN[:feature±...]")
    n = len(features)
    out: list[str] = []
    for mask in range((1 << n) - 1, -1, -1):
        kept = [f for i, f in enumerate(features) if mask & (1 << (n - 1 - i))]
        out.append(":".join([base, *kept]))
    return tuple(out)


def kpack_disabled(env: Mapping[str, str]) -> bool:
    """``ROCM_KPACK_DISABLE`` non-empty and not starting with ``0``."""
    value = env.get("ROCM_KPACK_DISABLE", "")
    return bool(value) and not value.startswith("0")


def _split_env(value: str) -> list[str]:
    return [p for p in value.split(os.pathsep) if p]


def _expand(path: str, targets: Sequence[str]) -> list[str]:
    if GFXARCH not in path:
        return [path]
    return [path.replace(GFXARCH, t) for t in targets]


def candidate_archives(
    ref: KpackRef, arches: Sequence[str], env: Mapping[str, str] | None = None
) -> tuple[Path, ...]:
    """Archive paths in the order the runtime considers them (existing or not).

    ``ROCM_KPACK_PATH`` (non-empty): only those files, no expansion, embedded paths
    ignored. Otherwise ``ROCM_KPACK_PATH_PREFIX`` entries first (``@GFXARCH@`` expanded
    if present), then each embedded path relative to the binary's directory, expanded for
    every arch x every compatible target string.
    """
    env = os.environ if env is None else env
    only = _split_env(env.get("ROCM_KPACK_PATH", ""))
    if only:
        return tuple(dict.fromkeys(Path(p) for p in only))
    targets = [t for arch in arches for t in candidate_targets(arch)]
    paths: list[Path] = []
    for entry in _split_env(env.get("ROCM_KPACK_PATH_PREFIX", "")):
        paths += [Path(p) for p in _expand(entry, targets)]
    base = ref.path.parent
    for embedded in ref.search_paths:
        paths += [base / p for p in _expand(embedded, targets)]
    return tuple(dict.fromkeys(paths))


# --- archive index and lookup ---------------------------------------------------------------


@dataclass(frozen=True)
class ArchiveIndex:
    """An opened archive as the runtime caches it: its arches and its (key, target) set."""

    path: Path
    canonical: str
    gfx_arches: tuple[str, ...]
    entries: frozenset[tuple[str, str]]

    def has(self, key: str, target: str) -> bool:
        return (key, target) in self.entries


def index_archive(path: Path) -> ArchiveIndex:
    """Open ``path`` once and record its ``gfx_arches`` and TOC keys."""
    with KpackArchive.open(path) as archive:
        arches = tuple(archive.gfx_arches)
        entries = frozenset((k, t) for k, t in archive)
    return ArchiveIndex(path, os.path.realpath(path), arches, entries)


@dataclass(frozen=True)
class Lookup:
    """What the runtime would load for one wrapper (``archive`` None = not found)."""

    co_index: int
    key: str
    archive: Path | None
    target: str | None
    older_runtime_fails: bool  # the first archive listing the target lacks the key
    reason: str = ""

    @property
    def found(self) -> bool:
        return self.archive is not None


@dataclass(frozen=True)
class Resolution:
    binary: Path
    ref: KpackRef
    arches: tuple[str, ...]
    disabled: bool
    candidates: tuple[Path, ...]
    archives: tuple[ArchiveIndex, ...]  # the candidates that exist, deduplicated
    lookups: tuple[Lookup, ...]

    @property
    def missing(self) -> tuple[Lookup, ...]:
        return tuple(lk for lk in self.lookups if not lk.found)


def _open_candidates(candidates: Iterable[Path]) -> tuple[ArchiveIndex, ...]:
    seen: dict[str, ArchiveIndex] = {}
    for path in candidates:
        if not path.is_file():
            log.debug("kpack: %s does not exist", path)
            continue
        canonical = os.path.realpath(path)
        if canonical not in seen:
            seen[canonical] = index_archive(path)
    return tuple(seen.values())


def _lookup(
    co_index: int, key: str, arches: Sequence[str], archives: Sequence[ArchiveIndex]
) -> Lookup:
    first_miss = False
    for arch in arches:
        for target in candidate_targets(arch):
            matching = [a for a in archives if target in a.gfx_arches]
            for position, archive in enumerate(matching):
                if archive.has(key, target):
                    older = first_miss or position > 0
                    return Lookup(co_index, key, archive.path, target, older)
            first_miss = first_miss or bool(matching)
    tried = ", ".join(t for arch in arches for t in candidate_targets(arch))
    reason = (
        f"no archive holds {key} for any of {tried}" if archives else "no candidate archive exists"
    )
    return Lookup(co_index, key, None, None, first_miss, reason)


def resolve_binary(
    binary: Path,
    arches: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    with_generic: bool = True,
) -> Resolution:
    """For every HIPK wrapper of ``binary``, what the runtime would load on ``arches``.

    ``arches`` is the agent ISA (``gfx942:sramecc+:xnack-``). With ``with_generic``, each
    one's LLVM generic target with the same features follows it, from the generic-target
    table (``gfx9-4-generic:sramecc+:xnack-``), as the runtime tries it; one given
    explicitly is not repeated.
    """
    if not arches:
        raise UsageError("resolve needs at least one agent ISA")
    env = os.environ if env is None else env
    ref = read_kpack_ref(binary)
    if ref is None:
        raise UsageError(f"{binary} is not a kpack-transformed binary (no {MARKER_SECTION})")
    arches = tuple(a.removeprefix(ISA_PREFIX) for a in arches)
    if with_generic:
        table = generic_table()
        arches = tuple(dict.fromkeys(t for a in arches for t in table.lookup_targets(a)))
    for arch in arches:
        candidate_targets(arch)  # validate early
    if kpack_disabled(env):
        lookups = tuple(
            Lookup(i, ref.key(i), None, None, False, "ROCM_KPACK_DISABLE is set")
            for i in ref.co_indices
        )
        return Resolution(binary, ref, arches, True, (), (), lookups)
    candidates = candidate_archives(ref, arches, env)
    archives = _open_candidates(candidates)
    lookups = tuple(_lookup(i, ref.key(i), arches, archives) for i in ref.co_indices)
    return Resolution(binary, ref, arches, False, candidates, archives, lookups)


# --- partial overlays ---------------------------------------------------------------------


@dataclass(frozen=True)
class VariantGap:
    """A target-variant archive lacking keys that the bare-target archive has."""

    variant_archive: Path
    variant_target: str
    bare_archive: Path
    bare_target: str
    missing: tuple[str, ...]


def check_variant_overlays(archives: Sequence[Path | ArchiveIndex]) -> tuple[VariantGap, ...]:
    """Report every variant archive (e.g. ``gfx942:xnack+``) missing keys of the bare one.

    Current runtimes try all matching archives, but older ones treat the first archive
    listing a target as authoritative, so such partial overlays break them.
    """
    indexes = [a if isinstance(a, ArchiveIndex) else index_archive(a) for a in archives]
    keys: dict[str, dict[Path, set[str]]] = {}
    for index in indexes:
        for key, target in index.entries:
            keys.setdefault(target, {}).setdefault(index.path, set()).add(key)
    gaps: list[VariantGap] = []
    for target in sorted(keys):
        bare = target.split(":", 1)[0]
        if bare == target or bare not in keys:
            continue
        for bare_path, bare_keys in sorted(keys[bare].items()):
            for var_path, var_keys in sorted(keys[target].items()):
                missing = tuple(sorted(bare_keys - var_keys))
                if missing:
                    gaps.append(VariantGap(var_path, target, bare_path, bare, missing))
    return tuple(gaps)
