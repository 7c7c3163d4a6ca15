"""Plan one artifact's split (private to :mod:`kpack.split`): options, prefix, the plan.

Everything here is a function of the scanned artifact and the options; nothing is
written. The plan says which entries go to ``P_generic``, which fat binaries are
transformed (and with which marker), which database files move to ``P_<base arch>``, and
where each target's archive goes (:meth:`SplitPlan.archive_place`, the one home of that
rule for ``kpack split-artifacts``, the wheel-less builder and anything else that splits).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from kpack.archive import DEFAULT_LEVEL, MAX_ARCHIVE_BYTES, SCHEMES, Scheme
from kpack.artifact.names import ArtifactId
from kpack.artifact.tree import Entry
from kpack.common.cli import default_jobs
from kpack.databases import Handler, base_arch
from kpack.errors import ArtifactError, UsageError
from kpack.generic_targets import generic_table
from kpack.hipfmt import search_path
from kpack.split._jobs import FatJob
from kpack.split._pipeline import ArchiveSlot, ArchiveSpec
from kpack.split._scan import ArtifactScan, DatabaseFile, kernel_name
from kpack.targets import is_isa_target

__all__ = [
    "GENERIC",
    "ArchivePlace",
    "SplitOptions",
    "SplitPlan",
    "check_prefix",
    "fat_jobs",
    "plan_split",
    "prefix_of",
]

log = logging.getLogger(__name__)

GENERIC = "generic"


@dataclass(frozen=True, kw_only=True)
class SplitOptions:
    """Validated settings shared by every artifact of one run."""

    handlers: tuple[Handler, ...] = ()
    gpu_targets: tuple[str, ...] | None = None
    scheme: Scheme = "zstd-per-kernel"
    level: int = DEFAULT_LEVEL
    jobs: int = field(default_factory=default_jobs)  # -j: the CPU count
    force: bool = False
    #: The largest archive written; a target's kernels beyond it go to further parts
    #: (:mod:`kpack.split._parts`). Smaller limits are for tests.
    max_archive_bytes: int = MAX_ARCHIVE_BYTES
    #: What a run may replace in the output dir (:data:`kpack.common.outputs.Owns`).
    owns: str = "recorded"

    def __post_init__(self) -> None:
        if not 1 <= self.max_archive_bytes <= MAX_ARCHIVE_BYTES:
            raise UsageError(
                f"the archive size limit must be 1..{MAX_ARCHIVE_BYTES}, got "
                f"{self.max_archive_bytes}"
            )
        if self.scheme not in SCHEMES:
            raise UsageError(f"unknown compression scheme {self.scheme!r}")
        if not 1 <= self.level <= 22:
            raise UsageError(f"compression level must be 1..22, got {self.level}")
        if self.jobs < 1:
            raise UsageError(f"jobs must be >= 1, got {self.jobs}")
        if self.gpu_targets is not None:
            bad = [t for t in self.gpu_targets if not is_isa_target(t)]
            if bad or not self.gpu_targets:
                raise UsageError(
                    "--gpu-targets needs gfx target ids (gfx942, gfx90a:xnack+); got "
                    + (", ".join(repr(t) for t in bad) or "an empty list")
                )

    def archive_spec(self, prefix: str) -> ArchiveSpec:
        """How this run's archives for ``prefix`` are made."""
        return ArchiveSpec(
            prefix=prefix, scheme=self.scheme, level=self.level, limit=self.max_archive_bytes
        )

    @property
    def kernel_scope(self) -> frozenset[str] | None:
        """Base targets whose kernels are kept: ``--gpu-targets`` plus the LLVM generic
        target of each (a gfx942 agent runs gfx9-4-generic code when it has no gfx942
        code object), or None for all."""
        if self.gpu_targets is None:
            return None
        table = generic_table()
        generics = (table.generic_of(t) for t in self.gpu_targets)
        return frozenset(base_arch(t) for t in self.gpu_targets) | {
            g for g in generics if g is not None
        }


def prefix_of(dirname: str) -> str:
    """``P`` of an artifact dir name: the name minus its last ``_`` field."""
    art = ArtifactId.parse(dirname)
    if art is None:
        raise UsageError(
            f"{dirname!r} is not an artifact dir name {{name}}_{{component}}_{{target}}; "
            "give --artifact-prefix"
        )
    return f"{art.name}_{art.component}"


def check_prefix(prefix: str) -> str:
    """``prefix`` if it is ``{name}_{component}``."""
    if ArtifactId.parse(f"{prefix}_{GENERIC}") is None:
        raise UsageError(f"artifact prefix {prefix!r} is not {{name}}_{{component}}")
    return prefix


@dataclass(frozen=True, kw_only=True)
class SplitPlan:
    """What to write for one artifact with prefix ``prefix``."""

    scan: ArtifactScan
    prefix: str
    generic: tuple[Entry, ...]  # written into P_generic (fat binaries excluded)
    fat: tuple[Entry, ...]  # transformed
    databases: tuple[DatabaseFile, ...]  # in scope, moved to P_<base arch>
    notes: tuple[str, ...]

    def out_name(self, target: str) -> str:
        return f"{self.prefix}_{target}"

    def output_stages(self, kernel_stages: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
        """Per target, the stage dirs its output ``P_<target>`` holds: those that gave it
        kernels (``kernel_stages``: target -> stages of the binaries holding its code
        objects) or database files."""
        stages: dict[str, set[str]] = {t: set(s) for t, s in kernel_stages.items()}
        for db in self.databases:
            stages.setdefault(db.match.base_arch, set()).add(db.entry.stage)
        return stages

    def archive_place(self, slot: ArchiveSlot) -> ArchivePlace:
        """Where an archive goes: in ``P_<target>``, in the first stage dir that contributed
        to that output (kernels or database files, :meth:`output_stages`), as
        ``.kpack/P_<target>.kpack`` — the file the host binaries' search path
        ``../…/.kpack/P_@GFXARCH@.kpack`` names once the stages are merged; a further part
        of a target split in parts, ``.kpack/P-part<k>_<target>.kpack``, beside it."""
        stages = self.output_stages({slot.target: slot.stages})[slot.target]
        return ArchivePlace(
            target=slot.target,
            artifact=self.out_name(slot.target),
            stage=min(stages),
            relpath=f".kpack/{slot.file_name}",
        )


@dataclass(frozen=True, kw_only=True)
class ArchivePlace:
    """Where one target's archive goes: ``artifact/stage/relpath``."""

    target: str
    artifact: str  # P_<target>
    stage: str  # the first stage dir that contributed to P_<target>
    relpath: str  # within the stage: .kpack/P_<target>.kpack

    @property
    def path(self) -> PurePosixPath:
        return PurePosixPath(self.artifact, self.stage, self.relpath)


def plan_split(scan: ArtifactScan, prefix: str, options: SplitOptions) -> SplitPlan:
    """The scan, with database files outside ``--gpu-targets`` dropped from both sides."""
    databases: list[DatabaseFile] = []
    for db in scan.databases:
        if db.match.in_scope(options.gpu_targets):
            databases.append(db)
        else:
            log.info("dropping %s: %s is outside --gpu-targets", db.kernel_name, db.match.base_arch)
    bad = [
        f"{db.kernel_name}: handler {db.match.handler.name!r} gives key "
        f"{db.match.base_arch!r}, but '{prefix}_{db.match.base_arch}' is not a valid "
        "artifact dir name"
        for db in databases
        if ArtifactId.parse(f"{prefix}_{db.match.base_arch}") is None
    ]
    if bad:
        raise ArtifactError("database files with unusable shard keys", path=scan.path, problems=bad)
    return SplitPlan(
        scan=scan,
        prefix=prefix,
        generic=scan.kept,
        fat=scan.fat,
        databases=tuple(databases),
        notes=scan.notes,
    )


def fat_jobs(
    plan: SplitPlan, generic_root: Path, spool_dir: Path, options: SplitOptions
) -> list[FatJob]:
    """One job per fat binary; the marker's search path climbs ``depth`` directories."""
    jobs: list[FatJob] = []
    for number, entry in enumerate(plan.fat):
        depth = entry.relpath.count("/")
        jobs.append(
            FatJob(
                stage=entry.stage,
                kernel_name=kernel_name(entry),
                source=entry.source,
                size=entry.size,
                depth=depth,
                search_path=search_path(depth, plan.prefix),
                spool=spool_dir / f"{number:05d}.spool",
                dest=generic_root / entry.stage / entry.relpath,
                mode=entry.mode,
                scope=options.kernel_scope,
                level=options.archive_spec(plan.prefix).frame_level,
            )
        )
    return jobs
