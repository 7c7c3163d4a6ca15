"""Content that a plan holds but that does not exist on disk yet (a split inside the plan).

A fat artifact is split inside the package builder's plan: its host binaries ship as a
planned transform (a :class:`~kpack.transform.PlannedBinary`, streamed from the input into
the wheel; an ELF one's edit takes any RPATH edit composed on top), its device code as
planned ``.kpack`` archives that apply writes before the wheels. Artifact entries
(:mod:`kpack.artifact.tree`) carry these values; nothing here touches the disk.
"""

from __future__ import annotations

from dataclasses import field

from kpack.common.frozen import frozen
from kpack.transform import PlannedBinary

__all__ = ["PlannedArchive", "PlannedContent", "PlannedKernel", "TransformedBinary"]


@frozen
class TransformedBinary:
    """A host binary whose device code moves out: ship the verified transform's bytes (an
    ELF file, a Windows DLL or EXE)."""

    transform: PlannedBinary = field(repr=False)

    @property
    def size(self) -> int:
        return self.transform.size


@frozen(kw_only=True)
class PlannedKernel:
    """One code object of a planned archive, described (its bytes stay in the input until
    the archive is spooled): key ``<kernel_name>#<index>``."""

    stage: str
    kernel_name: str
    index: int  # the wrapper's index
    target: str
    triple: str
    original_size: int


@frozen
class PlannedArchive:
    """One ``<prefix>_<target>.kpack`` archive; ``key`` names it inside a build."""

    key: str
    prefix: str
    target: str
    kernels: tuple[PlannedKernel, ...] = field(repr=False)

    @property
    def original_bytes(self) -> int:
        return sum(k.original_size for k in self.kernels)


PlannedContent = TransformedBinary | PlannedArchive
