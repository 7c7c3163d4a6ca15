"""METADATA of the split wheels: host extras, device packages, variant requirements.

What the split keeps and what it must change:

- WHEEL: every output carries the input's WHEEL file byte for byte (``Generator``,
  ``Root-Is-Purelib``, ``Build``, ``Tag`` and any other field): all outputs have the input's
  tags and build tag, and a device wheel must install into the scheme of the host's
  binaries (its archives are found relative to them).
- The host's (and variant wheels') METADATA is the input's with header lines inserted at
  the end of its header block (``Provides-Extra: device-…`` and their ``Requires-Dist``),
  so every existing field and the description body stay byte-identical. The one field
  that may change is ``Metadata-Version``: below 2.1 (which defines ``Provides-Extra``)
  it becomes 2.1 when extras are added.
- A device wheel is a new distribution: its METADATA is its own (name, version, summary,
  requirements, description), not the input's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from email.parser import BytesHeaderParser

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from kpack.errors import PackagingError
from kpack.wheelsplit._bundles import (
    Level,
    device_dist_name,
    device_keys,
    extra_name,
    known_targets,
    level_of,
    served_targets,
)

__all__ = [
    "add_headers",
    "device_metadata",
    "extra_requirements",
    "name_and_version",
    "owner_requirements",
    "variant_requirements",
    "variant_targets",
]


def name_and_version(metadata: bytes, where: str) -> tuple[str, str]:
    headers = BytesHeaderParser().parsebytes(metadata)
    name, version = headers.get("Name"), headers.get("Version")
    if not name or not version:
        raise PackagingError("METADATA lacks Name or Version", path=where)
    return str(name).strip(), str(version).strip()


def add_headers(metadata: bytes, lines: Sequence[str], where: str) -> bytes:
    """Insert ``lines`` after the last header; refuse extras the input already declares."""
    headers = BytesHeaderParser().parsebytes(metadata)
    ours = {line.split(":", 1)[1].strip() for line in lines if line.startswith("Provides-Extra:")}
    theirs = {canonicalize_name(str(e)) for e in headers.get_all("Provides-Extra", [])}
    clash = sorted(ours & theirs)
    if clash:
        raise PackagingError(
            f"METADATA already declares the extra(s) {', '.join(clash)}", path=where
        )
    if ours:
        metadata = _at_least_2_1(metadata, str(headers.get("Metadata-Version", "")))
    newline = b"\r\n" if b"\r\n" in metadata.split(b"\n", 1)[0] + b"\n" else b"\n"
    block = b"".join(line.encode("utf-8") + newline for line in lines)
    end = metadata.find(newline * 2)
    if end < 0:
        body = metadata if metadata.endswith(newline) or not metadata else metadata + newline
        return body + block
    cut = end + len(newline)
    return metadata[:cut] + block + metadata[cut:]


def _at_least_2_1(metadata: bytes, version: str) -> bytes:
    """``Metadata-Version`` raised to 2.1 (``Provides-Extra``) if it is lower."""
    try:
        low = Version(version.strip()) < Version("2.1")
    except InvalidVersion:
        return metadata
    if not low:
        return metadata
    pattern = re.compile(rb"^Metadata-Version:[^\r\n]*", re.IGNORECASE | re.MULTILINE)
    return pattern.sub(b"Metadata-Version: 2.1", metadata, count=1)


def _pin(prefix: str, key: str, version: str) -> str:
    return f"{device_dist_name(prefix, key)}=={version}"


def extra_requirements(prefix: str, version: str, keys: Iterable[str]) -> list[str]:
    """``device-<key>`` per device wheel and per target served by a generic target's wheel
    (a target pulls its packaging chain and its generic target), and ``device-all``."""
    present = sorted(set(keys))
    lines: list[str] = []
    for key in sorted({*present, *served_targets(present)}):
        extra = extra_name(key)
        lines.append(f"Provides-Extra: {extra}")
        lines += [
            f'Requires-Dist: {_pin(prefix, k, version)}; extra == "{extra}"'
            for k in device_keys(key, present)
        ]
    if present:
        lines.append("Provides-Extra: device-all")
        lines += [f'Requires-Dist: {_pin(prefix, k, version)}; extra == "device-all"'
                  for k in present]  # fmt: skip
    return lines


def owner_requirements(prefix: str, version: str, key: str, keys: Iterable[str]) -> list[str]:
    """What a per-processor device wheel requires besides its host: the other device wheels
    among ``keys`` that hold the rest of its processor's code (its sub-family and family, its
    generic target), at the same version, so that installing the leaf alone is complete
    (rocm-systems#10685). Any other bundle needs nothing more."""
    return [_pin(prefix, k, version) for k in device_keys(key, keys) if k != key]


def variant_targets(keys: Iterable[str]) -> tuple[list[str], list[str]]:
    """(targets the provider knows that get device code from ``keys``, sorted; target
    keys it does not know). A generic target's keys serve its member processors, so it
    is never left out itself."""
    present = set(keys)
    known = known_targets()
    served = served_targets(present)
    unknown = sorted(k for k in present if level_of(k) is Level.TARGET and k not in known)
    return [t for t in served if t in known], unknown


def variant_requirements(prefix: str, version: str, keys: Iterable[str]) -> list[str]:
    """Per known target, its device wheels (chain and generic target) gated on
    ``amd :: gfx_arch :: <target>``."""
    present = set(keys)
    targets, _ = variant_targets(present)
    lines: list[str] = []
    for target in targets:
        marker = f'"amd :: gfx_arch :: {target}" in variant_properties'
        lines += [
            f"Requires-Dist: {_pin(prefix, k, version)}; {marker}"
            for k in device_keys(target, present)
        ]
    return lines


def device_metadata(
    dist_name: str, version: str, host: str, key: str, requires: Sequence[str] = ()
) -> bytes:
    """Core metadata of a device wheel, with a description (``twine check --strict`` and
    PyPI's project page want one): what it holds and how it is installed. ``requires``
    are further ``Requires-Dist`` values (``--device-requires-dist``, expanded)."""
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {dist_name}",
        f"Version: {version}",
        f"Summary: {key} device code for {host} {version} ({level_of(key).value} bundle)",
        f"Requires-Dist: {host}=={version}",
        *(f"Requires-Dist: {r}" for r in requires),
        "Description-Content-Type: text/markdown",
    ]
    body = (
        f"# {dist_name}\n\n"
        f"The `{key}` GPU device code of `{host}` {version}: `.kpack` archives and database "
        f"files that `{host}`'s host libraries load at run time. Installed next to `{host}`, "
        f"usually through its extras: `pip install '{host}[device-{key}]'`.\n"
    )
    return ("\n".join(lines) + "\n\n" + body).encode("utf-8")
