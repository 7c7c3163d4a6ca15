"""The splitter's input: a ``.whl`` (verified and extracted by :func:`kpack.wheelfile.open_wheel`)
or an unpacked wheel directory (rocm-kpack's ``--input DIR``).

A directory is read where it is, never written: every file must be a regular file with a
safe relative name (no symlinks: a wheel cannot hold them), below exactly one
``.dist-info`` directory holding ``METADATA`` and ``WHEEL``. Name and version come from
``METADATA``, the tags and build tag from ``WHEEL``; the wheel file name they make names the
outputs, as for a ``.whl`` input. ``RECORD`` is not checked (a directory being iterated on
is expected to differ from it); the split wheels get a new one. The total size is bounded by
the same limit as a wheel's unpacked size.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from email.parser import BytesHeaderParser
from pathlib import Path

from kpack.common.cli import format_over
from kpack.common.frozen import frozen
from kpack.common.safepath import case_collisions, is_utf8, shown_name, windows_platform
from kpack.errors import PackagingError, shown_list
from kpack.wheelfile import (
    InputWheel,
    Limits,
    WheelEntry,
    normalize_dist_name,
    normalize_version,
    open_wheel,
)

__all__ = ["Source", "open_source", "open_wheel_dir"]

_SKIPPED = ("RECORD", "RECORD.jws", "RECORD.p7s")


def _walk(root: Path, rel: str, problems: list[str]) -> Iterator[tuple[str, os.stat_result]]:
    with os.scandir(root / rel if rel else root) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        name = f"{rel}/{entry.name}" if rel else entry.name
        if not is_utf8(entry.name):
            problems.append(f"{shown_name(name)}: name is not valid UTF-8")
            continue
        info = entry.stat(follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            problems.append(f"{name}: symbolic links cannot go into a wheel")
        elif stat.S_ISDIR(info.st_mode):
            yield from _walk(root, name, problems)
        elif stat.S_ISREG(info.st_mode):
            yield name, info
        else:
            problems.append(f"{name}: not a regular file")


def _headers(path: Path) -> tuple[bytes, dict[str, list[str]]]:
    data = path.read_bytes()
    parsed = BytesHeaderParser().parsebytes(data)
    out: dict[str, list[str]] = {}
    for key, value in parsed.items():
        out.setdefault(key.lower(), []).append(str(value).strip())
    return data, out


def _tag(tags: list[str], where: Path) -> str:
    """The compressed tag set of ``Tag:`` lines (``cp311-cp311-linux_x86_64``)."""
    parts = [t.split("-") for t in tags]
    if not parts or any(len(p) != 3 or not all(p) for p in parts):
        raise PackagingError("WHEEL: expected Tag: lines interpreter-abi-platform", path=where)
    return "-".join(".".join(sorted({p[i] for p in parts})) for i in range(3))


def open_wheel_dir(path: Path, limits: Limits) -> tuple[InputWheel, str]:
    """The directory as an :class:`InputWheel` rooted at itself, and its wheel file name."""
    root = Path(path)
    problems: list[str] = []
    files = dict(_walk(root, "", problems))
    tops = {n.split("/", 1)[0] for n in files if "/" in n}
    dist_infos = sorted(t for t in tops if t.endswith(".dist-info"))
    if len(dist_infos) != 1:
        found = ", ".join(dist_infos) or "none"
        problems.append(f"expected exactly one .dist-info directory, found {found}")
    total = sum(info.st_size for info in files.values())
    if total > limits.max_total:
        problems.append(
            f"files add up to {format_over(total, limits.max_total)} "
            "(raise it with --max-unpacked-size)"
        )
    if problems:
        raise PackagingError("not an unpacked wheel", path=root, problems=shown_list(problems))
    dist_info = dist_infos[0]
    for required in ("METADATA", "WHEEL"):
        if f"{dist_info}/{required}" not in files:
            raise PackagingError(f"{dist_info}/{required} is missing", path=root)
    _, meta = _headers(root / dist_info / "METADATA")
    _, wheel = _headers(root / dist_info / "WHEEL")
    if not meta.get("name") or not meta.get("version"):
        raise PackagingError(f"{dist_info}/METADATA lacks Name or Version", path=root)
    name = normalize_dist_name(meta["name"][0])
    version = normalize_version(meta["version"][0])
    tag = _tag(wheel.get("tag", []), root / dist_info / "WHEEL")
    build = wheel.get("build", [None])[0] or None
    if windows_platform(tag) and (pairs := case_collisions(sorted(files))):
        raise PackagingError(
            "names differ only in case (one file on Windows)", path=root, problems=shown_list(pairs)
        )
    skipped = {f"{dist_info}/{s}" for s in _SKIPPED}
    entries = tuple(
        WheelEntry(n, info.st_size, bool(info.st_mode & 0o111))
        for n, info in sorted(files.items())
        if n not in skipped
    )
    filename = "-".join([name, version, *([build] if build else []), tag]) + ".whl"
    return InputWheel(root, root, name, version, build, tag, dist_info, entries), filename


@frozen
class Source:
    """The input: a verified wheel (extracted) or an unpacked wheel directory."""

    wheel: InputWheel
    filename: str  # the wheel's file name (made from its metadata for a directory)
    size: int  # bytes: the .whl file, or the directory's files

    @property
    def is_dir(self) -> bool:
        return self.wheel.root == self.wheel.path


def open_source(path: Path, work: Path, limits: Limits, *, index: bool = True) -> Source:
    """A directory is read in place; a wheel is verified and extracted into ``work/in``,
    its large binaries' deflate blocks indexed unless ``index`` is false (a plan that
    writes no wheel)."""
    if path.is_dir():
        wheel, filename = open_wheel_dir(path, limits)
        return Source(wheel, filename, sum(e.size for e in wheel.entries))
    wheel = open_wheel(path, work / "in", limits, index=index)
    return Source(wheel, path.name, path.stat().st_size)
