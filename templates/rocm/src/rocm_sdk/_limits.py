"""How far the devel tarball may expand (imports nothing heavy: the CLI help names it)."""

from __future__ import annotations

from dataclasses import dataclass

MAX_DEVEL_SIZE_ENV = "ROCM_SDK_MAX_DEVEL_SIZE"
#: Default limit: the tar stream may be this many times the tarball's size...
DEFAULT_MAX_RATIO = 100
#: ...and never less than this, so a small, well-compressed tarball always expands.
DEFAULT_MIN_LIMIT = 256 << 20


@dataclass(frozen=True)
class ExpansionLimit:
    """The most bytes of tar stream an expansion may read, and where that number came from."""

    limit: int
    origin: str

    @classmethod
    def default(cls, tarball_size: int) -> ExpansionLimit:
        """``DEFAULT_MAX_RATIO`` times the tarball's size, at least ``DEFAULT_MIN_LIMIT``."""
        limit = max(tarball_size * DEFAULT_MAX_RATIO, DEFAULT_MIN_LIMIT)
        origin = (f"{DEFAULT_MAX_RATIO} times the tarball's size, at least "
                  f"{DEFAULT_MIN_LIMIT >> 20} MiB")
        return cls(limit, origin)
