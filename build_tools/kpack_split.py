"""Kpack-split mode from fat artifacts: the split is part of the plan.

A kpack-split tree may arrive split (``P_generic`` host files plus ``P_<isa>`` archives,
as rocm-kpack's splitter writes them) or fat (``P_generic`` holding complete fat
binaries). A fat artifact is planned with the kpack engine (:mod:`kpack.split`'s scan and
plan, :func:`kpack.transform.plan_transform` per binary) and replaced in the catalog by
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
from pathlib import Path, PurePosixPath

from kpack.archive import Scheme
from kpack.artifact.facts import FactsTable
from kpack.artifact.names import ArtifactId
from kpack.artifact.planned import PlannedArchive, PlannedKernel, TransformedBinary
from kpack.databases import load_handlers
from kpack.errors import ArtifactError
from kpack.generic_targets import generic_table
from kpack.hipfmt import GFXARCH, search_path
from kpack.resolve import read_kpack_ref
from kpack.split import (
    ArchiveJob,
    KernelEntry,
    Kind,
    SplitOptions,
    SplitPlan,
    SpooledArchive,
    StageEntry,
    classify_entries,
    frame_level,
    lay_out_archives,
    plan_split,
    spool_kernels,
)
from kpack.targets import is_isa_target
from kpack.transform import plan_host_transform

from .artifacts import Artifact, Catalog, Entry, EntryKind

__all__ = [
    "FatSplit",
    "KpackSplitPlan",
    "check_archive_references",
    "plan_fat_splits",
    "spool_planned_archives",
]

log = logging.getLogger(__name__)

_SCHEME: Scheme = "zstd-per-kernel"
_LEVEL = 3
_KINDS = {Kind.DIR: EntryKind.DIR, Kind.SYMLINK: EntryKind.SYMLINK}


@dataclass(frozen=True)
class FatSplit:
    """One fat artifact and what its split produces."""

    artifact: Artifact
    plan: SplitPlan
    transformed: tuple[tuple[StageEntry, TransformedBinary], ...]
    archives: tuple[PlannedArchive, ...]
    outputs: tuple[Artifact, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class KpackSplitPlan:
    splits: tuple[FatSplit, ...]

    @property
    def archives(self) -> tuple[PlannedArchive, ...]:
        return tuple(a for s in self.splits for a in s.archives)

    def describe(self) -> list[str]:
        """The split plan as lines, for ``--dry-run``."""
        lines = []
        for split in self.splits:
            host = sum(t.size for _, t in split.transformed)
            before = sum(e.size for e, _ in split.transformed)
            lines.append(
                f"split {split.artifact.id.dirname}: {len(split.transformed)} fat binaries "
                f"({before / 1e6:.1f} MB -> {host / 1e6:.1f} MB host code), "
                f"{len(split.archives)} archives, {len(split.plan.databases)} database files"
            )
            for archive in split.archives:
                lines.append(
                    f"  {archive.key}: {len(archive.kernels)} kernels, "
                    f"{archive.original_bytes / 1e6:.1f} MB before compression"
                )
            for db in split.plan.databases:
                lines.append(
                    f"  {db.entry.kernel_name} -> {split.plan.out_name(db.match.base_arch)}"
                )
            lines += [f"  note: {n}" for n in split.notes]
        return lines


def _entry(art: ArtifactId, stage_entry: StageEntry, **changes: object) -> Entry:
    entry = Entry(
        relpath=stage_entry.relpath,
        kind=_KINDS.get(stage_entry.kind, EntryKind.FILE),
        source=stage_entry.source,
        artifact=art,
        stage=stage_entry.stage,
        link=stage_entry.link,
        size=stage_entry.size,
        mode=stage_entry.mode,
    )
    return replace(entry, **changes) if changes else entry  # type: ignore[arg-type]


def _dirs(art: ArtifactId, stage: str, relpath: str, source: Path) -> list[Entry]:
    """Directory entries for the parents of ``relpath`` (as a scan of the output finds)."""
    parents = list(PurePosixPath(relpath).parents)[:-1]
    return [
        Entry(
            relpath=str(p), kind=EntryKind.DIR, source=source, artifact=art, stage=stage, mode=0o755
        )
        for p in reversed(parents)
    ]


def _plan_one(artifact: Artifact, options: SplitOptions, facts: FactsTable) -> FatSplit | None:
    """The split of one artifact, or ``None`` if it has nothing to split."""
    scan = classify_entries(
        artifact.path, artifact.stages, artifact.entries, options.handlers,
        fat_of=facts.fat,
    )  # fmt: skip
    prefix = f"{artifact.id.name}_{artifact.id.component}"
    plan = plan_split(scan, prefix, options)
    if not plan.fat and not plan.databases:
        return None
    generic = ArtifactId(artifact.id.name, artifact.id.component, "generic")
    entries: list[Entry] = [_entry(generic, e) for e in plan.generic]
    transformed: list[tuple[StageEntry, TransformedBinary]] = []
    kernels: dict[str, list[PlannedKernel]] = {}
    for fat in plan.fat:
        search = search_path(fat.depth, prefix)
        transform = plan_host_transform(
            fat.source, kernel_name=fat.kernel_name, search_paths=[search]
        )
        content = TransformedBinary(transform)
        transformed.append((fat, content))
        entries.append(_entry(generic, fat, size=content.size, planned=content))
        for kernel in transform.kernels:
            kernels.setdefault(kernel.target, []).append(
                PlannedKernel(fat.stage, fat.kernel_name, kernel)
            )
    contributors = plan.output_stages({t: {k.stage for k in p} for t, p in kernels.items()})
    by_target: dict[str, list[Entry]] = {}
    archives: list[PlannedArchive] = []
    for target in sorted(kernels):
        place = plan.archive_place(target, contributors[target])
        stage, relpath, key = place.stage, place.relpath, str(place.path)
        by_key = sorted(kernels[target], key=lambda k: (k.kernel_name, k.kernel.index))
        archive = PlannedArchive(key, prefix, target, tuple(by_key))
        archives.append(archive)
        art = ArtifactId(artifact.id.name, artifact.id.component, target)
        source = artifact.path / stage / relpath  # a label only: the file is planned
        by_target.setdefault(target, []).extend(
            [
                *_dirs(art, stage, relpath, source),
                Entry(
                    relpath=relpath,
                    kind=EntryKind.FILE,
                    source=source,
                    artifact=art,
                    stage=stage,
                    size=archive.original_bytes,
                    planned=archive,
                ),
            ]
        )
    for db in plan.databases:
        art = ArtifactId(artifact.id.name, artifact.id.component, db.match.base_arch)
        by_target.setdefault(db.match.base_arch, []).extend(
            [*_dirs(art, db.entry.stage, db.entry.relpath, db.entry.source), _entry(art, db.entry)]
        )
    outputs = [Artifact(generic, artifact.path, scan.stages, tuple(entries))]
    for target, target_entries in sorted(by_target.items()):
        unique = {(e.stage, e.relpath): e for e in target_entries}
        art = ArtifactId(artifact.id.name, artifact.id.component, target)
        stages = tuple(sorted(contributors[target]))
        ordered = tuple(sorted(unique.values(), key=lambda e: (e.stage, e.relpath)))
        outputs.append(Artifact(art, artifact.path, stages, ordered))
    notes = tuple(plan.notes) + tuple(
        f"{fat.kernel_name}: {note}" for fat, t in transformed for note in t.transform.notes
    )
    return FatSplit(artifact, plan, tuple(transformed), tuple(archives), tuple(outputs), notes)


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
) -> tuple[Catalog, KpackSplitPlan]:
    """Plan the split of every artifact that needs it; return the catalog with each
    replaced by its outputs.

    Split: a generic artifact of ``names`` (the device packages' artifacts) that holds
    untransformed fat binaries or database files, and every family-named artifact
    (``P_gfx94X-dcgpu``, as TheRock writes unsplit components to ``artifacts-unsplit/``),
    whatever its name. A family-named artifact with nothing to split (its ``dev``, ``doc``
    or ``test`` component) is host content: it becomes ``P_generic``. The package set is
    the same whichever name the fat input carried. With ``families`` (the family table's
    labels), a target that is neither an ISA target id nor one of them is an error.
    """
    if families is not None:
        unknown = sorted(
            a.id.dirname
            for a in catalog.artifacts
            if _is_unsplit(a) and a.id.target not in families
        )
        if unknown:
            raise ArtifactError(
                "artifact targets that are neither an ISA target id (gfx942, gfx90a:xnack+) "
                "nor a GPU family of the family table",
                path=catalog.root,
                problems=unknown,
            )
    _check_generic_targets(
        catalog.root, [(f"{a.id.dirname}: {a.id.target}", a.id.target) for a in catalog.artifacts]
    )
    wanted = set(names)
    splits: list[FatSplit] = []
    relabeled: dict[str, Artifact] = {}
    for artifact in catalog.artifacts:
        unsplit = _is_unsplit(artifact)
        if not unsplit and (artifact.id.target != "generic" or artifact.id.name not in wanted):
            continue
        handlers = load_handlers(split_databases.get(artifact.id.name, ()))
        options = SplitOptions(tuple(handlers), scheme=_SCHEME, level=_LEVEL)
        split = _plan_one(artifact, options, catalog.facts)
        if split is None:
            if unsplit:
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
        return catalog, KpackSplitPlan(())
    replaced: dict[str, tuple[Artifact, ...]] = {k: (v,) for k, v in relabeled.items()}
    replaced.update({s.artifact.id.dirname: s.outputs for s in splits})
    artifacts: list[Artifact] = []
    for artifact in catalog.artifacts:
        artifacts.extend(replaced.get(artifact.id.dirname, (artifact,)))
    ordered = tuple(sorted(artifacts, key=lambda a: a.id.dirname))
    return replace(catalog, artifacts=ordered), KpackSplitPlan(tuple(splits))


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
    """Spool every planned archive's kernels below ``spool_dir`` (each kernel as its
    archive frame, a compressed bundle decoded once, as a stream) and lay the archives
    out, by key. They stream from the spools straight into their wheels, never written
    as files of their own: ``spool_dir`` must outlive the wheels."""
    laid: dict[str, SpooledArchive] = {}
    level = frame_level(_SCHEME, _LEVEL)
    for number, split in enumerate(plan.splits):
        if not split.archives:
            continue
        spooled: dict[tuple[str, int, str], KernelEntry] = {}
        for index, (fat, content) in enumerate(split.transformed):
            spool = spool_dir / f"{number:04d}-{index:05d}.spool"
            kernels = content.transform.kernels
            written = spool_kernels(kernels, spool, keep_views=True, level=level, threads=jobs)
            for kernel, sk in zip(kernels, written, strict=True):
                spooled[(fat.kernel_name, kernel.index, kernel.target)] = (
                    fat.stage,
                    fat.kernel_name,
                    sk,
                )
        archive_jobs = [
            ArchiveJob(
                archive.target,
                Path(archive.key),
                tuple(
                    spooled[(k.kernel_name, k.kernel.index, k.kernel.target)]
                    for k in archive.kernels
                ),
            )
            for archive in split.archives
        ]
        for archive in lay_out_archives(
            archive_jobs, prefix=split.plan.prefix, scheme=_SCHEME, level=_LEVEL
        ):
            laid[str(archive.path)] = archive
            log.info(
                "%s: %d kernels, %d bytes", archive.path.name, archive.kernel_count, archive.size
            )
    return laid


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
