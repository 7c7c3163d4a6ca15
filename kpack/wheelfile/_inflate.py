"""A wheel member's bytes, inflated by ISA-L when it is deflated.

``zipfile`` inflates with the standard ``zlib``; ISA-L's inflate (PyPI ``isal``) does the
same work in about half the time (jax-rocm7-pjrt's 520 MB library: 0.48 s instead of
0.96 s), and inflating the input is the one part of a wheel split that cannot be spread
over threads. Inflate has one right answer, so the bytes do not depend on the library:
ISA-L is an optional accelerator, and without it (TheRock's build venv has no ``isal``)
``zlib`` inflates the same bytes (``tests/kpack/wheelfile/test_accelerators.py``).

``zipfile`` still finds and checks the member: it is opened through a copy of its entry
that says *stored*, so ``zipfile`` checks the local header and hands over the raw deflate
stream, which is inflated here in bounded pieces (never more than ``chunk`` bytes out of
one call, whatever the stream claims). The caller counts the bytes against the declared
size; the CRC-32 is checked here at the end of the stream, as ``zipfile`` would, and a
stream that ends early, runs on, or does not decode is :class:`zipfile.BadZipFile`.
Members that are not deflated are read through ``zipfile`` as they are.

Asked to (``streams``), it also describes a deflated member's stream for reuse
(:class:`~kpack.wheelfile._reuse.DeflateStream`: where it lies in the archive, the sha256 of
its compressed bytes) and, with ``blocks``, where each of its deflate blocks starts, found
by zlib's inflate run in ``Z_BLOCK`` steps instead of ISA-L's (about 1.8x the time; only
worth it for a member that will be edited, see :mod:`kpack.wheelfile._reuse`). That index
is bounded by the member's size, not its block count: a stream with far more blocks than
bytes to show for them is inflated without one, and its member is copied whole or
compressed anew, never spliced (:class:`~kpack.wheelfile._zstream.BlockInflater`).
"""

from __future__ import annotations

import hashlib
import logging
import queue
import struct
import threading
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from kpack.common import cancel
from kpack.errors import PackagingError
from kpack.wheelfile._reuse import DeflateStream

if TYPE_CHECKING:  # the shared zlib (ctypes) is loaded when a member's blocks are indexed
    from kpack.wheelfile._zstream import ZlibLibrary

__all__ = ["member_chunks", "read_ahead", "starts_with"]

log = logging.getLogger(__name__)

#: ISA-L's ``isal_zlib``, else ``zlib``: the same inflate API and the same bytes out.
_inflate_lib: ModuleType
try:
    from isal import isal_zlib as _inflate_lib
except ImportError:  # the accelerator is optional
    _inflate_lib = zlib

_RAW_CHUNK = 1 << 20
_InflateError: type[Exception] = _inflate_lib.error


def member_chunks(
    archive: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    chunk: int,
    *,
    streams: list[DeflateStream] | None = None,
    blocks: bool = False,
) -> Iterator[bytes]:
    """The inflated bytes of ``info`` in ``archive``, at most ``chunk`` bytes at a time.

    With ``streams``, a deflated member's :class:`DeflateStream` is appended to it once the
    stream has been read to its end and checked (its block starts too with ``blocks``,
    where a shared zlib is at hand)."""
    if info.compress_type != zipfile.ZIP_DEFLATED:
        with archive.open(info) as src:
            while data := src.read(chunk):
                yield data
        return
    raw = zipfile.ZipInfo(info.filename)  # no CRC set: zipfile does not check the raw bytes
    raw.header_offset = info.header_offset
    raw.compress_size = raw.file_size = info.compress_size
    raw.compress_type = zipfile.ZIP_STORED
    raw.flag_bits = info.flag_bits
    offset = _data_offset(archive, info) if streams is not None else None
    zlib_lib = _zlib_library() if blocks else None
    if zlib_lib is not None and streams is not None and offset is not None:
        yield from _indexed(
            archive, info, raw, chunk=chunk, zlib_lib=zlib_lib, streams=streams, offset=offset
        )
        return
    crc = 0
    raw_hash = hashlib.sha256()
    inflater = _inflate_lib.decompressobj(-15)
    with archive.open(raw) as src:
        pending, exhausted = b"", False
        while not inflater.eof:
            if not pending and not exhausted:
                pending = src.read(_RAW_CHUNK)
                exhausted = not pending
                raw_hash.update(pending)
            try:  # with no input left this drains what the inflater still holds
                data = inflater.decompress(pending, chunk)
            except _InflateError as exc:
                raise zipfile.BadZipFile(f"the deflate stream does not decode: {exc}") from None
            pending = inflater.unconsumed_tail
            if data:
                crc = zlib.crc32(data, crc)
                yield data
            elif exhausted and not pending and not inflater.eof:
                raise zipfile.BadZipFile("the deflate stream ends before its end block")
        if inflater.unused_data or pending or src.read(1):
            raise zipfile.BadZipFile("data after the end of the deflate stream")
    if crc != info.CRC:
        raise zipfile.BadZipFile(f"Bad CRC-32 for file {info.filename!r}")
    if streams is not None and offset is not None:
        streams.append(_stream(archive, info, offset, raw_hash.digest()))


def starts_with(archive: zipfile.ZipFile, info: zipfile.ZipInfo, magic: tuple[bytes, ...]) -> bool:
    """Whether the deflated member's bytes start with one of ``magic`` (inflating a few)."""
    offset = _data_offset(archive, info) if info.compress_type == zipfile.ZIP_DEFLATED else None
    if offset is None:
        return False
    assert archive.fp is not None
    archive.fp.seek(offset)
    head = archive.fp.read(min(info.compress_size, 4096))
    try:
        return zlib.decompressobj(-15).decompress(head, max(map(len, magic))).startswith(magic)
    except zlib.error:
        return False  # the full read reports the damage


def _indexed(
    archive: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    raw: zipfile.ZipInfo,
    *,
    chunk: int,
    zlib_lib: ZlibLibrary,
    streams: list[DeflateStream],
    offset: int,
) -> Iterator[bytes]:
    """:func:`member_chunks` by zlib in ``Z_BLOCK`` steps, recording where blocks start."""
    crc = 0
    raw_hash = hashlib.sha256()
    inflater = zlib_lib.inflater()

    def pieces() -> Iterator[bytes]:
        while piece := src.read(_RAW_CHUNK):
            raw_hash.update(piece)
            yield piece

    with archive.open(raw) as src:
        try:
            for data in inflater.run(pieces(), chunk, block_crcs=True, bounded=True):
                crc = zlib.crc32(data, crc)
                yield data
        except PackagingError as exc:
            raise zipfile.BadZipFile(str(exc)) from None
        if inflater.consumed != info.compress_size:  # what zlib left unread, or never reached
            raise zipfile.BadZipFile("data after the end of the deflate stream")
    if crc != info.CRC:
        raise zipfile.BadZipFile(f"Bad CRC-32 for file {info.filename!r}")
    stream = _stream(archive, info, offset, raw_hash.digest())
    if not inflater.indexed:  # too many blocks for its bytes: copied whole, never spliced
        log.debug("%s: blocks not indexed (more than its bytes allow)", info.filename)
        streams.append(stream)
        return
    starts = tuple(out for out, _ in inflater.blocks)
    bits = tuple(bit for _, bit in inflater.blocks)
    streams.append(stream.with_blocks(starts, bits, tuple(inflater.crcs)))


def _stream(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, offset: int, raw_digest: bytes
) -> DeflateStream:
    assert archive.filename is not None
    return DeflateStream(
        archive=Path(archive.filename),
        offset=offset,
        size=info.compress_size,
        length=info.file_size,
        crc=info.CRC,
        raw_digest=raw_digest,
    )


def _zlib_library() -> ZlibLibrary | None:
    from kpack.wheelfile._zstream import zlib_library

    return zlib_library()


def _data_offset(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> int | None:
    """Where the member's compressed bytes start in the archive file (after its local
    header), or ``None`` when the archive was not opened from a named file. Call it with no
    member of ``archive`` open."""
    if not isinstance(archive.filename, str) or archive.fp is None:
        return None
    fp = archive.fp
    fp.seek(info.header_offset)
    header = fp.read(30)
    if len(header) != 30 or header[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"bad local header for {info.filename!r}")
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    return int(info.header_offset) + 30 + int(name_len) + int(extra_len)


def read_ahead(source: Iterator[bytes], depth: int) -> Iterator[bytes]:
    """The chunks of ``source``, made (inflated, CRC-checked) on a second thread while the
    caller hashes and writes the ones before: both sides release the GIL, so a large member
    costs about the longer of the two instead of their sum. At most ``depth`` chunks wait; an
    error on the reading side is raised here; stopping early stops the reader."""
    ready: queue.Queue[bytes | BaseException | None] = queue.Queue(depth)
    stop = threading.Event()

    def put(item: bytes | BaseException | None) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def reader() -> None:
        try:
            for chunk in source:
                if not put(chunk):
                    return
            put(None)
        except BaseException as exc:  # handed to the caller, raised there
            put(exc)
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=reader, name="wheel-inflate", daemon=True)
    thread.start()
    try:
        while (item := cancel.get(ready)) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        thread.join()
