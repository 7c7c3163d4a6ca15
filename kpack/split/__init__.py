"""Artifact splitter: fat artifacts -> host-only ``P_generic`` + per-target ``P_<target>``.

Spec: kpack.md §5 and artifact-tree.md §6. For an artifact with prefix ``P``:

- ``P_generic/<stage>/...``: everything except database files; every fat binary is
  transformed straight from the input (HIPK wrappers, ``.rocm_kpack_ref`` marker whose
  search path is ``'../' x depth + '.kpack/P_@GFXARCH@.kpack'``). Its manifest lists every
  processed stage dir.
- ``P_<target>/<first contributing stage>/.kpack/P_<target>.kpack``: one archive per full
  target id for the whole artifact, keys ``<stage>/<relpath>#<wrapper index>``. An archive
  that would pass what every reader loads (2 GiB, HRX) is cut in parts
  ``.kpack/P-part<k>_<target>.kpack`` beside it, and the markers of the binaries with kernels
  in them list those search paths too (the rule: :mod:`kpack.split._parts`).
- ``P_<base arch>/<stage>/<relpath>``: database files claimed by a handler.

Scan and classify first (a frozen value), then write everything under ``OUT/.partial-*``
and publish the finished dirs together. Inputs are never modified. A re-run into the same
``OUT`` replaces what the last run wrote (recorded in ``OUT/.kpack-split-P.json``) and
nothing else without ``force``.

The entry points, each with the values it takes and returns:

- :func:`split_artifact`, :func:`split_artifacts` (``kpack split-artifacts``), with
  :class:`SplitOptions`, returning :class:`SplitResult`, :class:`BatchResult`;
- :func:`split_fat`: fat binaries (:class:`FatJob`) split on the parallel runner with their
  kernels spooled and their archives (:class:`ArchiveSpec`) laid out, :class:`FatSplit`
  (the wheel splitter streams :class:`HostContent` and each :class:`SpooledArchive` into
  its wheels);
- :func:`plan_in_place` and :func:`spool_planned`: the split planned as values
  (:class:`PlannedSplit`) for the package builder, spooled when it applies its plan;
- :func:`recombine_artifacts` (with :func:`load_recombine_config`), the reduce phase:
  shards' split artifacts regrouped into package groups (:class:`RecombineResult`).

However the kernels arrive, they become archives by one function,
:func:`kpack.split._pipeline.plan_archives`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kpack.split._archives import SpooledArchive
    from kpack.split._artifacts import BatchResult, split_artifact, split_artifacts
    from kpack.split._fat import FatSplit, split_fat
    from kpack.split._inplan import PlannedSplit, plan_in_place, spool_planned
    from kpack.split._jobs import FatJob, HostContent
    from kpack.split._pipeline import ArchiveSpec
    from kpack.split._plan import SplitOptions
    from kpack.split._recombine import RecombineResult, load_recombine_config, recombine_artifacts
    from kpack.split._write import SplitResult
else:  # each tool imports the modules of what it uses (kpack.common.lazy)
    from kpack.common.lazy import lazy_face

    __getattr__, __dir__ = lazy_face(
        __name__,
        {
            "SpooledArchive": "_archives",
            "BatchResult": "_artifacts",
            "split_artifact": "_artifacts",
            "split_artifacts": "_artifacts",
            "FatSplit": "_fat",
            "split_fat": "_fat",
            "PlannedSplit": "_inplan",
            "plan_in_place": "_inplan",
            "spool_planned": "_inplan",
            "FatJob": "_jobs",
            "HostContent": "_jobs",
            "ArchiveSpec": "_pipeline",
            "SplitOptions": "_plan",
            "RecombineResult": "_recombine",
            "load_recombine_config": "_recombine",
            "recombine_artifacts": "_recombine",
            "SplitResult": "_write",
        },
    )

__all__ = [
    "ArchiveSpec",
    "BatchResult",
    "FatJob",
    "FatSplit",
    "HostContent",
    "PlannedSplit",
    "RecombineResult",
    "SplitOptions",
    "SplitResult",
    "SpooledArchive",
    "load_recombine_config",
    "plan_in_place",
    "recombine_artifacts",
    "split_artifact",
    "split_artifacts",
    "split_fat",
    "spool_planned",
]
