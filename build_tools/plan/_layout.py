"""Runtime wheels contain no symlinks: the re-layout rules of ``packages.md`` §6.

Pure function of a namespace and the ELF facts of its files. The result says, for each
install relpath, which bytes ship there (a copy of a file, or a launcher stub for a
link to an executable) and which relpaths are mere SONAME aliases (for devel).
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kpack.artifact.planned import PlannedContent
from kpack.elf import ElfInfo, FileKind

from ..artifacts import Entry, EntryKind
from ._namespace import Namespace

__all__ = ["LaidOutFile", "RuntimeLayout", "layout_device", "layout_runtime"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class LaidOutFile:
    """What ships at one relpath of a runtime package."""

    relpath: str
    source: Path | None  # the file whose bytes ship (None for a launcher stub)
    executable: bool
    elf: ElfInfo | None
    launcher_target: str | None = None  # raw readlink text, for a launcher stub
    origin: str = ""  # where it came from, for messages
    planned: PlannedContent | None = None  # content made by this build (kpack-split mode)


@dataclass(frozen=True)
class RuntimeLayout:
    files: Mapping[str, LaidOutFile]
    aliases: Mapping[str, str]  # relpath -> SONAME it stands for
    warnings: tuple[str, ...]


def _copy(relpath: str, target: Entry, elf: ElfInfo | None, origin: Entry) -> LaidOutFile:
    return LaidOutFile(
        relpath=relpath,
        source=target.source,
        executable=bool(target.mode & 0o111),
        elf=elf,
        origin=origin.origin,
        planned=target.planned,
    )


def layout_runtime(ns: Namespace, elf: Mapping[Path, ElfInfo | None]) -> RuntimeLayout:
    files: dict[str, LaidOutFile] = {}
    aliases: dict[str, str] = {}
    alias_sources: dict[str, tuple[Entry, Entry]] = {}
    warnings: list[str] = []
    for entry in ns:
        if entry.kind is EntryKind.DIR:
            continue
        target = entry if entry.kind is EntryKind.FILE else ns.resolve(entry.relpath)
        if target is None:
            warnings.append(
                f"dropping dangling symlink {entry.relpath} -> {entry.link} ({entry.source})"
            )
            continue
        if target.kind is EntryKind.DIR:
            log.debug("dropping directory symlink %s", entry.relpath)
            continue
        info = elf.get(target.source)
        name = posixpath.basename(entry.relpath)
        if info is not None and info.kind is FileKind.SHARED_LIBRARY and info.soname:
            if name == info.soname:
                files[entry.relpath] = _copy(entry.relpath, target, info, entry)
            else:
                aliases[entry.relpath] = info.soname
                alias_sources.setdefault(entry.relpath, (target, entry))
        elif (
            entry.kind is EntryKind.SYMLINK
            and info is not None
            and info.kind is FileKind.EXECUTABLE
        ):
            files[entry.relpath] = LaidOutFile(
                relpath=entry.relpath,
                source=None,
                executable=True,
                elf=None,
                launcher_target=entry.link,
                origin=entry.origin,
            )
        else:
            files[entry.relpath] = _copy(entry.relpath, target, info, entry)
    for relpath, soname in sorted(aliases.items()):
        soname_path = posixpath.join(posixpath.dirname(relpath), soname)
        if soname_path in files:
            continue
        target, origin = alias_sources[relpath]
        warnings.append(
            f"no entry is named by the SONAME {soname!r} of {relpath}; shipping it as {soname_path}"
        )
        files[soname_path] = _copy(soname_path, target, elf.get(target.source), origin)
    for text in warnings:
        log.warning("%s", text)
    return RuntimeLayout(files=files, aliases=aliases, warnings=tuple(warnings))


def layout_device(ns: Namespace, elf: Mapping[Path, ElfInfo | None]) -> RuntimeLayout:
    """Device wheels: every file at its relpath, symlinks resolved to copies (§3)."""
    files: dict[str, LaidOutFile] = {}
    warnings: list[str] = []
    for entry in ns:
        if entry.kind is EntryKind.DIR:
            continue
        target = entry if entry.kind is EntryKind.FILE else ns.resolve(entry.relpath)
        if target is None:
            warnings.append(f"dropping dangling symlink {entry.relpath} ({entry.source})")
            continue
        if target.kind is EntryKind.FILE:
            files[entry.relpath] = _copy(entry.relpath, target, elf.get(target.source), entry)
    for text in warnings:
        log.warning("%s", text)
    return RuntimeLayout(files=files, aliases={}, warnings=tuple(warnings))
