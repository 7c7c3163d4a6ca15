"""Archive parts (private to :mod:`kpack.split`): a target's kernels in more than one
archive when one archive would be larger than every reader loads.

HRX (libhrx's ``kpack.c``) reads a whole archive into memory and refuses one over 2 GiB;
the runtime finds archives only through the marker's search paths, ``@GFXARCH@`` replaced
by each compatible target string. So a target whose archive would pass the limit
(:data:`~kpack.archive.MAX_ARCHIVE_BYTES`) gets parts, named and found this way:

- part 1 is the archive as always, ``.kpack/<P>_<target>.kpack``; part *k* ≥ 2 is
  ``.kpack/<P>-part<k>_<target>.kpack`` beside it (the group ``<P>-part<k>`` in the usual
  ``<group>_<target>.kpack`` spelling, so the file name still ends in the exact target id);
- a host binary's marker lists its usual search path first, then, for each part *k* ≥ 2
  that holds any of its kernels for any target,
  ``'../' * depth + '.kpack/<P>-part<k>_@GFXARCH@.kpack'``.
  The runtime expands every path for every compatible target, skips files that do not
  exist (a part another target needs) and tries every archive listing the target
  (rocm-systems#9953; an older runtime that stops at the first one misses keys in later
  parts, which ``kpack resolve`` reports); :mod:`kpack.resolve` does the same.

The cut is made before anything is compressed, from each code object's worst-case stored
size (:func:`~kpack.archive.stored_bound`) plus its TOC entry: kernels in archive order
(binary key, then target), a new part whenever the next kernel would pass the limit. It is
therefore the same at every compression level, in every front-end of the split
(:mod:`._pipeline` cuts for all of them). An artifact whose archives all fit keeps one
archive per target and one search path per marker, byte for byte as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgpack

from kpack.archive import BLOB_ALIGNMENT, Scheme, stored_bound
from kpack.common.frozen import frozen
from kpack.errors import ArchiveError
from kpack.hipfmt import search_path

__all__ = ["PartKernel", "cut_parts", "part_group", "part_search_paths"]

_U32 = 4
_BLOB_ENTRY = 32  # scheme none: {offset: u64, size: u64} in the TOC's blobs array, at most


@frozen
class PartKernel:
    """What the cut needs of one kernel of a target's archive."""

    binary_key: str  # <kernel_name>#<index>
    target: str
    original_size: int
    metadata: Mapping[str, str] | None = None


def part_group(prefix: str, part: int) -> str:
    """The group spelling of part ``part`` (0-based): ``P`` for the first, ``P-part<k>``."""
    return prefix if part == 0 else f"{prefix}-part{part + 1}"


def part_search_paths(depth: int, prefix: str, parts: Sequence[int] | set[int]) -> list[str]:
    """A marker's search paths: the usual one first, then one per further part it uses."""
    return [search_path(depth, part_group(prefix, p)) for p in sorted({0, *parts})]


def _fixed_cost(prefix: str, target: str) -> int:
    """Header, ``num_kernels`` and the TOC's own fields (map headers, location) at most."""
    skeleton = {
        "format_version": 1,
        "group_name": prefix,
        "gfx_arch_family": target,
        "gfx_arches": [target],
        "toc": {},
        "compression_scheme": "zstd-per-kernel",
        "zstd_offset": BLOB_ALIGNMENT,
        "zstd_size": 1 << 40,
        "blobs": [],
    }
    return BLOB_ALIGNMENT + _U32 + len(msgpack.packb(skeleton, use_bin_type=True)) + 16


def _kernel_cost(kernel: PartKernel, scheme: Scheme) -> int:
    entry: dict[str, object] = {
        "type": "hsaco",
        "ordinal": 0xFFFFFFFF,
        "original_size": kernel.original_size,
    }
    if kernel.metadata is not None:
        entry["metadata"] = dict(kernel.metadata)
    toc = len(msgpack.packb({kernel.binary_key: {kernel.target: entry}}, use_bin_type=True))
    blob = _BLOB_ENTRY if scheme == "none" else _U32
    return stored_bound(kernel.original_size, scheme) + blob + toc


def cut_parts(
    kernels: Sequence[PartKernel], *, prefix: str, target: str, scheme: Scheme, limit: int
) -> list[int]:
    """The part (0-based) of each of one target's ``kernels``, in the order given.

    Raises :class:`ArchiveError` for a kernel that alone cannot fit in an archive."""
    order = sorted(range(len(kernels)), key=lambda i: (kernels[i].binary_key, kernels[i].target))
    fixed = _fixed_cost(prefix, target)
    parts = [0] * len(kernels)
    part, used = 0, fixed
    for i in order:
        cost = _kernel_cost(kernels[i], scheme)
        if fixed + cost > limit:
            raise ArchiveError(
                f"kernel {kernels[i].binary_key} ({target}) is {kernels[i].original_size} bytes: "
                f"no archive of at most {limit} bytes holds it, and no reader loads a larger one"
            )
        if used + cost > limit:
            part, used = part + 1, fixed
        parts[i] = part
        used += cost
    return parts
