"""How kernels become archives: the one pipeline of every split (private to :mod:`kpack.split`).

Every front-end hands :func:`plan_archives` its binaries' kernels — spooled by the fat-binary
runner (``kpack split-artifacts``, the wheel splitter) or described by planned transforms
(the package builder) — and its rule for where an archive goes, and gets one value back:

1. *group*: each kernel goes to the archive of its binary's group (an artifact: one group;
   a wheel: one per archive root) for its target;
2. *cut*: a target's kernels are cut in parts no reader refuses (:mod:`._parts`);
3. *name and place*: part *k* of target *t* is ``<prefix>_<t>.kpack`` (the first) or
   ``<prefix>-part<k>_<t>.kpack``; the front-end's placement rule says where it goes;
4. *retarget*: a binary with kernels in a part after the first must search every part it
   uses: its marker's search paths.

Nothing is read or written here; the front-ends transform again the binaries whose search
paths changed, and lay out (or write) the archives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, Protocol, TypeVar

from kpack.archive import DEFAULT_LEVEL, MAX_ARCHIVE_BYTES, Scheme
from kpack.common.frozen import frozen
from kpack.split._parts import PartKernel, cut_parts, part_group, part_search_paths

__all__ = [
    "ArchivePart",
    "ArchivePlan",
    "ArchiveSlot",
    "ArchiveSpec",
    "BinaryKernels",
    "Kernel",
    "plan_archives",
]


class Kernel(Protocol):
    """What the pipeline needs of one code object."""

    @property
    def index(self) -> int: ...  # the wrapper's index: key <kernel_name>#<index>
    @property
    def target(self) -> str: ...
    @property
    def triple(self) -> str: ...
    @property
    def original_size(self) -> int: ...


K = TypeVar("K", bound=Kernel)
P = TypeVar("P")


@frozen(kw_only=True)
class ArchiveSpec:
    """How a split's archives are made: named for ``prefix`` (``<prefix>_<target>.kpack``,
    the marker's ``<prefix>_@GFXARCH@.kpack``), stored with ``scheme`` at ``level``, none
    over ``limit`` bytes (smaller limits are for tests)."""

    prefix: str
    scheme: Scheme = "zstd-per-kernel"
    level: int = DEFAULT_LEVEL
    limit: int = MAX_ARCHIVE_BYTES

    @property
    def frame_level(self) -> int | None:
        """The level to spool kernels at (their archive frames), ``None``: as they are."""
        return self.level if self.scheme == "zstd-per-kernel" else None


@frozen(kw_only=True)
class BinaryKernels(Generic[K]):
    """One binary's kernels, as the pipeline sees them."""

    kernel_name: str  # its binary key without '#N'
    stage: str  # its kernels' source prefix (a stage dir; a wheel's archive root)
    depth: int  # directories its marker's search path climbs to the archives
    kernels: Sequence[K]
    group: str = ""  # binaries of one group share archives (the wheel splitter: the root)


@frozen(kw_only=True)
class ArchiveSlot:
    """One archive as the placement rule is asked about it."""

    group: str
    target: str
    part: int  # 0-based
    file_name: str  # <prefix>_<target>.kpack, <prefix>-part<k>_<target>.kpack
    stages: frozenset[str]  # stages of the group's binaries with kernels for the target


@frozen(kw_only=True)
class ArchivePart(Generic[K, P]):
    """One archive: where it goes and its kernels, ``(stage, kernel_name, kernel)``."""

    slot: ArchiveSlot
    place: P
    kernels: tuple[tuple[str, str, K], ...]


@frozen(kw_only=True)
class ArchivePlan(Generic[K, P]):
    """Every archive of a split, by group, target and part; and, per binary given (in that
    order), its marker's search paths when it has kernels in a part after the first."""

    archives: tuple[ArchivePart[K, P], ...]
    search_paths: tuple[tuple[str, ...] | None, ...]

    def kernel_stages(self) -> dict[str, set[str]]:
        """Per target, the stages of the binaries holding its kernels."""
        stages: dict[str, set[str]] = {}
        for archive in self.archives:
            stages.setdefault(archive.slot.target, set()).update(archive.slot.stages)
        return stages

    def parted(self) -> list[tuple[str, int]]:
        """``(target, parts)`` of every target cut in more than one part, by group."""
        counts: dict[tuple[str, str], int] = {}
        for archive in self.archives:
            key = (archive.slot.group, archive.slot.target)
            counts[key] = counts.get(key, 0) + 1
        return [(target, n) for (_, target), n in sorted(counts.items()) if n > 1]


def plan_archives(
    binaries: Sequence[BinaryKernels[K]], place: Callable[[ArchiveSlot], P], spec: ArchiveSpec
) -> ArchivePlan[K, P]:
    """Kernels → archives (see the module docstring). Raises
    :class:`~kpack.errors.ArchiveError` for a kernel no archive within the limit holds."""
    by_group: dict[tuple[str, str], list[tuple[int, K]]] = {}
    for number, binary in enumerate(binaries):
        for kernel in binary.kernels:
            by_group.setdefault((binary.group, kernel.target), []).append((number, kernel))
    archives: list[ArchivePart[K, P]] = []
    used: dict[int, set[int]] = {}
    for (group, target), kernels in sorted(by_group.items()):
        described = [_part_kernel(binaries[n], k) for n, k in kernels]
        cut = cut_parts(
            described, prefix=spec.prefix, target=target, scheme=spec.scheme, limit=spec.limit
        )
        parts: list[list[tuple[str, str, K]]] = [[] for _ in range(max(cut, default=0) + 1)]
        for (number, kernel), part in zip(kernels, cut, strict=True):
            binary = binaries[number]
            parts[part].append((binary.stage, binary.kernel_name, kernel))
            used.setdefault(number, set()).add(part)
        stages = frozenset(binaries[n].stage for n, _ in kernels)
        for part, entries in enumerate(parts):
            name = f"{part_group(spec.prefix, part)}_{target}.kpack"
            slot = ArchiveSlot(group=group, target=target, part=part, file_name=name, stages=stages)
            archives.append(ArchivePart(slot=slot, place=place(slot), kernels=tuple(entries)))
    search_paths = tuple(
        tuple(part_search_paths(b.depth, spec.prefix, used[n])) if used.get(n, {0}) - {0} else None
        for n, b in enumerate(binaries)
    )
    return ArchivePlan(archives=tuple(archives), search_paths=search_paths)


def _part_kernel(binary: BinaryKernels[K], kernel: K) -> PartKernel:
    """How the cut sees ``kernel``: its key, target, size and TOC metadata."""
    toc = {"target": kernel.triple, "source_prefix": binary.stage}
    key = f"{binary.kernel_name}#{kernel.index}"
    return PartKernel(key, kernel.target, kernel.original_size, toc)
