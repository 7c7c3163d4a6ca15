"""The core metadata an index shows of a dist file (PEP 658): a wheel's
``.dist-info/METADATA`` (served beside it as ``<wheel>.metadata``) or an sdist's ``PKG-INFO``,
and the Requires-Python they declare, validated."""

from __future__ import annotations

import tarfile
import zipfile
from dataclasses import dataclass
from email.parser import BytesHeaderParser
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from kpack.errors import PackagingError

__all__ = ["METADATA_SUFFIX", "NO_METADATA", "CoreMetadata", "read_core_metadata"]

#: what follows a wheel's file name in the name of its metadata file
METADATA_SUFFIX = ".metadata"
_METADATA_LIMIT = 16 << 20  # a METADATA or PKG-INFO larger than this is no metadata


@dataclass(frozen=True)
class CoreMetadata:
    """What the index shows of a file's core metadata: a wheel's METADATA bytes (served as
    ``<wheel>.metadata``; None for an sdist) and its Requires-Python (None if absent)."""

    data: bytes | None
    requires_python: str | None


#: a file whose metadata was not read
NO_METADATA = CoreMetadata(None, None)


def _wheel_metadata(path: Path) -> bytes:
    with zipfile.ZipFile(path) as archive:
        names = [
            n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")
        ]
        if len(names) != 1:
            found = ", ".join(names) or "none"
            raise PackagingError(f"wants one <name>.dist-info/METADATA, found {found}", path=path)
        info = archive.getinfo(names[0])
        if info.file_size > _METADATA_LIMIT:
            raise PackagingError(f"{names[0]} is {info.file_size} bytes", path=path)
        return archive.read(info)


def _sdist_pkg_info(path: Path) -> bytes:
    """``<top>/PKG-INFO`` of a ``.tar.gz`` or ``.zip`` sdist."""
    if path.name.endswith(".zip"):
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if n.count("/") == 1 and n.endswith("/PKG-INFO")]
            if names and archive.getinfo(names[0]).file_size <= _METADATA_LIMIT:
                return archive.read(names[0])
    else:
        with tarfile.open(path, "r:gz") as archive:
            for member in archive:
                if (
                    member.isfile()
                    and member.name.count("/") == 1
                    and (member.name.endswith("/PKG-INFO") and member.size <= _METADATA_LIMIT)
                ):
                    stream = archive.extractfile(member)
                    if stream is not None:
                        return stream.read()
    raise PackagingError("no <name>-<version>/PKG-INFO in the sdist", path=path)


def read_core_metadata(path: Path) -> CoreMetadata:
    """The core metadata the index shows for ``path``: a wheel's METADATA and the file's
    Requires-Python (validated as a PEP 440 specifier set)."""
    try:
        wheel = path.name.endswith(".whl")
        data = _wheel_metadata(path) if wheel else _sdist_pkg_info(path)
    except (OSError, zipfile.BadZipFile, tarfile.TarError, EOFError) as exc:
        raise PackagingError(f"cannot read its metadata: {exc}", path=path) from exc
    value = BytesHeaderParser().parsebytes(data).get("Requires-Python")
    requires = None if value is None else " ".join(str(value).split())
    if requires is not None:
        try:
            SpecifierSet(requires)
        except InvalidSpecifier as exc:
            raise PackagingError(f"bad Requires-Python: {exc}", path=path) from exc
    return CoreMetadata(data if wheel else None, requires)
