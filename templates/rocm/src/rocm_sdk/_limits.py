"""How far the devel tarball may expand (imports nothing heavy: the CLI help names it)."""

from __future__ import annotations

from dataclasses import dataclass

MAX_DEVEL_SIZE_ENV = "ROCM_SDK_MAX_DEVEL_SIZE"
#: Default limit: the tar stream may be this many times the tarball's size...
DEFAULT_MAX_RATIO = 100
#: ...never less than this, so a small, well-compressed tarball always expands...
DEFAULT_MIN_LIMIT = 256 << 20
#: ...and never more than this (the wheel splitter's default for a whole wheel).
DEFAULT_MAX_LIMIT = 64 << 30

DEFAULT_LIMIT_TEXT = (
    f"{DEFAULT_MAX_RATIO} times the tarball's size, at least {DEFAULT_MIN_LIMIT >> 20} MiB "
    f"and at most {DEFAULT_MAX_LIMIT >> 30} GiB"
)


@dataclass(frozen=True)
class ExpansionLimit:
    """The most bytes of tar stream an expansion may read, and where that number came from."""

    limit: int
    origin: str

    @classmethod
    def default(cls, tarball_size: int) -> ExpansionLimit:
        """``DEFAULT_MAX_RATIO`` times the tarball's size, within ``DEFAULT_MIN_LIMIT`` and
        ``DEFAULT_MAX_LIMIT``."""
        limit = min(max(tarball_size * DEFAULT_MAX_RATIO, DEFAULT_MIN_LIMIT), DEFAULT_MAX_LIMIT)
        return cls(limit, DEFAULT_LIMIT_TEXT)
