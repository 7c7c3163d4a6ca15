"""What kpack-split device code an installation holds: the device wheels (ours,
``rocm-sdk-device-<base>``, and the wheel splitter's, ``<prefix>-<key>``), the ``.kpack``
archives their RECORDs list, and the host binaries that load from them.

Found by listing site-packages and reading RECORD and METADATA, never by importing; what
the runtime would find is checked by :mod:`rocm_sdk._kpack_check`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ._elf import ElfError, is_elf, read_sections
from ._kpack import (
    MARKER_SECTION,
    PE_MARKER_SECTION,
    PE_WRAPPER_SECTION,
    WRAPPER_SECTION,
    base_target,
    is_target_id,
)
from ._layout import dist_info_dirs, dist_info_name, read_metadata_headers
from ._pe import is_pe, read_pe_sections
from ._record import read_record_paths

__all__ = [
    "DEVICE_DIST_PREFIX",
    "DeviceWheel",
    "archive_target",
    "find_device_wheels",
    "host_binaries",
]

DEVICE_DIST_PREFIX = "rocm_sdk_device_"
#: what a splitter device wheel's normalized name holds between its prefix and its key
SPLIT_DEVICE_INFIX = "_device_"
SKIPPED_DIRS = frozenset({"__pycache__", ".kpack", ".devel_links"})
_PROCESSOR = re.compile(r"gfx[0-9a-f]{3,4}")


@dataclass(frozen=True)
class DeviceWheel:
    """An installed device distribution: ours (``rocm-sdk-device-<base>``) or one the wheel
    splitter made (``<prefix>-<key>``, with ``host`` the distribution it serves)."""

    dist_info: Path
    base: str  # our base target, or the splitter's bundle key ('gfx90a', 'gfx9-4')
    archives: tuple[str, ...]  # site-relative POSIX paths of the .kpack files in its RECORD
    host: str | None = None  # splitter wheels: the host distribution (torch)

    @property
    def name(self) -> str:
        return self.dist_info.name[: -len(".dist-info")]

    @property
    def bases(self) -> tuple[str, ...]:
        """The base targets whose archives it may ship: its own, or for a splitter bundle
        of a family (``gfx9-4``, ``gfx11``) the bases its archives name."""
        if self.host is None or _PROCESSOR.fullmatch(self.base) or self.base.endswith(
            "-generic"
        ):
            return (self.base,)
        found = (archive_target(PurePosixPath(rel).name) for rel in self.archives)
        return tuple(sorted({base_target(t) for t in found if t is not None}))

    @property
    def roots(self) -> tuple[str, ...]:
        """Site-relative package dirs whose ``.kpack`` dir holds its archives."""
        return tuple(sorted({PurePosixPath(rel).parent.parent.as_posix() for rel in self.archives}))


def archive_target(name: str) -> str | None:
    """The target of an archive file name ``<P>_<target>.kpack``, or None."""
    if not name.endswith(".kpack") or "_" not in name:
        return None
    target = name[: -len(".kpack")].rsplit("_", 1)[1]
    return target if is_target_id(target) else None


def _record_archives(dist_info: Path) -> tuple[str, ...]:
    try:
        rows = read_record_paths(dist_info / "RECORD")
    except (OSError, UnicodeDecodeError):
        rows = []
    paths = (PurePosixPath(row) for row in rows)
    return tuple(
        p.as_posix() for p in paths if p.suffix == ".kpack" and p.parent.name == ".kpack"
    )


def _host_of(dist_info: Path) -> str | None:
    """The distribution a splitter device wheel requires first (``torch==2.9.0``)."""
    required = read_metadata_headers(dist_info).get("Requires-Dist", "")
    name = re.split(r"[\s;<>=!~\[(]", required.strip(), maxsplit=1)[0]
    return name or None


def find_device_wheels(site: Path, *, splitter: bool = True) -> list[DeviceWheel]:
    """Every device dist-info directly in ``site``, by listing the directory: ours
    (``rocm_sdk_device_*``) and, with ``splitter``, every other ``*_device_*`` one whose
    RECORD lists ``.kpack`` archives (the wheel splitter's ``<prefix>-<key>``)."""
    wheels = []
    for dist_info in dist_info_dirs(site):
        name = dist_info_name(dist_info)
        if name.startswith(DEVICE_DIST_PREFIX):
            base = name[len(DEVICE_DIST_PREFIX) :].replace("_", "-")  # gfx9_4_generic
            wheels.append(DeviceWheel(dist_info, base, _record_archives(dist_info)))
        elif splitter and SPLIT_DEVICE_INFIX in name:
            archives = _record_archives(dist_info)
            if archives:
                key = name.rsplit(SPLIT_DEVICE_INFIX, 1)[1].replace("_", "-")
                wheels.append(DeviceWheel(dist_info, key, archives, _host_of(dist_info)))
    return wheels


def host_binaries(dirs: Iterable[Path]) -> Iterator[Path]:
    """ELF and PE files (not links) under ``dirs`` that have a wrapper array or a kpack
    marker."""
    wanted = {WRAPPER_SECTION, MARKER_SECTION, PE_WRAPPER_SECTION, PE_MARKER_SECTION}
    for root in dirs:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS)
            for name in sorted(filenames):
                path = Path(dirpath, name)
                if path.is_symlink():
                    continue
                try:
                    if is_elf(path):
                        names = {s.name for s in read_sections(path)}
                    elif is_pe(path):
                        names = {s.name for s in read_pe_sections(path)}
                    else:
                        continue
                except (ElfError, OSError):
                    continue
                if wanted & names:
                    yield path
