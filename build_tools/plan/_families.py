"""Legacy mode: the GPU families a tree's artifacts carry, checked before anything is
written.

A legacy tree ships one ``rocm-sdk-libraries-<family>`` per family label of its artifacts
(``rand_lib_gfx110X-all``). With several families, the ``rocm`` selector installs the one
family the machine's GPU selects, as the runtime's ``candidate_target_families`` names them
for a processor ``gfx1100``: ``gfx110X-<suffix>``, ``gfx1100-<suffix>``, ``gfx1100`` itself
(suffixes ``all``, ``dgpu``, ``igpu``, ``dcgpu``) or its generic target. A label no GPU of
the family table selects (``gfx999X-bogus``, ``gfx999X-all``, ``gfx-debian12``) would ship a
package nobody gets; so would a family without the libraries the others ship.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

from kpack.errors import ArtifactError, UsageError
from kpack.generic_targets import generic_table
from kpack.targets import base_target

from ..artifacts import Catalog
from ..manifests import PackageKind
from ..targets import FamilyTable
from ._model import BuildPlan

__all__ = ["check_families_in_tree", "check_legacy_families", "selectable_by"]

#: The runtime's ``LEGACY_FAMILY_SUFFIXES`` (templates/common/_dist_info.py.j2).
LEGACY_FAMILY_SUFFIXES = ("-all", "-dgpu", "-igpu", "-dcgpu")


def selectable_by(label: str, processors: Collection[str]) -> tuple[str, ...]:
    """The processors among ``processors`` whose GPU selects the family ``label`` (its
    legacy names, itself with any features, or its LLVM generic target)."""
    base = base_target(label)
    generics = generic_table()
    return tuple(
        p
        for p in sorted(processors)
        if base in (p, generics.generic_of(p))
        or any(label in (p + s, p[:-1] + "X" + s) for s in LEGACY_FAMILY_SUFFIXES)
    )


def check_families_in_tree(
    linux: Sequence[str], windows: Sequence[str], families: Sequence[str], tree: Path
) -> None:
    """Each family a flag names must be one the tree has (a family the tree lacks would be
    dropped from the ``rocm`` sdist without a word)."""
    for flag, given in (("--linux-amdgpu-families", linux), ("--windows-amdgpu-families", windows)):
        missing = [f for f in given if f not in families]
        if missing:
            has = ", ".join(families) or "none"
            raise UsageError(
                f"{flag}: {', '.join(missing)} not in the artifact tree (its GPU families: {has})",
                path=tree,
            )


def check_legacy_families(plan: BuildPlan, catalog: Catalog, table: FamilyTable) -> None:
    """Several families: each label must be one a GPU of ``table`` selects, and every
    family must ship the same libraries (code built against the set needs them all). One
    error naming the artifact dirs of the labels no GPU selects, or the families and their
    differences."""
    families = plan.families
    if len(families) < 2:
        return
    _check_selectable(families, catalog, table)
    _check_same_libraries(plan, catalog.root)


def _check_selectable(families: Sequence[str], catalog: Catalog, table: FamilyTable) -> None:
    processors = {t for targets in table.families.values() for t in targets}
    lost = [f for f in families if not selectable_by(f, processors)]
    if not lost:
        return
    dirs = {f: sorted(a.id.dirname for a in catalog.artifacts if a.id.target == f) for f in lost}
    known = ", ".join(f for f in families if f not in lost)
    raise ArtifactError(
        f"GPU family labels no GPU can select next to {known}: {', '.join(lost)}; the rocm "
        "selector installs the family named for the GPU's target (gfx1100: gfx110X-all, "
        f"gfx110X-dgpu, gfx1100-dgpu, gfx1100), for the GPUs of {table.source}: rename these "
        "artifacts for one of its families (or give --targets-cmake), or build them apart",
        path=catalog.root,
        problems=[f"{f}: {', '.join(dirs[f])}" for f in lost],
    )


def _check_same_libraries(plan: BuildPlan, tree: Path) -> None:
    sonames = {f: set[str]() for f in plan.families}
    for pkg in plan.runtime:
        if pkg.spec.kind is PackageKind.LIBRARIES and pkg.family in sonames:
            sonames[pkg.family] = {
                f.elf.soname for f in pkg.layout.files.values() if f.elf and f.elf.soname
            }
    every = set.intersection(*sonames.values())
    extra = [f"{f}: {', '.join(sorted(s - every))}" for f, s in sonames.items() if s - every]
    if extra:
        raise ArtifactError(
            "GPU families ship different library sets (only some families have these)",
            path=tree,
            problems=extra,
        )
