"""The devel package's tree: its namespace and the members of its tarball.

The devel tarball holds the headers and tools of the selected artifacts and, for every
file a runtime package ships, a symlink into that package's platform directory (or the
soname alias the runtime layout made), so one tree resolves as a full ROCm install.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from kpack.artifact.planned import PlannedArchive
from kpack.elf import ElfInfo

from ..artifacts import Artifact, Catalog, EntryKind
from ..manifests import PackageSpec
from ..payload import PayloadFile, TarEntry, TarKind
from ._model import RuntimePackage
from ._namespace import Namespace, merge
from ._payload import (
    EDITABLE,
    original_rpath,
    plan_elf,
    rpath_base,
    shipped_content,
    unedited,
)
from ._rpath import PackageFiles, derive_rpath
from ._runtime import selected_targets

__all__ = ["devel_members", "devel_namespace"]


def devel_namespace(
    catalog: Catalog, spec: PackageSpec, family: str | None, runtime: Sequence[RuntimePackage]
) -> Namespace:
    populated = {e.artifact.name for p in runtime for e in p.namespace if e.artifact is not None}
    selected: list[Artifact] = []
    for sel in spec.select:
        if not sel.applies(catalog.kpack_split):
            continue
        names = set(sel.names)
        if sel.from_runtime_packages:
            names |= populated
        names -= set(sel.except_names)
        selected.extend(
            catalog.select(names, sel.components, selected_targets(sel.targets, family))
        )
    return merge(dict.fromkeys(selected))


def devel_members(
    ns: Namespace,
    runtime: Sequence[RuntimePackage],
    platform: str,
    elf: Mapping[Path, ElfInfo | None],
) -> list[TarEntry]:
    aliases: dict[str, str] = {}
    owner: dict[str, str] = {}
    for pkg in runtime:
        for relpath, soname in pkg.layout.aliases.items():
            aliases.setdefault(relpath, soname)
        for relpath in pkg.layout.files:
            owner.setdefault(relpath, pkg.platform)
    relpaths = sorted(set(ns.entries) | set(owner))
    devel_files = PackageFiles.of(platform, relpaths)
    members: list[TarEntry] = []
    for relpath in relpaths:
        arcname = f"{platform}/{relpath}"
        entry = ns.get(relpath)
        if entry is not None and entry.kind is EntryKind.DIR:
            members.append(TarEntry(TarKind.DIR, arcname_=arcname))
        elif relpath in aliases:
            members.append(TarEntry(TarKind.SYMLINK, arcname_=arcname, link=aliases[relpath]))
        elif relpath in owner:
            up = "../" * len(relpath.split("/"))
            link = f"{up}{owner[relpath]}/{relpath}"
            members.append(TarEntry(TarKind.SYMLINK, arcname_=arcname, link=link))
        elif entry is not None and entry.kind is EntryKind.SYMLINK:
            members.append(TarEntry(TarKind.SYMLINK, arcname_=arcname, link=entry.link or ""))
        elif entry is not None:
            info = elf.get(entry.source)
            executable = bool(entry.mode & 0o111)
            if info is not None and info.kind in EDITABLE:
                rpath = derive_rpath(
                    relpath=relpath,
                    own=devel_files,
                    original=original_rpath(info),
                    needed=info.needed,
                    declared=(),
                    search=(devel_files,),
                )
                content = shipped_content(entry.source, entry.planned)
                file = plan_elf(arcname, rpath_base(content, arcname), rpath, executable)
            elif isinstance(entry.planned, PlannedArchive):
                file = PayloadFile.planned_archive(
                    arcname, entry.planned.key, size=entry.planned.original_bytes
                )
            else:
                file = unedited(arcname, shipped_content(entry.source, entry.planned), executable)
            members.append(TarEntry(TarKind.FILE, file=file))
    return members
