"""Recombine split artifacts from several build shards into package groups (RFC0008's reduce).

Private to :mod:`kpack.split`. The map phase (:func:`kpack.split.split_artifact`, one
build job per shard) leaves ``SHARDS/<shard>/P_generic`` and ``SHARDS/<shard>/P_<arch>``.
A JSON config, the one rocm-kpack's ``recombine_artifacts`` reads, names the primary shard
and the groups::

    {"primary_shard": "gfx110X_build",
     "architecture_groups": {"gfx110X": {"display_name": "...",
                                         "architectures": ["gfx1100", "gfx1101"]}}}

For every prefix ``P`` this writes, as rocm-kpack does:

- ``P_generic``: the primary shard's ``P_generic``, its ``.kpack`` dirs left out;
- ``P_<group>`` for each group with at least one member arch found in any shard (the first
  shard in name order wins a duplicate): each member's ``<stage>/.kpack/*.kpack`` archives
  and the files whose name carries the arch (``TensileLibrary_gfx1100.dat``; a ``-`` in the
  arch may be spelled ``_``), its manifest the union of the members' stage dirs.

Everything is checked before anything is written; each prefix is then published with the
output-dir rule of :mod:`kpack.artifact.output` (its own record, so re-running for one
``--component`` leaves the others alone).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from kpack.artifact.names import read_manifest
from kpack.artifact.output import Staging, write_manifest
from kpack.common.jsonfile import load_json_object
from kpack.common.outputs import Owns
from kpack.common.safepath import Root, safe_component
from kpack.errors import ArtifactError, UsageError, shown_list

__all__ = [
    "ArchGroup",
    "RecombineConfig",
    "RecombineResult",
    "ShardArtifact",
    "collect_shards",
    "load_recombine_config",
    "recombine_artifacts",
]

log = logging.getLogger(__name__)

GENERIC = "generic"


@dataclass(frozen=True)
class ArchGroup:
    name: str
    display_name: str
    architectures: tuple[str, ...]


@dataclass(frozen=True)
class RecombineConfig:
    primary_shard: str
    groups: tuple[ArchGroup, ...]


@dataclass(frozen=True)
class ShardArtifact:
    shard: str
    path: Path
    prefix: str
    arch: str | None  # None: P_generic
    stages: tuple[str, ...]


@dataclass(frozen=True)
class RecombineResult:
    output_dir: Path
    outputs: tuple[Path, ...]  # published artifact dirs
    missing: tuple[str, ...]  # "P: group lacks arch" for every member found in no shard


def _group(config: Path, name: object, body: object) -> ArchGroup:
    where = f"architecture_groups.{name}"
    if not isinstance(body, dict):
        raise UsageError(f"{where} must be an object", path=config)
    arches = body.get("architectures")
    if not isinstance(arches, list) or not arches:
        raise UsageError(f"{where}.architectures must be a non-empty list", path=config)
    bad = [a for a in arches if not isinstance(a, str) or not a.startswith("gfx")]
    if bad:
        raise UsageError(f"{where}.architectures: {bad[0]!r} does not start with gfx", path=config)
    group = safe_component(name, what=f"group name {where}", source=config, error=UsageError)
    display = body.get("display_name", group)
    return ArchGroup(group, str(display), tuple(arches))


def load_recombine_config(path: Path) -> RecombineConfig:
    """The packaging config (see the module docstring); a :class:`UsageError` names the key."""
    data = load_json_object(path, error=UsageError)
    primary = data.get("primary_shard")
    if not isinstance(primary, str) or not primary:
        raise UsageError("primary_shard must be a non-empty string", path=path)
    groups = data.get("architecture_groups")
    if not isinstance(groups, dict) or not groups:
        raise UsageError("architecture_groups must be a non-empty object", path=path)
    return RecombineConfig(primary, tuple(_group(path, k, v) for k, v in groups.items()))


def _parse_name(name: str) -> tuple[str, str | None] | None:
    """``(prefix, arch)`` of ``P_generic`` (arch None) or ``P_gfx…``; None for other names."""
    if name.endswith(f"_{GENERIC}"):
        return name[: -len(GENERIC) - 1], None
    prefix, sep, arch = name.rpartition("_")
    return (prefix, arch) if sep and prefix and arch.startswith("gfx") else None


def collect_shards(shards_dir: Path) -> list[ShardArtifact]:
    """Every split artifact in every shard (dirs with a manifest and a parseable name)."""
    if not shards_dir.is_dir():
        raise UsageError("--input-shards-dir is not a directory", path=shards_dir)
    found = []
    for shard in sorted(p for p in shards_dir.iterdir() if p.is_dir() and not p.is_symlink()):
        for art in sorted(p for p in shard.iterdir() if p.is_dir() and not p.is_symlink()):
            parsed = _parse_name(art.name)
            if parsed is None or not (art / "artifact_manifest.txt").exists():
                log.info("skipping %s: not a split artifact", art)
                continue
            _, stages = read_manifest(art)
            found.append(ShardArtifact(shard.name, art, parsed[0], parsed[1], stages))
    return found


@dataclass(frozen=True)
class _Plan:
    prefix: str
    generic: ShardArtifact
    groups: tuple[tuple[ArchGroup, tuple[ShardArtifact, ...]], ...]


def _plans(
    found: Sequence[ShardArtifact], config: RecombineConfig, component: str | None
) -> tuple[list[_Plan], list[str]]:
    generic = {a.prefix: a for a in found if a.arch is None and a.shard == config.primary_shard}
    by_arch: dict[str, dict[str, ShardArtifact]] = {}
    for art in found:
        if art.arch is not None:
            by_arch.setdefault(art.prefix, {}).setdefault(art.arch, art)  # first shard wins
    prefixes = sorted(set(generic) | set(by_arch))
    if component is not None:
        if component not in prefixes:
            raise UsageError(
                f"--component {component!r} is not among the artifacts",
                problems=shown_list(prefixes),
            )
        prefixes = [component]
    lacking = [p for p in prefixes if p not in generic]
    if lacking:
        raise ArtifactError(
            f"no P_generic in the primary shard {config.primary_shard!r} for",
            problems=shown_list(lacking),
        )
    plans, missing = [], []
    for prefix in prefixes:
        arches = by_arch.get(prefix, {})
        groups = []
        for group in config.groups:
            members = tuple(arches[a] for a in group.architectures if a in arches)
            missing += [
                f"{prefix}: {group.name} lacks {a}" for a in group.architectures if a not in arches
            ]
            if members:
                groups.append((group, members))
        plans.append(_Plan(prefix, generic[prefix], tuple(groups)))
    return plans, missing


def _copy_generic(art: ShardArtifact, dest: Path) -> None:
    for stage in art.stages:
        source = art.path / stage
        if source.is_dir():
            shutil.copytree(
                source, dest / stage, symlinks=True, ignore=shutil.ignore_patterns(".kpack")
            )
    write_manifest(dest, art.stages)


def _arch_files(stage_dir: Path, arch: str) -> list[str]:
    """Stage-relative paths rocm-kpack carries into a group artifact for ``arch``: the
    ``.kpack/*.kpack`` archives and, outside ``.kpack`` dirs, files naming the arch."""
    spellings = {arch, arch.replace("-", "_")}
    out = []
    for dirpath, dirs, files in os.walk(stage_dir):
        rel_dir = PurePosixPath(Path(dirpath).relative_to(stage_dir).as_posix())
        if ".kpack" in rel_dir.parts:
            if rel_dir == PurePosixPath(".kpack"):
                out += [str(rel_dir / f) for f in files if f.endswith(".kpack")]
            dirs[:] = []
            continue
        out += [str(rel_dir / f) for f in files if any(s in f for s in spellings)]
    return sorted(out)


def _copy_member(art: ShardArtifact, root: Root, problems: list[str]) -> None:
    assert art.arch is not None
    for stage in art.stages:
        stage_dir = art.path / stage
        if not stage_dir.is_dir():
            continue
        root.mkdir(stage)
        for rel in _arch_files(stage_dir, art.arch):
            source = stage_dir / rel
            dest = root.join(f"{stage}/{rel}")
            if os.path.lexists(dest):
                problems.append(f"{stage}/{rel}: given by two member arches")
            elif source.is_symlink():
                root.symlink(f"{stage}/{rel}", os.readlink(source))
            else:
                shutil.copy2(source, root.mkdir_parent(f"{stage}/{rel}"))


def _write_group(members: Sequence[ShardArtifact], dest: Path) -> None:
    root = Root(dest, error=ArtifactError)
    problems: list[str] = []
    for art in members:
        _copy_member(art, root, problems)
    if problems:
        raise ArtifactError(
            "conflicting files in one group", path=dest, problems=shown_list(problems)
        )
    write_manifest(dest, {s for art in members for s in art.stages})


def _publish(plan: _Plan, output_dir: Path, force: bool, owns: Owns) -> list[Path]:
    record = output_dir / f".kpack-recombine-{plan.prefix}.json"
    staging = Staging(output_dir, force=force, record=record, owns=owns)
    names = [f"{plan.prefix}_{GENERIC}", *(f"{plan.prefix}_{g.name}" for g, _ in plan.groups)]
    with staging:
        staging.check_free(names)
        _copy_generic(plan.generic, staging.dir(names[0]))
        for name, (_, members) in zip(names[1:], plan.groups, strict=True):
            _write_group(members, staging.dir(name))
        return staging.publish(names)


def recombine_artifacts(
    shards_dir: Path,
    config: RecombineConfig,
    output_dir: Path,
    *,
    component: str | None = None,
    force: bool = False,
    owns: Owns = "recorded",
) -> RecombineResult:
    """Recombine (see the module docstring); one prefix only with ``component``."""
    shards_dir, output_dir = Path(shards_dir), Path(output_dir)
    if not (shards_dir / config.primary_shard).is_dir():
        raise UsageError(f"primary shard {config.primary_shard!r} not found", path=shards_dir)
    plans, missing = _plans(collect_shards(shards_dir), config, component)
    outputs: list[Path] = []
    for plan in plans:
        outputs += _publish(plan, output_dir, force, owns)
    return RecombineResult(output_dir, tuple(outputs), tuple(missing))
