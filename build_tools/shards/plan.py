"""A shard plan for a CI matrix: which builder arguments each shard runs and which
artifacts it reads (``build_python_packages.py --print-shards N``).

Made from the input directory's names and sizes alone (an archive's bytes are not read;
only ``therock_manifest.json`` is, for the mode), or from a listing of the archives
(``--artifact-listing``, :mod:`.listing`: a CI plan job lists the run's bucket and fetches
``base_lib_generic`` alone). A kpack-split tree whose per-target artifacts are already
split (``P_<isa>``, as TheRock's split writes them) is cut into one **common** shard
(``--only common``: core, libraries, devel, profiler and the ``rocm`` sdist, built once,
from every generic artifact) and up to N-1 **device** shards (``--only device --targets
…``: the device wheels of their targets). A device shard reads its targets' per-target
artifacts, ``base_lib_generic`` (the build's mode is in its ``therock_manifest.json``) and
the generic artifacts of the core and libraries packages: a device wheel's per-target ELF
files (MIOpen's per-arch kernels libraries, say) get their RPATHs from where the libraries
they need sit in those packages, and a device file may not overlay a libraries file. Every
shard is told the whole tree's targets (``--tree-targets``), which shape the shared
packages' metadata. Targets go to the device shards largest first, each to the shard with
the fewest bytes to read and write so far. Each shard lists its ``inputs`` (TheRock's
artifact names) and the ``files`` to fetch for them (archive file names, or directory
names).

Every other tree is one shard that builds everything, and when more were asked for the
plan says why (``reason``, also a notice on stderr): a legacy tree (each family's libraries
wheel and the rendered metadata of every package depend on all of the runtime packages), or
a kpack-split tree holding fat artifacts. Device code of fat artifacts is split while
packaging, so every shard would read every fat artifact (its targets are known only from
the code objects inside), and the builder spools every kernel in each shard whatever its
share: on the 2.1 GB fat release tree, three such shards each read the whole tree and the
slowest took 0.91x the one-machine build (``benchmarks/bench_release.py fat-shards``).
Splitting the fat artifacts first (``kpack split-artifacts``) gives a tree that shards.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kpack.artifact.inputs import find_inputs
from kpack.artifact.names import ArtifactId
from kpack.artifact.packed import ARCHIVE_SUFFIXES, PackedArtifact, unpack_artifact
from kpack.common.balance import balance
from kpack.common.jsonfile import load_json_object
from kpack.errors import ArtifactError, PackagingError
from kpack.owners import owner_table
from kpack.targets import is_isa_target, target_order

from ..manifests import PackageKind, PackageSpec, load_manifests
from .listing import read_listing

__all__ = ["FAT_REASON", "LEGACY_REASON", "PlannedShard", "plan_shards"]

BASE = "base_lib_generic"
_BASE_ID = ArtifactId("base", "lib", "generic")
_MANIFEST_INNER = "base/aux-overlay/stage/share/therock/therock_manifest.json"

LEGACY_REASON = (
    "a legacy tree: each family's libraries wheel and the metadata of every package depend "
    "on all of its artifacts"
)
FAT_REASON = (
    "a kpack-split tree of fat artifacts: every shard would read and split all of them; "
    "split them first (kpack split-artifacts) and plan the split tree"
)
_NO_MODE_REASON = f"the tree's mode is unknown: no {BASE} with a therock_manifest.json"


@dataclass(frozen=True, kw_only=True)
class PlannedShard:
    """One job of the matrix: ``args`` go after ``--artifact-dir IN --dest-dir OUT``;
    ``inputs`` are TheRock's artifact names it reads (all of them must be in IN), ``files``
    the entries of the tree (or listing) they are: what a job fetches into IN."""

    name: str
    args: tuple[str, ...]
    inputs: tuple[str, ...]
    files: tuple[str, ...]
    targets: tuple[str, ...]
    read_bytes: int
    write_bytes: int  # estimated: the bytes of what it packages
    reason: str = ""  # why the plan is this one shard though more were asked for

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "args": list(self.args),
            "inputs": list(self.inputs),
            "files": list(self.files),
            "targets": list(self.targets),
            "read_bytes": self.read_bytes,
            "write_bytes": self.write_bytes,
        }
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclass(frozen=True)
class _Input:
    id: ArtifactId
    size: int
    file: str  # the tree's entry (or the listing's archive) holding it


def plan_shards(
    root: Path, count: int, passed_on: Sequence[str], *, listing: Path | None = None
) -> list[PlannedShard]:
    """At most ``count`` shards for the tree at ``root`` (or the one ``listing`` lists,
    ``root`` then holding at least ``base_lib_generic``); ``passed_on``: the arguments
    every shard runs with (version, nonce, family flags...)."""
    if not root.is_dir():
        raise ArtifactError("artifact directory does not exist or is not a directory", path=root)
    inputs = _listed(listing) if listing is not None else _found(root)
    listed = {i.id.dirname for i in inputs}
    mode = _kpack_split(root) if BASE in listed else None
    if listing is not None and BASE in listed and mode is None:
        raise ArtifactError(
            f"--artifact-listing: the mode is read from {BASE}'s therock_manifest.json; put "
            f"{BASE} (its directory or archive) in --artifact-dir",
            path=root,
        )
    per_target = [i for i in inputs if i.id.target != "generic"]
    if count == 1:
        return [_one_shard(inputs, passed_on, "")]
    if mode is None:
        return [_one_shard(inputs, passed_on, _NO_MODE_REASON)]
    if not mode:
        return [_one_shard(inputs, passed_on, LEGACY_REASON)]
    if not per_target or any(not is_isa_target(i.id.target) for i in per_target):
        # fat artifacts (in P_generic, or named for a family): their targets come from
        # their code objects, and every shard would split all of them
        return [_one_shard(inputs, passed_on, FAT_REASON)]
    return _cut(inputs, count, passed_on)


def _found(root: Path) -> list[_Input]:
    dirs, archives, _ = find_inputs(root)
    inputs = [_Input(ArtifactId.parse(d.name), _dir_size(d), d.name) for d in dirs]  # type: ignore[arg-type]
    inputs += [_Input(a.id, a.size, a.path.name) for a in archives]
    return sorted(inputs, key=lambda i: i.id.dirname)


def _listed(listing: Path) -> list[_Input]:
    return [_Input(a.id, a.size, a.file) for a in read_listing(listing)]


def _one_shard(inputs: Sequence[_Input], passed_on: Sequence[str], reason: str) -> PlannedShard:
    size = sum(i.size for i in inputs)
    return PlannedShard(
        name="all",
        args=tuple(passed_on),
        inputs=tuple(i.id.dirname for i in inputs),
        files=tuple(i.file for i in inputs),
        targets=(),
        read_bytes=size,
        write_bytes=size,
        reason=reason,
    )


def _cut(inputs: Sequence[_Input], count: int, passed_on: Sequence[str]) -> list[PlannedShard]:
    owners = owner_table()
    generic = [i for i in inputs if i.id.target == "generic"]
    tree_targets = sorted(
        {i.id.target for i in inputs if i.id.target != "generic"}, key=target_order
    )
    by_owner: dict[str, list[_Input]] = {}
    for i in inputs:
        if i.id.target != "generic":
            by_owner.setdefault(owners.owner(i.id.target), []).append(i)
    shared = _device_shared(generic)
    tree_arg = ("--tree-targets", ",".join(tree_targets))
    common_size = sum(i.size for i in generic)
    common = PlannedShard(
        name="common",
        args=(*passed_on, "--only", "common", *tree_arg),
        inputs=tuple(i.id.dirname for i in generic),
        files=tuple(i.file for i in generic),
        targets=(),
        read_bytes=common_size,
        write_bytes=common_size,
    )
    groups = _balance(by_owner, count - 1, sum(i.size for i in shared))
    devices = []
    for n, owned in enumerate(groups, start=1):
        own = [i for t in owned for i in by_owner[t]]
        read = sorted([*shared, *own], key=lambda i: i.id.dirname)
        devices.append(
            PlannedShard(
                name=f"device-{n}",
                args=(*passed_on, "--only", "device", "--targets", ",".join(owned), *tree_arg),
                inputs=tuple(i.id.dirname for i in read),
                files=tuple(i.file for i in read),
                targets=tuple(owned),
                read_bytes=sum(i.size for i in read),
                write_bytes=sum(i.size for i in own),
            )
        )
    return [common, *devices]


def _balance(by_owner: dict[str, list[_Input]], shards: int, fixed: int) -> list[list[str]]:
    """Targets spread over at most ``shards`` device shards: largest first, each to the
    shard with the least to read and write so far (every shard also reads ``fixed``;
    :func:`kpack.common.balance.balance`)."""
    cost = {t: 2 * sum(i.size for i in ins) for t, ins in by_owner.items()}
    return balance(cost, shards, fixed=fixed)


def _device_shared(generic: Sequence[_Input]) -> list[_Input]:
    """The generic artifacts a device shard reads: ``base_lib_generic`` and what the core
    and libraries packages select (their layouts resolve the device files' RPATHs)."""
    specs = [
        s
        for s in load_manifests().for_mode(True).values()
        if s.kind in (PackageKind.CORE, PackageKind.LIBRARIES)
    ]
    return [i for i in generic if i.id.dirname == BASE or any(_selects(s, i.id) for s in specs)]


def _selects(spec: PackageSpec, art: ArtifactId) -> bool:
    return any(
        sel.applies(True)
        and art.name in sel.names
        and art.name not in sel.except_names
        and art.component in sel.components
        and "generic" in sel.targets
        for sel in spec.select
    )


def _kpack_split(root: Path) -> bool | None:
    """``flags.KPACK_SPLIT_ARTIFACTS`` of the tree, read from ``base_lib_generic`` in
    ``root`` (its directory, else its archive); None when it cannot be read here (the
    build itself then reports it)."""
    path = root / BASE / _MANIFEST_INNER
    if path.is_file():
        return _flag(path)
    for suffix in ARCHIVE_SUFFIXES:
        archive = root / f"{BASE}{suffix}"
        if archive.is_file():
            base = PackedArtifact(id=_BASE_ID, path=archive, size=archive.stat().st_size)
            with tempfile.TemporaryDirectory(prefix="print-shards-") as tmp:
                inner = unpack_artifact(base, Path(tmp)) / _MANIFEST_INNER
                return _flag(inner) if inner.is_file() else None
    return None


def _flag(path: Path) -> bool | None:
    try:
        flags = load_json_object(path, error=PackagingError).get("flags", {})
    except PackagingError:
        return None
    return isinstance(flags, dict) and flags.get("KPACK_SPLIT_ARTIFACTS") is True


def _dir_size(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            total += os.lstat(os.path.join(dirpath, name)).st_size
    return total
