"""ZIP container records (PKWARE APPNOTE 6.3): local headers, central directory, ZIP64.

Only what wheels need, written deterministically: stored or deflated entries, one fixed
DOS timestamp, Unix modes (0644/0755) made on "Unix", no extra fields except ZIP64, no
data descriptors. Sizes and CRC always sit in the local header: an entry whose values are
not known when its header is written is streamed and its header patched in place
afterwards (the output must be seekable). ZIP64 is used, like CPython's ``zipfile``,
once a size or offset exceeds 2 GiB - 1 or there are more than 65535 entries; an entry
whose size is unknown or close to that limit reserves a ZIP64 extra in its local header.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from typing import BinaryIO, NamedTuple

from kpack.errors import PackagingError

__all__ = ["DEFLATED", "STORED", "ZipEntry", "ZipWriter", "needs_zip64_header"]

STORED = 0
DEFLATED = 8

# Module constants (not literals) so tests can exercise ZIP64 without writing 2 GiB.
ZIP64_LIMIT = (1 << 31) - 1
ZIP_FILECOUNT_LIMIT = 0xFFFF

_VERSION = 20  # 2.0: deflate
_VERSION_ZIP64 = 45  # 4.5: ZIP64
_MADE_BY_UNIX = 3
_FLAG_UTF8 = 0x800
_MASK32 = 0xFFFFFFFF

_LOCAL = struct.Struct("<IHHHHHIIIHH")
_CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")
_END = struct.Struct("<IHHHHIIH")
_END64 = struct.Struct("<IQHHIIQQQQ")
_LOCATOR64 = struct.Struct("<IIQI")
_SIG_LOCAL = 0x04034B50
_SIG_CENTRAL = 0x02014B50
_SIG_END = 0x06054B50
_SIG_END64 = 0x06064B50
_SIG_LOCATOR64 = 0x07064B50
_ZIP64_EXTRA_ID = 0x0001


class _LocalHeader(NamedTuple):
    """APPNOTE 4.3.7, packed by :data:`_LOCAL`."""

    signature: int
    version_needed: int
    flags: int
    method: int
    mod_time: int
    mod_date: int
    crc32: int
    compressed_size: int
    uncompressed_size: int
    name_length: int
    extra_length: int


class _CentralHeader(NamedTuple):
    """APPNOTE 4.3.12, packed by :data:`_CENTRAL`."""

    signature: int
    version_made_by: int
    version_needed: int
    flags: int
    method: int
    mod_time: int
    mod_date: int
    crc32: int
    compressed_size: int
    uncompressed_size: int
    name_length: int
    extra_length: int
    comment_length: int
    disk_start: int
    internal_attr: int
    external_attr: int
    local_header_offset: int


class _End(NamedTuple):
    """APPNOTE 4.3.16 (end of central directory), packed by :data:`_END`."""

    signature: int
    disk: int
    cd_disk: int
    disk_entries: int
    total_entries: int
    cd_size: int
    cd_offset: int
    comment_length: int


class _End64(NamedTuple):
    """APPNOTE 4.3.14 (ZIP64 end of central directory), packed by :data:`_END64`."""

    signature: int
    record_size: int
    version_made_by: int
    version_needed: int
    disk: int
    cd_disk: int
    disk_entries: int
    total_entries: int
    cd_size: int
    cd_offset: int


def needs_zip64_header(size: int | None) -> bool:
    """Whether an entry of ``size`` bytes (``None``: unknown) reserves a local ZIP64 extra.

    Leaves 5% for deflate overhead on incompressible data, as ``zipfile`` does.
    """
    return size is None or size * 21 > ZIP64_LIMIT * 20


def _dos_datetime(epoch: int) -> tuple[int, int]:
    t = time.gmtime(epoch)
    dos_time = (t.tm_hour << 11) | (t.tm_min << 5) | (t.tm_sec // 2)
    dos_date = ((t.tm_year - 1980) << 9) | (t.tm_mon << 5) | t.tm_mday
    return dos_time, dos_date


@dataclass(kw_only=True)
class ZipEntry:
    """One entry as recorded in the central directory (mutable until it is ended)."""

    name: bytes
    flags: int
    method: int
    external_attr: int
    zip64_header: bool
    offset: int
    crc: int
    compressed_size: int
    file_size: int


class ZipWriter:
    """Append entries to a seekable binary file, then :meth:`close` writes the directory."""

    def __init__(self, fp: BinaryIO, epoch: int) -> None:
        self._fp = fp
        self._pos = fp.tell()
        self._start = self._pos
        self._time, self._date = _dos_datetime(epoch)
        self._entries: list[ZipEntry] = []

    @property
    def position(self) -> int:
        return self._pos

    def begin(
        self,
        arcname: str,
        *,
        method: int,
        executable: bool,
        zip64_header: bool,
        crc: int = 0,
        compressed_size: int = 0,
        file_size: int = 0,
    ) -> ZipEntry:
        """Write a local header; values not known yet are fixed later by :meth:`end`."""
        name = arcname.encode("utf-8")
        mode = 0o100755 if executable else 0o100644
        entry = ZipEntry(
            name=name,
            flags=0 if name.isascii() else _FLAG_UTF8,
            method=method,
            external_attr=mode << 16,
            zip64_header=zip64_header,
            offset=self._pos,
            crc=crc,
            compressed_size=compressed_size,
            file_size=file_size,
        )
        self._check_sizes(entry)
        self.write(self._local_header(entry))
        return entry

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._fp.write(data)
        self._pos += len(data)

    def end(self, entry: ZipEntry, *, crc: int, compressed_size: int, file_size: int) -> None:
        """Record the final values; patch the local header if they differ from it."""
        if (crc, compressed_size, file_size) != (
            entry.crc,
            entry.compressed_size,
            entry.file_size,
        ):
            entry.crc, entry.compressed_size, entry.file_size = crc, compressed_size, file_size
            self._check_sizes(entry)
            self._fp.seek(entry.offset)
            self._fp.write(self._local_header(entry))
            self._fp.seek(self._pos)
        self._entries.append(entry)

    def close(self) -> int:
        """Write the central directory and end records; return the archive size."""
        cd_offset = self._pos - self._start
        for entry in self._entries:
            self.write(self._central_header(entry))
        cd_size = self._pos - self._start - cd_offset
        count = len(self._entries)
        if count > ZIP_FILECOUNT_LIMIT or cd_offset > ZIP64_LIMIT or cd_size > ZIP64_LIMIT:
            end64_offset = self._pos - self._start
            end64 = _End64(
                signature=_SIG_END64,
                record_size=44,
                version_made_by=(_MADE_BY_UNIX << 8) | _VERSION_ZIP64,
                version_needed=_VERSION_ZIP64,
                disk=0,
                cd_disk=0,
                disk_entries=count,
                total_entries=count,
                cd_size=cd_size,
                cd_offset=cd_offset,
            )
            self.write(_END64.pack(*end64))
            self.write(_LOCATOR64.pack(_SIG_LOCATOR64, 0, end64_offset, 1))
        small_count = min(count, 0xFFFF)
        end = _End(
            signature=_SIG_END,
            disk=0,
            cd_disk=0,
            disk_entries=small_count,
            total_entries=small_count,
            cd_size=min(cd_size, _MASK32),
            cd_offset=min(cd_offset, _MASK32),
            comment_length=0,
        )
        self.write(_END.pack(*end))
        self._fp.flush()
        return self._pos - self._start

    def _check_sizes(self, entry: ZipEntry) -> None:
        too_big = max(entry.file_size, entry.compressed_size) > ZIP64_LIMIT
        if too_big and not entry.zip64_header:
            raise PackagingError(
                "member outgrew the 2 GiB ZIP limit after its header was written "
                "(did it change while being read?)",
                path=entry.name.decode("utf-8"),
            )

    def _local_header(self, entry: ZipEntry) -> bytes:
        if entry.zip64_header:
            extra = struct.pack(
                "<HHQQ", _ZIP64_EXTRA_ID, 16, entry.file_size, entry.compressed_size
            )
            sizes = (_MASK32, _MASK32)
            version = _VERSION_ZIP64
        else:
            extra, sizes, version = b"", (entry.compressed_size, entry.file_size), _VERSION
        header = _LocalHeader(
            signature=_SIG_LOCAL,
            version_needed=version,
            flags=entry.flags,
            method=entry.method,
            mod_time=self._time,
            mod_date=self._date,
            crc32=entry.crc,
            compressed_size=sizes[0],
            uncompressed_size=sizes[1],
            name_length=len(entry.name),
            extra_length=len(extra),
        )
        return _LOCAL.pack(*header) + entry.name + extra

    def _central_header(self, entry: ZipEntry) -> bytes:
        offset = entry.offset - self._start
        fields: list[int] = []
        file_size, compressed_size = entry.file_size, entry.compressed_size
        if file_size > ZIP64_LIMIT:
            fields.append(file_size)
            file_size = _MASK32
        if compressed_size > ZIP64_LIMIT:
            fields.append(compressed_size)
            compressed_size = _MASK32
        if offset > ZIP64_LIMIT:
            fields.append(offset)
            offset = _MASK32
        extra = b""
        if fields:
            extra = struct.pack(f"<HH{len(fields)}Q", _ZIP64_EXTRA_ID, 8 * len(fields), *fields)
        version = _VERSION_ZIP64 if fields or entry.zip64_header else _VERSION
        header = _CentralHeader(
            signature=_SIG_CENTRAL,
            version_made_by=(_MADE_BY_UNIX << 8) | version,
            version_needed=version,
            flags=entry.flags,
            method=entry.method,
            mod_time=self._time,
            mod_date=self._date,
            crc32=entry.crc,
            compressed_size=compressed_size,
            uncompressed_size=file_size,
            name_length=len(entry.name),
            extra_length=len(extra),
            comment_length=0,
            disk_start=0,
            internal_attr=0,
            external_attr=entry.external_attr,
            local_header_offset=offset,
        )
        return _CENTRAL.pack(*header) + entry.name + extra
