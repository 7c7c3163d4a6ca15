"""Classify the members of an extracted wheel: fat binaries to split, per-arch database
files to move to device wheels, everything else kept as it is. Plans only; writes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from kpack.databases import Handler, match_database
from kpack.hipfmt import identify, search_path
from kpack.transform import inspect_fat_binary
from kpack.wheelfile import InputWheel, WheelEntry
from kpack.wheelsplit._bundles import bundle_key

__all__ = ["DatabaseFile", "FatBinary", "SplitPlan", "plan_split"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FatBinary:
    entry: WheelEntry
    kernel_name: str  # overlay-relative path, e.g. 'lib/libtorch_hip.so'
    search_path: str  # e.g. '../.kpack/torch_@GFXARCH@.kpack'


@dataclass(frozen=True)
class DatabaseFile:
    entry: WheelEntry
    key: str  # device-wheel bundle key, e.g. 'gfx90a'
    handler: str
    install_path: str  # where it lands in site-packages (its arcname in the device wheel)


@dataclass(frozen=True)
class SplitPlan:
    overlay_root: str  # ends with '/'
    group: str  # lower-cased wheel name
    fat: tuple[FatBinary, ...]
    databases: tuple[DatabaseFile, ...]
    notes: tuple[str, ...]

    def archive_arcname(self, target: str) -> str:
        return f"{self.overlay_root}.kpack/{self.group}_{target}.kpack"

    @property
    def empty(self) -> bool:
        return not self.fat and not self.databases


def plan_split(wheel: InputWheel, overlay_root: str, handlers: Sequence[Handler]) -> SplitPlan:
    """Database handlers first (a per-arch ``.so`` moves whole), then fat-binary detection
    by the file's bytes (ELF or PE), for members that install under ``overlay_root`` (also
    from ``<name>.data/purelib/`` or ``.../platlib/``, as Windows wheels often carry
    them)."""
    root = overlay_root if overlay_root.endswith("/") else overlay_root + "/"
    group = wheel.name.lower()
    fat: list[FatBinary] = []
    databases: list[DatabaseFile] = []
    notes: list[str] = []
    under = [e for e in wheel.entries if wheel.install_path(e.arcname).startswith(root)]
    if not under:
        notes.append(f"no file under the overlay root {root}")
    for entry in under:
        installed = wheel.install_path(entry.arcname)
        relpath = installed[len(root) :]
        match = match_database(relpath, handlers)
        if match is not None:
            key = bundle_key(match.arch_key)
            databases.append(DatabaseFile(entry, key, match.handler.name, installed))
            continue
        kind = _fat_kind(wheel, entry)
        if kind == "fat":
            depth = relpath.count("/")
            search = search_path(depth, group)
            fat.append(FatBinary(entry, relpath, search))
        elif kind:
            notes.append(f"{entry.arcname}: {kind}; kept unchanged")
    for entry in wheel.entries:
        outside = not wheel.install_path(entry.arcname).startswith(root)
        if outside and _fat_kind(wheel, entry) == "fat":
            notes.append(f"{entry.arcname}: fat binary outside {root}; kept unchanged")
    for note in notes:
        log.warning("%s", note)
    return SplitPlan(root, group, tuple(fat), tuple(databases), tuple(notes))


def _fat_kind(wheel: InputWheel, entry: WheelEntry) -> str:
    """'fat', '' (no device code) or why a file with device code is not split."""
    path = wheel.root / entry.arcname
    with open(path, "rb") as f:
        if identify(f.read(4)) not in ("elf", "pe"):
            return ""
    info = inspect_fat_binary(path)
    if info is None:
        return ""
    if info.already_transformed:
        return "already transformed (HIPK wrappers or a kpack marker)"
    if info.wrapper_count == 0:
        return "device code without wrappers cannot be split"
    return "fat"
