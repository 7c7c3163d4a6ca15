"""A shard plan for a CI matrix: which builder arguments each shard runs and which
artifacts it reads (``build_python_packages.py --print-shards N``).

Made from the input directory's names and sizes alone (an archive's bytes are not read;
only ``therock_manifest.json`` is, for the mode). A kpack-split tree whose per-target
artifacts are already split (``P_<isa>``, as TheRock's split writes them) is cut into one
**common** shard (``--only common``: core, libraries, devel, profiler and the ``rocm``
sdist, built once, from every generic artifact) and up to N-1 **device** shards
(``--only device --targets …``: the device wheels of their targets). A device shard reads
its targets' per-target artifacts, ``base_lib_generic`` (the build's mode is in its
``therock_manifest.json``) and the generic artifacts of the core and libraries packages:
a device wheel's per-target ELF files (MIOpen's per-arch kernels libraries, say) get
their RPATHs from where the libraries they need sit in those packages, and a device file
may not overlay a libraries file. Every shard is told the whole tree's targets
(``--tree-targets``), which shape the shared packages' metadata. Targets go to the device
shards largest first, each to the shard with the fewest bytes to read and write so far.

Every other tree is one shard that builds everything: a legacy tree (each family's
libraries wheel and the rendered metadata of every package depend on all of the runtime
packages), or a kpack-split tree holding fat artifacts (its targets are known only from
the code objects inside).
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
from kpack.artifact.packed import PackedArtifact, unpack_artifact
from kpack.common.balance import balance
from kpack.common.jsonfile import load_json_object
from kpack.errors import ArtifactError, PackagingError
from kpack.owners import owner_table
from kpack.targets import is_isa_target, target_order

from ..manifests import PackageKind, PackageSpec, load_manifests

__all__ = ["PlannedShard", "plan_shards"]

BASE = "base_lib_generic"
_MANIFEST_INNER = "base/aux-overlay/stage/share/therock/therock_manifest.json"


@dataclass(frozen=True, kw_only=True)
class PlannedShard:
    """One job of the matrix: ``args`` go after ``--artifact-dir IN --dest-dir OUT``;
    ``inputs`` are TheRock's artifact names it reads (all of them must be in IN)."""

    name: str
    args: tuple[str, ...]
    inputs: tuple[str, ...]
    targets: tuple[str, ...]
    read_bytes: int
    write_bytes: int  # estimated: the bytes of what it packages

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "args": list(self.args),
            "inputs": list(self.inputs),
            "targets": list(self.targets),
            "read_bytes": self.read_bytes,
            "write_bytes": self.write_bytes,
        }


@dataclass(frozen=True)
class _Input:
    id: ArtifactId
    size: int


def plan_shards(root: Path, count: int, passed_on: Sequence[str]) -> list[PlannedShard]:
    """At most ``count`` shards for the tree at ``root``; ``passed_on``: the arguments
    every shard runs with (version, nonce, family flags...)."""
    if not root.is_dir():
        raise ArtifactError("artifact directory does not exist or is not a directory", path=root)
    dirs, archives, _ = find_inputs(root)
    inputs = [_Input(ArtifactId.parse(d.name), _dir_size(d)) for d in dirs]  # type: ignore[arg-type]
    inputs += [_Input(a.id, a.size) for a in archives]
    inputs.sort(key=lambda i: i.id.dirname)
    per_target = [i for i in inputs if i.id.target != "generic"]
    whole = _one_shard(inputs, passed_on)
    if count == 1 or not _kpack_split(root, archives) or not per_target:
        return [whole]
    if any(not is_isa_target(i.id.target) for i in per_target):
        return [whole]  # family-named fat artifacts: targets come from their code objects
    return _cut(inputs, count, passed_on)


def _one_shard(inputs: Sequence[_Input], passed_on: Sequence[str]) -> PlannedShard:
    size = sum(i.size for i in inputs)
    return PlannedShard(
        name="all",
        args=tuple(passed_on),
        inputs=tuple(i.id.dirname for i in inputs),
        targets=(),
        read_bytes=size,
        write_bytes=size,
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
        targets=(),
        read_bytes=common_size,
        write_bytes=common_size,
    )
    groups = _balance(by_owner, count - 1, sum(i.size for i in shared))
    devices = []
    for n, owned in enumerate(groups, start=1):
        own = [i for t in owned for i in by_owner[t]]
        read = [*shared, *own]
        devices.append(
            PlannedShard(
                name=f"device-{n}",
                args=(*passed_on, "--only", "device", "--targets", ",".join(owned), *tree_arg),
                inputs=tuple(sorted(i.id.dirname for i in read)),
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


def _kpack_split(root: Path, archives: Sequence[PackedArtifact]) -> bool:
    """``flags.KPACK_SPLIT_ARTIFACTS`` of the tree (False when it cannot be read here: the
    build itself then reports it)."""
    path = root / BASE / _MANIFEST_INNER
    if not path.is_file():
        base = next((a for a in archives if a.id.dirname == BASE), None)
        if base is None:
            return False
        with tempfile.TemporaryDirectory(prefix="print-shards-") as tmp:
            return _flag(unpack_artifact(base, Path(tmp)) / _MANIFEST_INNER)
    return _flag(path)


def _flag(path: Path) -> bool:
    try:
        flags = load_json_object(path, error=PackagingError).get("flags", {})
    except PackagingError:
        return False
    return isinstance(flags, dict) and flags.get("KPACK_SPLIT_ARTIFACTS") is True


def _dir_size(path: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            total += os.lstat(os.path.join(dirpath, name)).st_size
    return total
