"""Write a wheel ourselves: deterministic, streamed, compressed on every core.

Layout: payload members sorted by name, then the ``.dist-info`` directory (``METADATA``,
``WHEEL``, ``entry_points.txt`` and any caller files there, sorted) with ``RECORD`` last.
Every entry has the same timestamp (``epoch``, else ``SOURCE_DATE_EPOCH``, else
1980-01-01), mode 0644 or 0755, and sizes and CRC in its local header. RECORD's sha256
and sizes are computed while the members are written, each input byte being read once.
Members whose content is already compressed (zstd, xz, gzip, zip, bzip2, ``.kpack``) are
stored. The output is byte-identical for equal inputs, whatever ``jobs`` is.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from email.parser import BytesHeaderParser
from pathlib import Path

from packaging.utils import canonicalize_name

from kpack.common.safepath import case_collisions, windows_platform
from kpack.errors import PackagingError
from kpack.wheelfile._deflate import ByteProgress, MemberStreamer, default_jobs
from kpack.wheelfile._libdeflate import libdeflate
from kpack.wheelfile._member import ContentSource, Member
from kpack.wheelfile._memo import DeflateMemo
from kpack.wheelfile._names import (
    expand_tag,
    normalize_dist_name,
    normalize_version,
    wheel_filename,
)
from kpack.wheelfile._output import atomic_output, resolve_epoch
from kpack.wheelfile._record import render_record
from kpack.wheelfile._zip import ZipWriter

__all__ = ["ContentSource", "Member", "WheelResult", "wheel_filename", "write_wheel"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WheelResult:
    """The written wheel: its path and size, and its entry count and unpacked bytes."""

    path: Path
    size: int
    file_count: int
    uncompressed_bytes: int


def write_wheel(
    dest_dir: Path,
    *,
    dist_name: str,
    version: str,
    tag: str,
    members: Sequence[Member],
    metadata: bytes,
    entry_points: bytes | None = None,
    compression: bool = True,
    level: int = 6,
    epoch: int | None = None,
    jobs: int | None = None,
    generator: str = "rocm-python-packaging",
    progress: ByteProgress | None = None,
    wheel_info: bytes | None = None,
    memo: DeflateMemo | None = None,
) -> WheelResult:
    """Write ``<dest_dir>/<wheel_filename>`` atomically and return what was written.

    ``wheel_info`` is a WHEEL file to write as it is (the wheel splitter keeps its
    input's, ``Root-Is-Purelib`` and every other field); its ``Tag`` lines must be the
    wheel's tags. Without it, the WHEEL file is made from ``generator`` and ``tag``.
    ``memo``: the deflated chunks of ``shared`` members, kept across the wheels of a run
    (:mod:`kpack.wheelfile._memo`); the bytes written are the same without it."""
    name = normalize_dist_name(dist_name)
    norm_version = normalize_version(version)
    tags = expand_tag(tag)
    dist_info = f"{name}-{norm_version}.dist-info"
    _check_metadata(metadata, dist_name, norm_version)
    if compression:
        libdeflate()  # its error before anything is staged
    if "\n" in generator or "\r" in generator:
        raise PackagingError(f"generator must be one line: {generator!r}")
    generated = [
        Member(f"{dist_info}/METADATA", metadata),
        Member(f"{dist_info}/WHEEL", _wheel_info(wheel_info, tags, generator)),
    ]
    if entry_points is not None:
        generated.append(Member(f"{dist_info}/entry_points.txt", entry_points))
    ordered = order_members([*members, *generated], dist_info, windows=windows_platform(tag))
    final = Path(dest_dir) / wheel_filename(dist_name, version, tag)
    with atomic_output(final) as handle:
        writer = ZipWriter(handle, resolve_epoch(epoch))
        with MemberStreamer(
            writer,
            jobs=jobs or default_jobs(),
            level=level,
            compression=compression,
            progress=progress,
            memo=memo,
        ) as streamer:
            for member in ordered:
                streamer.add(member)
            written = streamer.finish()
            record_name = f"{dist_info}/RECORD"
            streamer.add(Member(record_name, render_record(written, record_name)))
            written = streamer.finish()
        size = writer.close()
    result = WheelResult(final, size, len(written), sum(w.size for w in written))
    log.info(
        "wrote %s: %d files, %d bytes (%d unpacked)",
        final.name,
        result.file_count,
        size,
        result.uncompressed_bytes,
    )
    return result


def order_members(
    members: Sequence[Member], dist_info: str, *, windows: bool = False
) -> list[Member]:
    """Payload sorted by name, then ``dist_info`` members sorted; RECORD is added later.

    Rejects, all problems at once: duplicate names, a reserved ``.dist-info`` name, another
    ``.dist-info`` directory, and a name that is also a directory of another member. Names
    that differ only in case (:func:`kpack.common.safepath.case_collisions`) are refused in a
    ``windows`` wheel (NTFS keeps one file for both), elsewhere allowed (they work on Linux)
    but logged.
    """
    problems: list[str] = []
    seen: set[str] = set()
    for member in members:
        if member.arcname in seen:
            problems.append(f"{member.arcname}: duplicate member")
        seen.add(member.arcname)
    if f"{dist_info}/RECORD" in seen:
        problems.append(f"{dist_info}/RECORD: written by the wheel writer")
    tops = {name.split("/", 1)[0] for name in seen}
    problems += [
        f"{top}/: a second .dist-info directory (expected only {dist_info}/)"
        for top in sorted(tops)
        if top.endswith(".dist-info") and top != dist_info
    ]
    directories = {name.rsplit("/", i)[0] for name in seen for i in range(1, name.count("/") + 1)}
    problems += [f"{name}: is also a directory" for name in sorted(seen & directories)]
    cases = case_collisions(sorted(seen))
    if windows:
        problems += [f"{pair} differ only in case (one file on Windows)" for pair in cases]
    if problems:
        raise PackagingError("invalid wheel members", problems=problems)
    for pair in cases:
        log.warning("wheel members differ only in case: %s", pair)
    prefix = dist_info + "/"
    payload = sorted((m for m in members if not m.arcname.startswith(prefix)), key=_name)
    meta = sorted((m for m in members if m.arcname.startswith(prefix)), key=_name)
    return payload + meta


def _name(member: Member) -> str:
    return member.arcname


def _wheel_info(given: bytes | None, tags: list[str], generator: str) -> bytes:
    if given is None:
        return _wheel_file(generator, tags)
    headers = BytesHeaderParser().parsebytes(given)
    theirs = sorted(str(t).strip() for t in headers.get_all("Tag", []))
    if theirs != sorted(tags) or not headers.get("Wheel-Version"):
        raise PackagingError(
            f"WHEEL: expected Wheel-Version and the Tag lines {', '.join(sorted(tags))}, "
            f"got tags {', '.join(theirs) or 'none'}"
        )
    return given


def _wheel_file(generator: str, tags: list[str]) -> bytes:
    lines = ["Wheel-Version: 1.0", f"Generator: {generator}", "Root-Is-Purelib: false"]
    lines += [f"Tag: {t}" for t in tags]
    return ("\n".join(lines) + "\n").encode("utf-8")


def _check_metadata(metadata: bytes, dist_name: str, version: str) -> None:
    """METADATA must carry Metadata-Version, and the Name and Version of the wheel."""
    headers = BytesHeaderParser().parsebytes(metadata)
    problems: list[str] = []
    if not headers.get("Metadata-Version"):
        problems.append("Metadata-Version: missing")
    name = headers.get("Name")
    if name is None or canonicalize_name(str(name)) != canonicalize_name(dist_name):
        problems.append(f"Name: {name!r} does not match the distribution {dist_name!r}")
    meta_version = headers.get("Version")
    if meta_version is None or _normalized_or_none(str(meta_version)) != version:
        problems.append(f"Version: {meta_version!r} does not match {version!r}")
    if problems:
        raise PackagingError(
            "METADATA disagrees with the wheel", path="METADATA", problems=problems
        )


def _normalized_or_none(version: str) -> str | None:
    try:
        return normalize_version(version.strip())
    except PackagingError:
        return None
