"""Kpack-split mode from fat artifacts: the split is part of the plan.

A kpack-split tree may arrive split (``P_generic`` host files plus ``P_<isa>`` archives,
as rocm-kpack's splitter writes them) or fat (``P_generic`` holding complete fat
binaries). A fat artifact is planned with the kpack engine (:mod:`kpack.split`'s scan and
plan, each binary's transform planned on its parallel runner) and replaced in the catalog by
the artifacts the split would write, as values: host binaries carry their planned
transform, archives their planned kernels, database files move to ``P_<base arch>``.
Nothing is written here: ``--dry-run`` prints :meth:`KpackSplitPlan.describe`, and apply
spools the kernels (:func:`spool_planned_archives`), then streams each archive and each
transformed binary once, straight into its wheel.

The reference packages every fat library into a device wheel and leaves the libraries
wheel empty; we split instead, and refuse a tree that mixes both forms for one artifact.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from kpack.archive import DEFAULT_LEVEL, Scheme
from kpack.artifact.names import ArtifactId
from kpack.artifact.planned import PlannedArchive
from kpack.databases import load_handlers
from kpack.errors import ArtifactError
from kpack.generic_targets import generic_table
from kpack.hipfmt import GFXARCH, identify
from kpack.resolve import read_kpack_ref
from kpack.split import PlannedSplit, SplitOptions, SpooledArchive, plan_in_place, spool_planned
from kpack.targets import is_isa_target

from .artifacts import Artifact, Catalog, EntryKind

__all__ = [
    "KpackSplitPlan",
    "check_archive_references",
    "plan_fat_splits",
    "spool_planned_archives",
]

log = logging.getLogger(__name__)

_SCHEME: Scheme = "zstd-per-kernel"
_LEVEL = DEFAULT_LEVEL


@dataclass(frozen=True)
class KpackSplitPlan:
    splits: tuple[PlannedSplit, ...]
    notices: tuple[str, ...] = ()  # one line each, for the user

    @property
    def archives(self) -> tuple[PlannedArchive, ...]:
        return tuple(a for s in self.splits for a in s.archives)

    def describe(self) -> list[str]:
        """The split plan as lines, for ``--dry-run``."""
        return [line for split in self.splits for line in split.describe()]


def _is_unsplit(artifact: Artifact) -> bool:
    """Named for a GPU family (TheRock's unsplit dist bundles, ``blas_lib_gfx94X-dcgpu``):
    in a kpack-split tree every target that is neither ``generic`` nor an ISA target id."""
    return artifact.id.target != "generic" and not is_isa_target(artifact.id.target)


def plan_fat_splits(
    catalog: Catalog,
    names: Sequence[str],
    split_databases: Mapping[str, Sequence[str]],
    *,
    families: Collection[str] | None = None,
    jobs: int = 2,
) -> tuple[Catalog, KpackSplitPlan]:
    """Plan the split of every artifact that needs it; return the catalog with each
    replaced by its outputs.

    Split: a generic artifact of ``names`` (the device packages' artifacts) that holds
    untransformed fat binaries or database files, and every family-named artifact
    (``P_gfx94X-dcgpu``, as TheRock writes unsplit components to ``artifacts-unsplit/``),
    whatever its name. A family-named artifact with nothing to split (its ``dev``, ``doc``
    or ``test`` component) is host content: it becomes ``P_generic``. The package set is
    the same whichever name the fat input carried. Any family label will do (the split
    goes by the code objects' own targets); one that ``families`` (the family table's
    labels) lacks gets one notice. An artifact holding pre-split archives must be named
    for an ISA target id. The fat binaries' transforms are planned on ``jobs`` processes.
    """
    _check_labels_of_archives(catalog)
    notices = _unknown_family_notices(catalog, families)
    _check_generic_targets(
        catalog.root, [(f"{a.id.dirname}: {a.id.target}", a.id.target) for a in catalog.artifacts]
    )
    wanted = set(names)
    candidates = [
        a
        for a in catalog.artifacts
        if _is_unsplit(a) or (a.id.target == "generic" and a.id.name in wanted)
    ]
    planned = plan_in_place(
        [(a, _options(split_databases.get(a.id.name, ()))) for a in candidates],
        fat_of=catalog.facts.fat,
        jobs=jobs,
    )
    splits: list[PlannedSplit] = []
    relabeled: dict[str, Artifact] = {}
    for artifact, split in zip(candidates, planned, strict=True):
        if split is None:
            if _is_unsplit(artifact):
                relabeled[artifact.id.dirname] = _as_generic(artifact)
            continue
        presplit = sorted(
            a.id.dirname
            for a in catalog.artifacts
            if (a.id.name, a.id.component) == (artifact.id.name, artifact.id.component)
            and is_isa_target(a.id.target)
        )
        if presplit:
            prefix = f"{artifact.id.name}_{artifact.id.component}"
            raise ArtifactError(
                f"holds unsplit fat binaries, but per-target artifacts for {prefix} exist too "
                f"({', '.join(presplit)}): the tree mixes split and unsplit forms",
                path=artifact.path,
            )
        splits.append(split)
    _check_generic_targets(
        catalog.root,
        (
            (f"{split.artifact.id.dirname}: holds code objects for {out.id.target}", out.id.target)
            for split in splits
            for out in split.outputs
        ),
    )
    if not splits and not relabeled:
        return catalog, KpackSplitPlan((), notices)
    replaced: dict[str, tuple[Artifact, ...]] = {k: (v,) for k, v in relabeled.items()}
    replaced.update({s.artifact.id.dirname: s.outputs for s in splits})
    artifacts: list[Artifact] = []
    for artifact in catalog.artifacts:
        artifacts.extend(replaced.get(artifact.id.dirname, (artifact,)))
    ordered = tuple(sorted(artifacts, key=lambda a: a.id.dirname))
    return replace(catalog, artifacts=ordered), KpackSplitPlan(tuple(splits), notices)


def _options(databases: Sequence[str]) -> SplitOptions:
    """The split's options for an artifact whose ``databases`` handlers apply."""
    return SplitOptions(handlers=tuple(load_handlers(databases)), scheme=_SCHEME, level=_LEVEL)


def _holds_archives(artifact: Artifact) -> bool:
    """Whether the artifact holds ``.kpack`` archives (by their bytes), as a pre-split
    per-target artifact does."""
    for entry in artifact.entries:
        if entry.kind is EntryKind.FILE and entry.relpath.endswith(".kpack"):
            with entry.source.open("rb") as handle:
                if identify(handle.read(24)) == "kpack":
                    return True
    return False


def _check_labels_of_archives(catalog: Catalog) -> None:
    """Pre-split archives belong to one ISA target: a family-style label there is a
    typo (``rand_lib_gfx9zz``), not a family to split."""
    wrong = sorted(a.id.dirname for a in catalog.artifacts if _is_unsplit(a) and _holds_archives(a))
    if wrong:
        raise ArtifactError(
            "artifacts holding pre-split .kpack archives must be named for an ISA target id "
            "(gfx942, gfx90a:xnack+, gfx9-4-generic)",
            path=catalog.root,
            problems=wrong,
        )


def _unknown_family_notices(catalog: Catalog, families: Collection[str] | None) -> tuple[str, ...]:
    """One line naming the family labels of unsplit artifacts that the family table lacks
    (none without a table)."""
    if families is None:
        return ()
    unknown: dict[str, list[str]] = {}
    for artifact in catalog.artifacts:
        if _is_unsplit(artifact) and artifact.id.target not in families:
            unknown.setdefault(artifact.id.target, []).append(artifact.id.dirname)
    if not unknown:
        return ()
    labels = ", ".join(
        f"{label} ({len(dirs)} artifacts)" for label, dirs in sorted(unknown.items())
    )
    return (
        f"GPU family labels the family table does not know: {labels}; kpack-split mode "
        "splits their fat binaries by the code objects' own targets",
    )


def _check_generic_targets(root: Path, named: Iterable[tuple[str, str]]) -> None:
    """Every LLVM generic target, named by an artifact or found in a fat binary, must be in
    the generic-target table: the device packages, extras and runtime fallback come from it.
    ``named``: (problem line, target) pairs."""
    table = generic_table()
    problems = [line for line, target in named if table.unknown_generic([target])]
    if problems:
        known = ", ".join(table.members)
        raise ArtifactError(
            f"generic targets that the generic-target table ({table.source}) does not list "
            f"(it lists {known})",
            path=root,
            problems=sorted(set(problems)),
        )


def _as_generic(artifact: Artifact) -> Artifact:
    generic = ArtifactId(artifact.id.name, artifact.id.component, "generic")
    entries = tuple(replace(e, artifact=generic) for e in artifact.entries)
    return Artifact(generic, artifact.path, artifact.stages, entries)


def spool_planned_archives(
    plan: KpackSplitPlan, spool_dir: Path, *, jobs: int
) -> dict[str, SpooledArchive]:
    """Every planned archive spooled below ``spool_dir`` and laid out, by key: they stream
    from the spools straight into their wheels, so ``spool_dir`` must outlive the wheels."""
    return spool_planned(plan.splits, spool_dir, jobs=jobs)


def check_archive_references(catalog: Catalog, names: Sequence[str]) -> None:
    """Every kpack search path of every transformed host binary must name archives that
    some per-target artifact of the tree provides (for at least one target)."""
    wanted = set(names)
    provided = {
        e.relpath
        for a in catalog.artifacts
        if a.id.target != "generic"
        for e in a.entries
        if e.kind is EntryKind.FILE
    }
    targets = catalog.targets
    problems: list[str] = []
    for artifact in catalog.artifacts:
        if artifact.id.target != "generic" or artifact.id.name not in wanted:
            continue
        for entry in artifact.entries:
            if entry.kind is not EntryKind.FILE or entry.planned is not None:
                continue  # a planned transform references its planned archives
            info = catalog.facts.fat(entry.source)  # ELF or PE
            if info is None or not info.already_transformed:
                continue
            ref = read_kpack_ref(entry.source)
            if ref is None:
                continue
            for search in ref.search_paths:
                pattern = posixpath.normpath(
                    posixpath.join(posixpath.dirname(entry.relpath), search)
                )
                if not any(pattern.replace(GFXARCH, t) in provided for t in targets):
                    problems.append(f"{entry.source}: no artifact provides {pattern}")
    if problems:
        raise ArtifactError(
            "host binaries reference kpack archives that no artifact provides",
            path=catalog.root,
            problems=problems,
        )
