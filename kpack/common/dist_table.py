"""A table of distributions that fits 80 columns: the version and wheel tag every file shares
stated once, in the title, and each row named by what sets it apart.

A wheel's file name (``rocm_sdk_device_gfx1250_strict-7.10.0a20251031-py3-none-``
``manylinux_2_28_x86_64.whl``) is longer than a terminal's column can hold beside a size.
When every wheel and sdist listed has one version, every wheel one tag and no build tag, and
every name is normalized as the wheel and sdist specifications have it (``rocm_sdk_core``),
a row shows the project's name as pip knows it (``rocm-sdk-device-gfx1250-strict``, an
sdist's with `` (sdist)``) under any subdirectory of the dist directory
(``gfx110X-all/rocm-sdk-devel``), and the title ends in ``version V, tag T``: each file is
``<name>-V-T.whl`` (``<name>-V.tar.gz``), ``<name>`` the project's with ``_`` for ``-``, so
nothing is lost. Otherwise a row shows the file's path as it is. File names are read with
``packaging.utils``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePosixPath

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    parse_sdist_filename,
    parse_wheel_filename,
)

from kpack.common.frozen import frozen
from kpack.common.tables import Table

__all__ = ["SDIST", "Listed", "dist_table"]

#: What marks an sdist's row.
SDIST = " (sdist)"


@frozen(kw_only=True)
class Listed:
    """One file of a dist directory: its path there (POSIX) and the row's other cells."""

    path: str
    cells: tuple[str, ...] = ()


@frozen(kw_only=True)
class _Name:
    """What a file's name says: its project, version and (a wheel's) tag, as written."""

    project: str
    version: str
    tag: str | None  # None: an sdist


def _parsed(filename: str) -> _Name | None:
    """``filename`` read as a wheel without a build tag or an sdist, its name normalized
    (``rocm_sdk_core``, what the project's name gives back); None otherwise."""
    try:
        if filename.endswith(".whl"):
            project, _version, build, _tags = parse_wheel_filename(filename)
            parts = filename[: -len(".whl")].split("-")
            if build or len(parts) != 5:
                return None
            name, version, tag = parts[0], parts[1], "-".join(parts[2:])
        else:
            project, _version = parse_sdist_filename(filename)
            name, _, version = filename.removesuffix(".tar.gz").rpartition("-")
            tag = None
    except (InvalidWheelFilename, InvalidSdistFilename):
        return None
    if name != project.replace("-", "_") or not filename.endswith((".whl", ".tar.gz")):
        return None  # not normalized (``PyYAML``): the project's name would not give it back
    return _Name(project=str(project), version=version, tag=tag)


def _common(names: Sequence[_Name | None]) -> tuple[str, str | None] | None:
    """The version and wheel tag all of ``names`` share; None when they do not."""
    if not names or any(n is None for n in names):
        return None
    versions = {n.version for n in names if n is not None}
    tags = {n.tag for n in names if n is not None and n.tag is not None}
    if len(versions) != 1 or len(tags) > 1:
        return None
    return versions.pop(), (tags.pop() if tags else None)


def dist_table(
    *,
    title: str,
    files: Sequence[Listed],
    header: tuple[str, ...] = (),
    numeric: frozenset[int] = frozenset(),
    subject: str | None = None,
) -> Table:
    """The table of ``files``: a first column ``package`` (or ``file``, when the names
    share no version and tag), then ``header``'s (``numeric``: their indices, from 0).
    ``subject``: a file name ``{subject}`` in ``title`` stands for, shortened as a row's
    when it has the version and tag of the rows."""
    names = [_parsed(PurePosixPath(f.path).name) for f in files]
    common = _common(names)
    shifted = frozenset(i + 1 for i in numeric)
    if common is None:
        title = title.replace("{subject}", subject or "")
        rows = tuple((f.path, *f.cells) for f in files)
        return Table(title=title, header=("file", *header), rows=rows, numeric=shifted)
    if subject is not None:
        said = _parsed(subject)
        same = said is not None and _common([*names, said]) == common
        title = title.replace("{subject}", _label(subject, said) if same and said else subject)
    version, tag = common
    rows = tuple(
        (_label(f.path, n), *f.cells) for f, n in zip(files, names, strict=True) if n is not None
    )
    common_text = f"version {version}" + (f", tag {tag}" if tag else "")
    header = ("package", *header)
    return Table(title=f"{title}: {common_text}", header=header, rows=rows, numeric=shifted)


def _label(path: str, name: _Name) -> str:
    parent = PurePosixPath(path).parent
    prefix = "" if parent == PurePosixPath(".") else f"{parent.as_posix()}/"
    return prefix + name.project + (SDIST if name.tag is None else "")


def short_label(filename: str) -> str:
    """A distribution's file name as a list row shows it once its version and tag are said
    elsewhere: its project (``rocm-sdk-device-gfx942``, ``rocm (sdist)``); any other name as
    it is."""
    name = _parsed(filename)
    return filename if name is None else _label(filename, name)
