"""The validated inputs of one build (what the command line asked for)."""

from __future__ import annotations

import os
import re
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from packaging.version import InvalidVersion, Version

from kpack.common.cli import default_jobs
from kpack.errors import UsageError
from kpack.wheelfile import source_date_epoch

__all__ = ["BuildOptions", "canonical_version", "default_platform_tag", "source_date_epoch"]


@dataclass(frozen=True, kw_only=True)
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
    jobs: int = field(default_factory=default_jobs)  # -j: the CPU count
    targets: tuple[str, ...] = ()  # kpack mode: build only these device wheels (sharding)
    families: frozenset[str] | None = None  # GPU family labels of the family table (None: any)
    only: Literal["all", "common", "device"] = "all"  # a shard of a --print-shards plan
    tree_targets: tuple[str, ...] = ()  # the whole tree's per-target artifact targets (shards)
    max_wheel_size: int | None = None  # --max-wheel-size: every wheel's budget (bytes)

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


#: The variable that overrides the wheels' platform tag (TheRock's name for it).
PLATFORM_TAG_VARIABLE = "ROCM_SDK_WHEEL_PLATFORM_TAG"
#: A platform tag as a wheel's file name holds it (``manylinux_2_28_x86_64``, ``win_amd64``;
#: a compressed set joined by ``.``): no ``-``, which separates the name's fields.
_PLATFORM_TAG_RE = re.compile(r"[a-z0-9_]+(?:\.[a-z0-9_]+)*")


def default_platform_tag() -> str:
    """``$ROCM_SDK_WHEEL_PLATFORM_TAG`` (checked: a bad value is a usage error naming the
    variable), else this interpreter's platform (``linux_x86_64``)."""
    env = os.environ.get(PLATFORM_TAG_VARIABLE, "").strip()
    if env:
        if _PLATFORM_TAG_RE.fullmatch(env) is None or len(env) > 200:
            shown = repr(env) if len(env) <= 80 else repr(env[:80]) + "..."
            raise UsageError(
                f"{PLATFORM_TAG_VARIABLE}={shown} is not a wheel platform tag (lower-case "
                "letters, digits and '_', several joined by '.': manylinux_2_28_x86_64, "
                "win_amd64)"
            )
        return env
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")
