"""The one exception tree of this project.

Every error raised on purpose derives from :class:`RocmPackagingError`. Command-line
entry points catch that root, print one line and exit non-zero; anything else escaping
is a bug. Messages name the file and the field that is wrong.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

__all__ = [
    "ArchiveError",
    "ArtifactError",
    "BundleError",
    "ElfError",
    "ManifestError",
    "PackagingError",
    "RocmPackagingError",
    "ToolError",
    "TransformError",
    "UnsafePathError",
    "UsageError",
    "shown_list",
]

#: Entries a problem list shows before it gives the count of the rest.
MAX_LISTED = 5


def shown_list(items: Sequence[str], limit: int = MAX_LISTED) -> list[str]:
    """A problem list kept short: at most ``limit`` items, then ``... and N more``."""
    shown = list(items[:limit])
    if len(items) > limit:
        shown.append(f"... and {len(items) - limit} more")
    return shown


class RocmPackagingError(Exception):
    """Root of every deliberate error; carries the offending path when there is one."""

    def __init__(
        self,
        message: str,
        *,
        path: str | os.PathLike[str] | None = None,
        problems: Iterable[str] = (),
    ) -> None:
        self.message = message
        self.path = os.fspath(path) if path is not None else None
        self.problems = tuple(problems)
        text = f"{self.path}: {message}" if self.path else message
        if self.problems:
            text += "".join(f"\n  - {p}" for p in self.problems)
        super().__init__(text)


class UsageError(RocmPackagingError):
    """A command-line value is invalid (unknown family, bad version, ...)."""


class UnsafePathError(RocmPackagingError):
    """A path made from input data would leave its root (``..``, absolute, symlink escape)."""


class ArtifactError(RocmPackagingError):
    """The artifact tree is malformed (manifest, naming, conflicts, escaping links)."""


class ManifestError(RocmPackagingError):
    """One of our YAML manifests is invalid; names the file and the key."""


class ElfError(RocmPackagingError):
    """An ELF file is corrupt, unsupported, or cannot be edited safely."""


class PeError(RocmPackagingError):
    """A PE/COFF image that cannot be read safely."""


class BundleError(RocmPackagingError):
    """A HIP offload bundle (plain or CCOB) is malformed or cannot be mapped to its wrappers."""


class ArchiveError(RocmPackagingError):
    """A ``.kpack`` archive is malformed, unsupported, or would exceed the runtime's limits."""


class TransformError(RocmPackagingError):
    """A host binary cannot be rewritten safely (split device code, redirect wrappers)."""


class PackagingError(RocmPackagingError):
    """Assembling or writing packages failed."""


class ToolError(RocmPackagingError):
    """An external program is missing, too old, or failed (keeps its command and output)."""
