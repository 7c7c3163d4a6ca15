"""Archives laid out from spooled kernels and streamed from the spools.

Each target's archive is laid out from its spooled kernels (:class:`SpooledArchive`: the TOC
and every size known before a byte is written) and streamed from the memory-mapped spools,
once, to where it belongs: its file (``kpack split-artifacts``) or straight into the wheels
that ship it (the wheel splitter, the package builder). Resident memory stays at a chunk,
not a target's device code.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Hashable, Iterator, Sequence
from contextlib import suppress
from dataclasses import replace
from pathlib import Path

from kpack.archive import (
    KpackLayout,
    KpackSummary,
    StoredKernel,
    lay_out_kpack,
    write_chunks,
)
from kpack.common.frozen import frozen
from kpack.errors import ArchiveError
from kpack.split._pipeline import ArchiveSpec
from kpack.split._spool import PageDropper, SpooledKernel, mapped
from kpack.wheelfile import Generated

__all__ = [
    "ArchiveJob",
    "KernelEntry",
    "SpooledArchive",
    "content_keys",
    "lay_out_archive",
    "lay_out_archives",
    "remove_spools",
]

log = logging.getLogger(__name__)


@frozen
class SpooledArchive:
    """One target's archive, laid out from its spooled kernels and streamed from the spools
    on demand, as often as needed: into its file (``kpack split-artifacts``) or straight
    into the wheels that ship it (the wheel splitter, the package builder). Every kernel
    is stored as spooled: a zstd frame at the archive's level, or (scheme ``none``) the
    code object, from the spool or a view of the mapped input."""

    target: str
    path: Path  # where it is written, or what it is called inside a wheel
    layout: KpackLayout
    blobs: tuple[SpooledKernel, ...]  # per ordinal

    @property
    def size(self) -> int:
        return self.layout.size

    @property
    def kernel_count(self) -> int:
        return self.layout.kernel_count

    def summary(self) -> KpackSummary:
        return self.layout.summary(self.path)

    def source(self) -> Generated:
        """The archive as a member source for the wheel writer."""
        return Generated(self.size, self.chunks)

    def chunks(self) -> Iterator[bytes | memoryview]:
        """The archive's bytes. The spools are mapped for the walk and the pages it touched
        dropped after, so resident memory stays small whatever the archive's size."""
        spools = sorted({k.spool for k in self.blobs if k.view is None})
        dropper = PageDropper()
        with mapped(spools) as views:

            def blobs() -> Iterator[memoryview]:
                for k in self.blobs:
                    data = (
                        k.view
                        if k.view is not None
                        else views[k.spool][k.offset : k.offset + k.size]
                    )
                    yield data
                    dropper.add(data, k.size)

            yield from self.layout.chunks(blobs())
        dropper.drop()

    def write(self) -> KpackSummary:
        """Write the archive to :attr:`path` (a temporary sibling, then renamed)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_chunks(self.path, self.chunks())
        log.info(
            "wrote %s: %d kernels, %d -> %d bytes (%s)",
            self.path,
            self.kernel_count,
            self.layout.original_bytes,
            self.size,
            self.layout.scheme,
        )
        return self.summary()


def lay_out_archive(job: ArchiveJob, spec: ArchiveSpec) -> SpooledArchive:
    """Lay out ``job``'s archive from its spooled kernels (nothing is read or written);
    one larger than ``spec.limit`` is refused."""
    scheme, level = spec.scheme, spec.level
    stored: list[StoredKernel] = []
    for stage, name, k in job.entries:
        framed = k.level is not None and k.view is None
        if framed != (scheme != "none") or (framed and k.level != level):
            raise ArchiveError(
                f"kernel {name}#{k.index} ({k.target}) was spooled "
                f"{'as a zstd frame at level ' + str(k.level) if framed else 'uncompressed'}, "
                f"not as a {scheme} archive at level {level} stores it",
                path=job.path,
            )
        meta = {"target": k.triple, "source_prefix": stage}
        stored.append(StoredKernel(f"{name}#{k.index}", k.target, k.size, k.original_size, meta))
    contents = content_keys([k for _, _, k in job.entries])
    stored = [replace(s, content=c) for s, c in zip(stored, contents, strict=True)]
    layout = lay_out_kpack(
        stored,
        path=job.path,
        group_name=spec.prefix,
        gfx_arch_family=job.target,
        scheme=scheme,
        max_size=spec.limit,
    )
    return SpooledArchive(
        job.target, job.path, layout, tuple(job.entries[i][2] for i in layout.order)
    )


def content_keys(kernels: Sequence[SpooledKernel]) -> list[Hashable]:
    """What makes two kernels one stored blob (:attr:`StoredKernel.content`): wrappers
    pointing at one code object share its spool range; kernels stored as equal bytes from
    different places (one library shipped twice, the same code object linked into two
    binaries) share their bytes' digest. Only kernels whose stored and original sizes both
    collide are read and hashed, so a split without duplicates reads nothing more. Equal
    code objects are equal frames when spooled at one level; a frame compressed otherwise
    (another zstd build) is merely not shared."""
    where = [_place(k, i) for i, k in enumerate(kernels)]
    places: dict[tuple[int, int], set[Hashable]] = {}
    for k, place in zip(kernels, where, strict=True):
        places.setdefault((k.size, k.original_size), set()).add(place)
    digests: dict[Hashable, Hashable] = {}
    keys: list[Hashable] = []
    for k, place in zip(kernels, where, strict=True):
        if len(places[(k.size, k.original_size)]) == 1:
            keys.append(place)
            continue
        if place not in digests:
            digests[place] = ("sha256", k.size, k.original_size, _digest(k))
        keys.append(digests[place])
    return keys


def _place(k: SpooledKernel, index: int) -> Hashable:
    """Where ``k``'s stored bytes are: its spool range (a view: its own place)."""
    return (os.fspath(k.spool), k.offset, k.size) if k.view is None else ("view", index)


def _digest(k: SpooledKernel) -> bytes:
    digest = hashlib.sha256()
    if k.view is not None:
        digest.update(k.view)
        return digest.digest()
    with k.spool.open("rb") as f:
        f.seek(k.offset)
        left = k.size
        while left:
            chunk = f.read(min(left, 1 << 20))
            if not chunk:
                raise ArchiveError(
                    f"spool ends inside kernel #{k.index} ({k.target})", path=k.spool
                )
            digest.update(chunk)
            left -= len(chunk)
    return digest.digest()


def remove_spools(spools: Sequence[Path]) -> None:
    for path in spools:
        with suppress(FileNotFoundError):
            path.unlink()


KernelEntry = tuple[str, str, SpooledKernel]  # (stage or overlay root, kernel_name, kernel)


@frozen
class ArchiveJob:
    """One target's archive: where it goes and its kernels."""

    target: str
    path: Path
    entries: tuple[KernelEntry, ...]


def lay_out_archives(jobs: Sequence[ArchiveJob], spec: ArchiveSpec) -> list[SpooledArchive]:
    """Every archive of ``jobs``, laid out, in the order given."""
    return [lay_out_archive(j, spec) for j in jobs]
