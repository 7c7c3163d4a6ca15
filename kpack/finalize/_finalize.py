"""Finalize one extracted wheel into a value: its members, METADATA and name (no output yet).

Plan (:mod:`kpack.finalize._plan`), check the GPU targets, then apply: each ELF edit
(NEEDED names restored, search path set) is verified (:func:`kpack.elf.check_link_edit`)
and written into the work directory; every other member is the extracted file, its input
deflate stream reused. Members move from ``<name>-<old>.dist-info``/``.data`` to the new
version's directories; RECORD is the writer's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kpack.elf import check_link_edit, plan_needed_edit, plan_rpath_edit
from kpack.finalize._metadata import finalized_metadata, set_pins
from kpack.finalize._plan import ElfPlan, LibraryPlan, plan_libraries, plan_windows
from kpack.finalize._set import RocmSet
from kpack.finalize._targets import check_targets, embedded_targets
from kpack.finalize._version import finalized_version
from kpack.wheelfile import InputWheel, Member, Reuse

__all__ = ["FinalizedWheel", "finalize"]

log = logging.getLogger(__name__)

_REGENERATED = ("METADATA", "WHEEL", "RECORD", "RECORD.jws", "RECORD.p7s")


@dataclass(frozen=True, kw_only=True)
class FinalizedWheel:
    """What the finalized wheel holds, ready for the wheel writer."""

    name: str
    version: str
    tag: str
    build: str | None
    members: tuple[Member, ...]  # without METADATA, WHEEL and RECORD
    metadata: bytes
    wheel_info: bytes
    plan: LibraryPlan
    targets: frozenset[str]
    pins: tuple[str, ...]

    @property
    def dist_info(self) -> str:
        return f"{self.name}-{self.version}.dist-info"


def finalize(
    wheel: InputWheel, rocm: RocmSet, expected: tuple[str, ...], work: Path
) -> FinalizedWheel:
    """Finalize ``wheel`` (extracted) for the set ``rocm``; edited files go into ``work``."""
    version = finalized_version(wheel.version, rocm.version, wheel.path.name)
    plan = plan_libraries(wheel, rocm) if rocm.platform == "linux" else plan_windows(wheel, rocm)
    archives = [e.arcname for e in wheel.entries if e.arcname.endswith(".kpack")]
    targets = embedded_targets(wheel.root, plan.elves, archives)
    check_targets(targets, expected, wheel.path)
    edited = {e.arcname: _apply(wheel, e, work) for e in plan.edits}
    pins = set_pins(str(rocm.version), plan.links, rocm.core, rocm.libraries_dists)
    where = f"{wheel.path.name}: {wheel.dist_info}/METADATA"
    metadata = finalized_metadata(wheel.metadata, version, pins, where)
    moved = _mover(wheel, f"{wheel.name}-{version}")
    removed = set(plan.removed) | {f"{wheel.dist_info}/{n}" for n in _REGENERATED}
    members = []
    for entry in wheel.entries:
        if entry.arcname in removed:
            continue
        source = edited.get(entry.arcname, wheel.root / entry.arcname)
        reuse = (
            Reuse.unchanged(entry.stream) if entry.stream and entry.arcname not in edited else None
        )
        members.append(
            Member(moved(entry.arcname), source, executable=entry.executable, reuse=reuse)
        )
    return FinalizedWheel(
        name=wheel.name,
        version=version,
        tag=wheel.tag,
        build=wheel.build,
        members=tuple(members),
        metadata=metadata,
        wheel_info=wheel.wheel_info,
        plan=plan,
        targets=frozenset(targets),
        pins=tuple(pins),
    )


def _mover(wheel: InputWheel, stem: str) -> Callable[[str], str]:
    old_info, old_data = wheel.dist_info + "/", wheel.data_dir + "/"

    def moved(arcname: str) -> str:
        if arcname.startswith(old_info):
            return f"{stem}.dist-info/{arcname[len(old_info) :]}"
        if arcname.startswith(old_data):
            return f"{stem}.data/{arcname[len(old_data) :]}"
        return arcname

    return moved


def _apply(wheel: InputWheel, plan: ElfPlan, work: Path) -> Path:
    """Write the edited file into ``work`` (after verifying the edit) and return its path."""
    source = wheel.root / plan.arcname
    renamed = plan_needed_edit(source, plan.renames) if plan.renames else None
    edit = plan_rpath_edit(renamed or source, plan.search, tag=plan.tag)
    edit = edit or renamed
    dest = work / plan.arcname
    if edit is None:
        return source
    check_link_edit(edit, needed=plan.needed, search=plan.search, tag=plan.tag)
    dest.parent.mkdir(parents=True, exist_ok=True)
    edit.write_to(dest)
    if plan.dropped:
        log.info("%s: search path entries dropped: %s", plan.arcname, ", ".join(plan.dropped))
    return dest
