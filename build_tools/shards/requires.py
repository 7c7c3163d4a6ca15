"""The ``rocm`` sdist's requirements against what the shards assembled.

The common packages come from one shard; the device wheels from others. The ``rocm``
sdist names every wheel of the build in its ``Requires-Dist`` (``rocm-sdk-core``,
``rocm-sdk-device-gfx942; extra == "device-gfx942"``...), rendered from the whole tree's
targets (``--tree-targets``) in whichever shard built it. So assembly can tell a device
shard that never ran, or one that built a wheel the common packages do not know, without
any family flag: every ``rocm-sdk-*`` / ``rocm-profiler`` requirement of the sdist must be
among the assembled files, and every assembled device wheel among the requirements (when
the sdist requires any device wheel at all).
"""

from __future__ import annotations

import tarfile
from collections.abc import Sequence
from email.parser import BytesHeaderParser

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from .scan import META_SDIST, DistFile, Kind

__all__ = ["check_sdist_requirements"]

_OURS = ("rocm-sdk-", "rocm-profiler")
_DEVICE = "rocm-sdk-device-"
_PKG_INFO_MAX = 1 << 20


def check_sdist_requirements(files: Sequence[DistFile], problems: list[str]) -> None:
    """Add a problem for each wheel the ``rocm`` sdist requires that is not assembled, and
    each assembled device wheel it does not require (sdists unreadable here are left to
    the archive checks, which report them)."""
    sdists = [f for f in files if f.project == META_SDIST and not f.name.endswith(".whl")]
    have = {f.project for f in files if f.name.endswith(".whl")}
    devices = {f.project for f in files if f.kind is Kind.DEVICE}
    for sdist in sdists:
        wanted = _required(sdist)
        if wanted is None:
            continue
        problems += [
            f"{sdist.name} requires {name}, but no shard built it" for name in sorted(wanted - have)
        ]
        if not any(n.startswith(_DEVICE) for n in wanted):
            continue  # an sdist that names no device wheel at all: nothing to hold them to
        problems += [
            f"device wheel {name} is not among {sdist.name}'s requirements (built for a target "
            "the common packages do not know)"
            for name in sorted(devices - wanted)
        ]


def _required(sdist: DistFile) -> set[str] | None:
    top = sdist.name.removesuffix(".tar.gz")
    try:
        with tarfile.open(sdist.path, "r:gz") as tar:
            member = tar.getmember(f"{top}/PKG-INFO")
            handle = tar.extractfile(member) if member.size <= _PKG_INFO_MAX else None
            if handle is None:
                return None
            headers = BytesHeaderParser().parsebytes(handle.read())
    except (OSError, tarfile.TarError, KeyError, EOFError):
        return None
    names: set[str] = set()
    for text in headers.get_all("Requires-Dist") or ():
        try:
            name = canonicalize_name(Requirement(text).name)
        except InvalidRequirement:
            continue
        if name.startswith(_OURS):
            names.add(name)
    return names
