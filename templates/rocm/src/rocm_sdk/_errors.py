"""The exceptions rocm_sdk raises besides the standard ones."""

from __future__ import annotations


class RocmSdkError(Exception):
    """Root of the errors specific to rocm_sdk."""


class DevelError(RocmSdkError):
    """The devel package cannot be expanded or is inconsistent."""


class UnsafeArchiveError(DevelError):
    """A devel tarball member would land outside its platform package."""
