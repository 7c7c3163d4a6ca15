"""Decode and type-check the MessagePack TOC of a ``.kpack`` archive (kpack.md §1.1).

Private to :mod:`kpack.archive`. :func:`decode_toc` turns the raw bytes into a :class:`Toc`
whose every field has been checked for type and range, or raises :class:`ArchiveError`
naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeVar

import msgpack

from kpack.common.frozen import frozen
from kpack.errors import ArchiveError
from kpack.targets import is_target_id

SCHEMES = ("none", "zstd-per-kernel")
Scheme = Literal["none", "zstd-per-kernel"]
_T = TypeVar("_T")


@frozen(kw_only=True)
class ArchiveEntry:
    """A TOC entry; ``offset``/``size`` locate the stored bytes (the zstd frame, or the blob)."""

    binary_key: str
    target: str
    ordinal: int
    original_size: int
    offset: int
    size: int
    metadata: Mapping[str, str] | None


@frozen
class TocEntry:
    ordinal: int
    original_size: int | None  # None only in old 'none' archives that did not record it
    metadata: Mapping[str, str] | None


@frozen(kw_only=True)
class Toc:
    group_name: str
    gfx_arch_family: str
    gfx_arches: tuple[str, ...]
    scheme: str
    entries: dict[tuple[str, str], TocEntry]
    blobs: tuple[tuple[int, int], ...]  # 'none': (absolute offset, size) per ordinal
    zstd_extent: tuple[int, int] | None  # 'zstd-per-kernel': (zstd_offset, zstd_size)


class _Checker:
    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, message: str) -> ArchiveError:
        return ArchiveError(f"TOC: {message}", path=self.path)

    def typed(self, value: object, kind: type[_T], where: str) -> _T:
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self.fail(f"{where} must be {kind.__name__}, not {type(value).__name__}")
        return value

    def key(self, table: Mapping[str, object], key: str, kind: type[_T], where: str = "") -> _T:
        if key not in table:
            raise self.fail(f"missing key {where}{key!r}")
        return self.typed(table[key], kind, f"{where}{key!r}")

    def count(self, table: Mapping[str, object], key: str, where: str = "") -> int:
        value = self.key(table, key, int, where)
        if not 0 <= value < 1 << 64:
            raise self.fail(f"{where}{key!r} = {value} is out of range")
        return value

    def str_map(self, value: object, where: str) -> dict[str, str]:
        table = self.typed(value, dict, where)
        for k, v in table.items():
            self.typed(k, str, f"{where} key {k!r}")
            self.typed(v, str, f"{where}[{k!r}]")
        return table


def _entry(check: _Checker, raw: object, where: str, scheme: str) -> TocEntry:
    table = check.typed(raw, dict, where)
    kind = table.get("type", "hsaco")
    if kind != "hsaco":
        raise check.fail(f"{where}: entry type {kind!r} is not 'hsaco'")
    ordinal = check.count(table, "ordinal", f"{where} ")
    size: int | None = None
    if "original_size" in table or scheme != "none":
        size = check.count(table, "original_size", f"{where} ")
    meta = table.get("metadata")
    metadata = None if meta is None else check.str_map(meta, f"{where} metadata")
    return TocEntry(ordinal, size, metadata)


def _entries(
    check: _Checker, toc: dict[str, object], scheme: str
) -> dict[tuple[str, str], TocEntry]:
    out: dict[tuple[str, str], TocEntry] = {}
    seen: dict[int, tuple[tuple[str, str], TocEntry]] = {}
    for binary_key, targets in check.key(toc, "toc", dict).items():
        check.typed(binary_key, str, f"toc key {binary_key!r}")
        for target, raw in check.typed(targets, dict, f"toc[{binary_key!r}]").items():
            check.typed(target, str, f"toc[{binary_key!r}] key {target!r}")
            if not is_target_id(target):
                raise check.fail(f"toc[{binary_key!r}] key {target!r} is not a target id")
            entry = _entry(check, raw, f"toc[{binary_key!r}][{target!r}]", scheme)
            # entries may share an ordinal (one stored code object), but then one size
            first = seen.setdefault(entry.ordinal, ((binary_key, target), entry))
            if first[1].original_size != entry.original_size:
                raise check.fail(
                    f"ordinal {entry.ordinal} is shared by {first[0]} and "
                    f"{(binary_key, target)} with different original_size"
                )
            out[(binary_key, target)] = entry
    return out


def _blobs(check: _Checker, toc: dict[str, object]) -> tuple[tuple[int, int], ...]:
    blobs = []
    for index, raw in enumerate(check.key(toc, "blobs", list)):
        table = check.typed(raw, dict, f"blobs[{index}]")
        blobs.append(
            (
                check.count(table, "offset", f"blobs[{index}] "),
                check.count(table, "size", f"blobs[{index}] "),
            )
        )
    return tuple(blobs)


def decode_toc(raw: bytes, path: str) -> Toc:
    """Unpack and check the TOC bytes (which must hold exactly one map)."""
    check = _Checker(path)
    try:
        obj = msgpack.unpackb(raw, raw=False, strict_map_key=True, use_list=True)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise check.fail(f"not one valid MessagePack map running to EOF ({exc})") from None
    toc = check.typed(obj, dict, "the TOC")
    if toc.get("format_version", 1) != 1 or isinstance(toc.get("format_version"), bool):
        raise check.fail(f"format_version {toc['format_version']!r} is not 1")
    scheme = check.typed(toc.get("compression_scheme", "none"), str, "'compression_scheme'")
    if scheme not in SCHEMES:
        raise check.fail(f"unknown compression_scheme {scheme!r} (expected one of {SCHEMES})")
    arches = check.key(toc, "gfx_arches", list)
    for index, arch in enumerate(arches):
        check.typed(arch, str, f"gfx_arches[{index}]")
    zstd_extent = None
    if scheme == "zstd-per-kernel":
        zstd_extent = (check.count(toc, "zstd_offset"), check.count(toc, "zstd_size"))
    return Toc(
        group_name=check.key(toc, "group_name", str),
        gfx_arch_family=check.key(toc, "gfx_arch_family", str),
        gfx_arches=tuple(arches),
        scheme=scheme,
        entries=_entries(check, toc, scheme),
        blobs=_blobs(check, toc) if scheme == "none" else (),
        zstd_extent=zstd_extent,
    )
