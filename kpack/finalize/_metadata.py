"""METADATA of a finalized wheel: the new version and exact pins on the set.

Only two kinds of header line change, each in place, so every other field and the
description stay byte-identical:

- ``Version`` becomes the finalized version;
- every ``Requires-Dist`` on a distribution of the set (``rocm``, ``rocm-sdk-*``) gets the
  specifier ``== V``, its extras and marker kept (a looser pin such as
  ``rocm-sdk-core>=7`` is replaced, not added to).

Then the pins the wheel's libraries need are added where missing, at the end of the header
block: ``rocm-sdk-core == V`` always, and the libraries wheel when a file links a library
of it (``rocm[libraries] == V`` when the set has one libraries wheel per GPU family: the
``rocm`` sdist picks the family on the installing machine).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from kpack.errors import PackagingError

__all__ = ["finalized_metadata", "set_pins"]

_FIELD = re.compile(rb"(?P<key>[A-Za-z0-9-]+):[ \t]*(?P<value>.*?)(?P<eol>\r?\n|$)")


def _ours(name: str) -> bool:
    name = canonicalize_name(name)
    return name == "rocm" or name.startswith("rocm-sdk")


def set_pins(
    version: str, links: Iterable[str], core: str, libraries_dists: tuple[str, ...]
) -> list[str]:
    """The requirements a wheel linking the set distributions ``links`` needs."""
    pins = [f"{core} == {version}"]
    if any(d in libraries_dists for d in links):
        only = libraries_dists[0] if len(libraries_dists) == 1 else "rocm[libraries]"
        pins.append(f"{only} == {version}")
    return pins


def finalized_metadata(metadata: bytes, version: str, pins: list[str], where: str) -> bytes:
    """``metadata`` with ``Version: version``, the set's requirements pinned to the set's
    version (taken from the first pin) and ``pins`` added where missing."""
    rocm = pins[0].rsplit("==", 1)[1].strip()
    head, sep, body = _split(metadata)
    lines = head.splitlines(keepends=True)
    present: set[str] = set()
    out = []
    newline = b"\r\n" if lines and lines[0].endswith(b"\r\n") else b"\n"
    for line in lines:
        found = _FIELD.fullmatch(line)
        key = found["key"].lower() if found else b""
        if found is not None and key == b"version":
            line = b"Version: " + version.encode() + found["eol"]
        elif found is not None and key == b"requires-dist":
            line, name = _pinned(found["value"].decode("utf-8"), rocm, where)
            present.add(name)
            line += found["eol"] or newline
        out.append(line)
    if out and not out[-1].endswith(b"\n"):
        out[-1] += newline
    for pin in pins:
        requirement = Requirement(pin)
        key = canonicalize_name(requirement.name) + str(sorted(requirement.extras))
        if key not in present:
            out.append(f"Requires-Dist: {pin}".encode() + newline)
    return b"".join(out) + sep + body


def _split(metadata: bytes) -> tuple[bytes, bytes, bytes]:
    for sep in (b"\r\n\r\n", b"\n\n"):
        at = metadata.find(sep)
        if at >= 0:
            cut = at + len(sep) // 2
            return metadata[:cut], metadata[cut : at + len(sep)], metadata[at + len(sep) :]
    return metadata, b"", b""


def _pinned(value: str, rocm: str, where: str) -> tuple[bytes, str]:
    """The Requires-Dist line for ``value`` (pinned if on the set) and its key."""
    try:
        requirement = Requirement(value)
    except InvalidRequirement as exc:
        raise PackagingError(
            f"METADATA: invalid Requires-Dist {value!r}: {exc}", path=where
        ) from None
    key = canonicalize_name(requirement.name) + str(sorted(requirement.extras))
    if not _ours(requirement.name) or requirement.url:
        return f"Requires-Dist: {value}".encode(), ""
    extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
    marker = f"; {requirement.marker}" if requirement.marker else ""
    line = f"Requires-Dist: {requirement.name}{extras} == {rocm}{marker}"
    return line.encode(), key if requirement.marker is None else ""
