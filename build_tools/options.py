"""The validated inputs of one build (what the command line asked for)."""

from __future__ import annotations

import os
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from kpack.errors import UsageError

__all__ = ["BuildOptions", "canonical_version", "default_platform_tag", "source_date_epoch"]


@dataclass(frozen=True)
class BuildOptions:
    artifact_dir: Path
    dest_dir: Path
    version: str  # canonical PEP 440
    nonce: str
    build_packages: bool = True
    devel_tarball_compression: bool = False
    wheel_compression: bool = True
    linux_families: tuple[str, ...] = ()
    windows_families: tuple[str, ...] = ()
    linux_targets: tuple[str, ...] = ()  # the Linux families expanded to gfx targets
    windows_targets: tuple[str, ...] = ()
    platform_tag: str = "linux_x86_64"
    epoch: int = 315532800
    jobs: int = 2
    targets: tuple[str, ...] = ()  # kpack mode: build only these device wheels (sharding)
    families: frozenset[str] | None = None  # GPU family labels of the family table (None: any)

    @property
    def wheel_tag(self) -> str:
        return f"py3-none-{self.platform_tag}"

    @property
    def windows(self) -> bool:
        """A Windows package set (``win_amd64``): executables are ``<relpath>.exe``, DLLs
        sit in ``bin/``, nothing is RPATH-edited."""
        return self.platform_tag.startswith("win")


def canonical_version(text: str) -> str:
    """PEP 440 check; the canonical form is used everywhere (metadata, pins, names)."""
    shown = repr(text) if len(text) <= 80 else repr(text[:80]) + "..."
    try:
        return str(Version(text))
    except (InvalidVersion, ValueError) as exc:  # ValueError: past int()'s digit limit
        raise UsageError(f"--version {shown} is not a valid PEP 440 version") from exc


def default_platform_tag() -> str:
    env = os.environ.get("ROCM_SDK_WHEEL_PLATFORM_TAG", "").strip()
    if env:
        return env
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


#: The latest time every archive we write can hold: a gzip header's 32-bit MTIME (2106-02-07).
MAX_EPOCH = 0xFFFFFFFF


def source_date_epoch() -> int:
    """``SOURCE_DATE_EPOCH`` if set (clamped to the ZIP minimum, 1980), else 1980-01-01.

    A value after 2106-02-07 is an error, not clamped: no gzip header can hold it, and it is
    surely a mistake (a time in milliseconds, say).
    """
    text = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if not text:
        return 315532800
    try:
        value = int(text)
    except ValueError as exc:
        raise UsageError(f"SOURCE_DATE_EPOCH={text!r} is not an integer") from exc
    if value > MAX_EPOCH:
        raise UsageError(
            f"SOURCE_DATE_EPOCH={text[:30]} is after 2106-02-07T06:28:15Z ({MAX_EPOCH}), the "
            "latest time a gzip header can hold (a time in milliseconds?)"
        )
    return max(value, 315532800)
