"""Distribution names, versions and tags as they appear in archive file names.

Follows the binary distribution format and source distribution format specifications:
the name is lower-cased with every run of ``-_.`` replaced by ``_``; the version is the
normalized PEP 440 form; a tag is ``interpreter-abi-platform``, each part possibly a
``.``-separated compressed set.
"""

from __future__ import annotations

import itertools
import re

from packaging.version import InvalidVersion, Version

from kpack.errors import PackagingError

__all__ = ["expand_tag", "normalize_dist_name", "normalize_version", "wheel_filename"]

_VALID_NAME = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.IGNORECASE)
_SEPARATOR_RUN = re.compile(r"[-_.]+")
_TAG_PART = re.compile(r"^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*$")


def normalize_dist_name(dist_name: str) -> str:
    """``Rocm-SDK.core`` -> ``rocm_sdk_core`` (the file-name form)."""
    if not _VALID_NAME.match(dist_name):
        raise PackagingError(f"invalid distribution name {dist_name!r}")
    return _SEPARATOR_RUN.sub("_", dist_name).lower()


def normalize_version(version: str) -> str:
    """The normalized PEP 440 form of ``version`` (``7.0.0-RC1`` -> ``7.0.0rc1``)."""
    try:
        return str(Version(version))
    except InvalidVersion as exc:
        raise PackagingError(f"invalid PEP 440 version {version!r}") from exc


def expand_tag(tag: str) -> list[str]:
    """The individual tags of a possibly compressed tag set, in a fixed order."""
    parts = tag.split("-")
    if len(parts) != 3 or not all(_TAG_PART.match(p) for p in parts):
        raise PackagingError(f"invalid wheel tag {tag!r} (expected interpreter-abi-platform)")
    sets = [p.split(".") for p in parts]
    return ["-".join(combo) for combo in itertools.product(*sets)]


def wheel_filename(dist_name: str, version: str, tag: str) -> str:
    """``<name>-<version>-<tag>.whl`` with name and version normalized."""
    expand_tag(tag)
    return f"{normalize_dist_name(dist_name)}-{normalize_version(version)}-{tag}.whl"
