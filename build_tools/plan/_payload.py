"""What a runtime package ships, file by file, with the ELF edits planned for each.

Each laid-out file becomes a :class:`~build_tools.payload.PayloadFile`: a launcher stub, a
planned ``.kpack`` archive, the input (or its planned transform) as is, or an executable or
shared library whose RPATH is derived from where its dependencies land and edited.
The devel tarball plans its members with the same helpers.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from kpack.artifact.planned import PlannedArchive, PlannedContent, TransformedBinary
from kpack.elf import ElfEdit, ElfInfo, FileKind, check_rpath_edit, plan_rpath_edit
from kpack.errors import PackagingError
from kpack.transform import PlannedBinary, TransformPlan

from ..launcher import LauncherTemplate, compile_launcher
from ..payload import PayloadFile
from ._model import RuntimePackage
from ._rpath import derive_rpath

__all__ = [
    "EDITABLE",
    "launcher_for",
    "original_rpath",
    "plan_elf",
    "rpath_base",
    "runtime_payload",
    "shipped_content",
    "unedited",
]

log = logging.getLogger(__name__)

EDITABLE = (FileKind.EXECUTABLE, FileKind.SHARED_LIBRARY)


def plan_elf(
    arcname: str, source: Path | ElfEdit, rpath: tuple[str, ...], executable: bool
) -> PayloadFile:
    edit = plan_rpath_edit(source, rpath)
    if edit is None:
        return unedited(arcname, source, executable)
    for warning in check_rpath_edit(edit, rpath):
        log.info("%s (RPATH edit for %s): %s", source, arcname, warning)
    return PayloadFile.edited(arcname, edit, executable=executable)


def unedited(arcname: str, source: Path | ElfEdit | PlannedBinary, executable: bool) -> PayloadFile:
    if isinstance(source, Path):
        return PayloadFile.copy(arcname, source, executable=executable)
    return PayloadFile.edited(arcname, source, executable=executable)


def shipped_content(source: Path, planned: PlannedContent | None) -> Path | PlannedBinary:
    """What ships for a file: the input, or the planned transform of it."""
    if isinstance(planned, TransformedBinary):
        return planned.transform
    return source


def rpath_base(content: Path | PlannedBinary, arcname: str) -> Path | ElfEdit:
    """What an RPATH edit composes onto: the input, or the ELF transform's edit."""
    if isinstance(content, Path):
        return content
    if isinstance(content, TransformPlan):
        return content.edit
    raise PackagingError("a PE transform cannot take an RPATH edit", path=arcname)


def original_rpath(info: ElfInfo) -> tuple[str, ...]:
    return info.rpath if info.rpath is not None else (info.runpath or ())


def runtime_payload(
    pkg: RuntimePackage,
    search: Sequence[RuntimePackage],
    launcher: LauncherTemplate | None,
) -> list[PayloadFile]:
    own = pkg.files
    by_logical = {p.spec.logical: p for p in search}
    declared = [
        (by_logical[d.package].files, d.subdir)
        for d in pkg.spec.rpath_deps
        if d.package in by_logical
    ]
    search_files = [own] + [p.files for p in search if p is not pkg]
    out: list[PayloadFile] = []
    for relpath, laid in sorted(pkg.layout.files.items()):
        arcname = f"{pkg.platform}/{relpath}"
        if laid.launcher_target is not None:
            if launcher is None:
                raise PackagingError("launcher stub template missing", path=laid.origin)
            data = launcher.render(laid.launcher_target, origin=laid.origin)
            out.append(PayloadFile.literal(arcname, data, executable=True))
            continue
        if laid.source is None:
            raise PackagingError("planned file has no source", path=laid.origin)
        if isinstance(laid.planned, PlannedArchive):
            out.append(
                PayloadFile.planned_archive(
                    arcname, laid.planned.key, size=laid.planned.original_bytes
                )
            )
            continue
        content = shipped_content(laid.source, laid.planned)
        if laid.elf is not None and laid.elf.kind in EDITABLE:
            rpath = derive_rpath(
                relpath=relpath,
                own=own,
                original=original_rpath(laid.elf),
                needed=laid.elf.needed,
                declared=declared,
                search=search_files,
            )
            out.append(plan_elf(arcname, rpath_base(content, arcname), rpath, laid.executable))
        else:
            out.append(unedited(arcname, content, laid.executable))
    return out


def launcher_for(packages: Sequence[RuntimePackage]) -> LauncherTemplate | None:
    for pkg in packages:
        for laid in pkg.layout.files.values():
            if laid.launcher_target is not None:
                return compile_launcher(needed_by=laid.origin)
    return None
