"""What a walk over offload bundles yields: bundles, their device code objects, and targets.

Private to :mod:`kpack.bundle`. A :class:`Bundle` holds :class:`CodeObject` values whose
bytes are at hand; an :class:`IndexedBundle` holds :class:`CodeObjectRef` values that only
say where each object lies, for a compressed bundle walked without keeping its decoded bytes.
A :data:`Sink` receives code objects as they are decoded. :func:`target_of` reads the target
id at the end of a bundle entry's triple.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable

from kpack.common.frozen import frozen
from kpack.errors import BundleError
from kpack.targets import is_target_id

Buffer = bytes | bytearray | memoryview | mmap.mmap


@frozen
class CodeObject:
    """One device code object of a bundle."""

    triple: str  # full bundle triple, e.g. 'hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+'
    target: str  # target id, e.g. 'gfx90a:xnack+'
    offset: int  # payload offset within the decoded bundle bytes
    size: int
    data: bytes | memoryview  # a zero-copy view for plain bundles


@frozen
class Bundle:
    """One bundle of a ``.hip_fatbin`` section: where it lies and its device code objects."""

    offset: int
    end: int  # exclusive
    compression: str | None  # None, 'zstd' or 'zlib'
    ccob_version: int | None
    code_objects: tuple[CodeObject, ...]  # host entries skipped


@frozen
class CodeObjectRef:
    """Where one device code object lies: ``data`` is a zero-copy view for a plain bundle and
    ``None`` inside a compressed one (read it with :func:`stream_code_objects`)."""

    triple: str
    target: str
    offset: int  # payload offset within the decoded bundle bytes
    size: int
    data: memoryview | None


@frozen
class IndexedBundle:
    """A bundle whose structure was checked in full, without keeping decoded bytes."""

    offset: int
    end: int
    compression: str | None
    ccob_version: int | None
    code_objects: tuple[CodeObjectRef, ...]


#: Called once per device code object: a ``write`` for its bytes, or ``None`` to skip it.
Sink = Callable[[CodeObjectRef], Callable[[bytes | memoryview], object] | None]
#: A :data:`Sink` that also learns the section offset of the bundle the object is in.
BundleSink = Callable[[int, CodeObjectRef], Callable[[bytes | memoryview], object] | None]


def target_or_none(triple: str) -> str | None:
    """The target id of a bundle triple, or ``None`` if it has none (see :func:`target_of`)."""
    if "--" in triple:
        target = triple.rpartition("--")[2]
    else:
        fields = triple.split("-")
        starts = [i for i, f in enumerate(fields) if f.startswith("gfx")]
        if not starts:
            return None
        target = "-".join(fields[starts[-1] :])
    return target if is_target_id(target) else None


def target_of(triple: str) -> str:
    """Target id of a bundle triple: the text after the last ``--``.

    Legacy single-dash triples (``hip-amdgcn-amd-amdhsa-gfx906``) are parsed too: the target
    starts at the last ``-`` field that begins with ``gfx``. A triple without a valid target
    id (see :func:`is_target_id`) is a :class:`BundleError`, never silently dropped.
    """
    target = target_or_none(triple)
    if target is None:
        raise BundleError(f"no valid target id in bundle triple {triple!r}")
    return target
