"""The version a finalized wheel carries: its own version with TheRock's ROCm local suffix.

TheRock derives the suffix from the ROCm version V (``determine_version.py``): ``+rocm`` then
V's normalized form, with V's own ``+`` written as ``-`` so one local segment holds it all,
and ``+devrocm`` instead for a dev build, so that a wheel built against a release sorts after
one built against a nightly, which sorts after a dev build:

========================  ==================================
ROCm version V            finalized ``1.2.3``
========================  ==================================
``7.10.0``                ``1.2.3+rocm7.10.0``
``7.10.0rc1``             ``1.2.3+rocm7.10.0rc1``
``7.10.0a20251124``       ``1.2.3+rocm7.10.0a20251124``
``7.10.0.dev0+efed3c``    ``1.2.3+devrocm7.10.0.dev0.efed3c``
========================  ==================================

(PEP 440 normalizes ``-`` in a local version to ``.``; file names carry the normal form.)
A wheel whose version already has a local part keeps none of it: a ``rocm``/``devrocm`` one
(an earlier finalize) is replaced, any other one is an error.
"""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

from kpack.errors import UsageError

__all__ = ["finalized_version", "rocm_local", "rocm_version"]

_OURS = re.compile(r"(?:dev)?rocm[0-9]")


def rocm_version(text: str) -> Version:
    """``--rocm-version``, a PEP 440 version; a usage error otherwise."""
    try:
        return Version(text)
    except InvalidVersion:
        raise UsageError(f"--rocm-version {text!r} is not a PEP 440 version") from None


def rocm_local(rocm: Version) -> str:
    """The local segment for ROCm version ``rocm`` (``rocm7.10.0``, ``devrocm7.10.0.dev0-x``)."""
    base = "devrocm" if rocm.is_devrelease else "rocm"
    return base + str(rocm).replace("+", "-")


def finalized_version(version: str, rocm: Version, where: str) -> str:
    """``version`` with the ROCm local segment, normalized (``1.2.3`` -> ``1.2.3+rocm7.10.0``)."""
    try:
        parsed = Version(version)
    except InvalidVersion:
        raise UsageError(f"{where}: version {version!r} is not a PEP 440 version") from None
    if parsed.local is not None and not _OURS.match(parsed.local):
        raise UsageError(
            f"{where}: version {version} has the local part +{parsed.local}, which is not a "
            "ROCm suffix; finalize the wheel built without it"
        )
    return str(Version(f"{parsed.public}+{rocm_local(rocm)}"))
