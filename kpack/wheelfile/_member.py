"""Archive members: a validated name plus content that is read once, in fixed-size chunks.

Shared by the wheel and sdist writers. A member's content comes from a file (streamed),
literal bytes, or a factory returning a chunk iterator. :func:`open_source` turns any of
them into ``(chunk, is_last)`` pairs whose boundaries depend only on the content: every
chunk holds exactly ``chunk_size`` bytes except the last, and an empty source is a single
empty last chunk. Content is identified by its first bytes (:func:`looks_compressed`).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TypeAlias

from kpack.errors import PackagingError
from kpack.wheelfile._reuse import Reuse

__all__ = [
    "ContentSource",
    "Generated",
    "Member",
    "SourceStream",
    "looks_compressed",
    "open_source",
    "read_all",
    "validate_arcname",
]


@dataclass(frozen=True)
class Generated:
    """Content made on demand (a transformed binary streamed from its input, an archive
    from its spools) whose ``size`` is known before it is made: the writers plan for it
    as for a file, and a factory that yields another size is an error."""

    size: int
    chunks: Callable[[], Iterator[bytes | memoryview]]

    def __call__(self) -> Iterator[bytes | memoryview]:
        return self.chunks()


ContentSource: TypeAlias = Path | bytes | Callable[[], Iterator[bytes | memoryview]]
"""A file to stream, literal bytes, or a factory of a chunk iterator (:class:`Generated`
when its size is known)."""

# Magic numbers of formats that deflate cannot shrink further (checked on the first bytes).
_COMPRESSED_MAGIC: tuple[bytes, ...] = (
    b"\x28\xb5\x2f\xfd",  # zstd frame
    b"\xfd7zXZ\x00",  # xz
    b"\x1f\x8b",  # gzip
    b"PK\x03\x04",  # zip (also wheels, jars)
    b"PK\x05\x06",  # empty zip
)
_KPAK = b"KPAK"
_ZSTD_FRAME = b"\x28\xb5\x2f\xfd"
# A zstd-per-kernel .kpack has its first frame at 64 + 8 (num_kernels, frame_size[0]); a
# scheme-none archive (rocm-kpack's older writer) holds raw code objects there instead.
_KPAK_FIRST_FRAME = 72
_BZIP2_LEVELS = b"123456789"
_CONTROL = re.compile("[\x00-\x1f\x7f]")


def looks_compressed(head: bytes) -> bool:
    """True when ``head`` (the first bytes of a member) starts a compressed format."""
    if head.startswith(_KPAK):  # compressed only in the zstd-per-kernel scheme
        return head[_KPAK_FIRST_FRAME : _KPAK_FIRST_FRAME + 4] == _ZSTD_FRAME
    if head.startswith(_COMPRESSED_MAGIC):
        return True
    return len(head) >= 4 and head[:3] == b"BZh" and head[3] in _BZIP2_LEVELS


def validate_arcname(arcname: str) -> None:
    """Reject names that are not a relative POSIX path of plain segments."""
    problems: list[str] = []
    if not isinstance(arcname, str) or not arcname:
        raise PackagingError("archive member name must be a non-empty string", path=repr(arcname))
    if arcname.startswith("/"):
        problems.append("must not start with '/'")
    if "\\" in arcname:
        problems.append("must use '/' as separator, not '\\'")
    if _CONTROL.search(arcname):
        problems.append("contains a control character")
    segments = arcname.split("/")
    if any(seg == "" for seg in segments[1:-1]) or (len(segments) > 1 and segments[-1] == ""):
        problems.append("contains an empty segment or a trailing '/'")
    if any(seg in (".", "..") for seg in segments):
        problems.append("contains a '.' or '..' segment")
    try:
        encoded = arcname.encode("utf-8")
    except UnicodeEncodeError:
        problems.append("is not encodable as UTF-8")
    else:
        if len(encoded) > 0xFFFF:
            problems.append("is longer than 65535 bytes")
    if problems:
        raise PackagingError("invalid archive member name", path=arcname, problems=problems)


@dataclass(frozen=True)
class Member:
    """One file of an archive.

    ``compress``: ``None`` lets the writer decide (store content that is already
    compressed, deflate the rest when compression is on); ``True``/``False`` force it.
    ``reuse``: where the content's bytes are those of a deflated input member, whose
    compressed bytes the writer may copy instead of compressing (:mod:`kpack.wheelfile._reuse`).
    ``shared``: content largely repeated in other archives of the same run (a legacy build's
    devel tarball, one per family): deflated in fixed chunks however small it is, each
    looked up in the run's memo first (:mod:`kpack.wheelfile._memo`).
    """

    arcname: str
    source: ContentSource
    executable: bool = False
    compress: bool | None = None
    reuse: Reuse | None = None
    shared: bool = False

    def __post_init__(self) -> None:
        validate_arcname(self.arcname)
        if isinstance(self.source, str) or not (
            isinstance(self.source, (Path, bytes)) or callable(self.source)
        ):
            raise PackagingError(
                f"content source must be a Path, bytes or a callable, "
                f"not {type(self.source).__name__}",
                path=self.arcname,
            )


@dataclass(frozen=True)
class SourceStream:
    """An opened source: ``size`` if known before reading, and its chunks."""

    size: int | None
    chunks: Iterator[tuple[bytes, bool]]


@contextmanager
def open_regular(
    member: Member, source: Path, *, buffering: int = -1
) -> Iterator[tuple[int, BinaryIO]]:
    """Open a member's source file; it must be a regular file. Yields (size, handle)."""
    try:
        handle = open(source, "rb", buffering=buffering)  # noqa: SIM115 - closed below
    except OSError as exc:
        raise PackagingError(f"cannot read member {member.arcname}: {exc}", path=source) from exc
    with handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise PackagingError(f"member {member.arcname} is not a regular file", path=source)
        yield info.st_size, handle


@contextmanager
def open_source(member: Member, chunk_size: int) -> Iterator[SourceStream]:
    """Open ``member``'s content as fixed-size ``(chunk, is_last)`` pairs."""
    source = member.source
    if isinstance(source, bytes):
        yield SourceStream(len(source), _with_last(_bytes_pieces(source, chunk_size)))
    elif isinstance(source, Path):
        with open_regular(member, source, buffering=0) as (size, handle):
            pieces = _file_pieces(handle, chunk_size, source, size)
            yield SourceStream(size, _with_last(pieces))
    elif isinstance(source, Generated):
        generated = _generated_pieces(source(), chunk_size, member.arcname)
        pieces = _counted(generated, source.size, member.arcname)
        yield SourceStream(source.size, _with_last(pieces))
    else:
        pieces = _generated_pieces(source(), chunk_size, member.arcname)
        yield SourceStream(None, _with_last(pieces))


def read_all(member: Member) -> bytes:
    """The whole content of ``member`` (for small members only)."""
    with open_source(member, 1 << 20) as stream:
        return b"".join(chunk for chunk, _ in stream.chunks)


def _with_last(pieces: Iterable[bytes]) -> Iterator[tuple[bytes, bool]]:
    it = iter(pieces)
    prev = next(it, None)
    if prev is None:
        yield b"", True
        return
    for cur in it:
        yield prev, False
        prev = cur
    yield prev, True


def _bytes_pieces(data: bytes, chunk_size: int) -> Iterator[bytes]:
    if len(data) <= chunk_size:
        if data:
            yield data
        return
    view = memoryview(data)
    for start in range(0, len(data), chunk_size):
        yield bytes(view[start : start + chunk_size])


def _read_full(handle: BinaryIO, size: int) -> bytes:
    first = handle.read(size) or b""
    if len(first) == size or not first:
        return first
    parts = [first]
    got = len(first)
    while got < size:
        more = handle.read(size - got) or b""
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def _file_pieces(handle: BinaryIO, chunk_size: int, path: Path, expected: int) -> Iterator[bytes]:
    """Read the size seen at open in exact-size reads, then check nothing follows."""
    total = 0
    try:
        while total < expected:
            piece = _read_full(handle, min(chunk_size, expected - total))
            if not piece:
                break
            total += len(piece)
            yield piece
        grew = bool(handle.read(1))
    except OSError as exc:
        raise PackagingError(f"cannot read: {exc}", path=path) from exc
    if total != expected or grew:
        raise PackagingError(
            f"file changed while being read ({expected} bytes at open, "
            f"{'more than ' if grew else ''}{total} read)",
            path=path,
        )


def _counted(pieces: Iterator[bytes], size: int, arcname: str) -> Iterator[bytes]:
    total = 0
    for piece in pieces:
        total += len(piece)
        if total > size:
            break
        yield piece
    if total != size:
        raise PackagingError(
            f"generated content gave {'more than ' if total > size else ''}{total} bytes, "
            f"not the {size} declared",
            path=arcname,
        )


def _generated_pieces(
    chunks: Iterator[bytes | memoryview], chunk_size: int, arcname: str
) -> Iterator[bytes]:
    """Cut what a generator yields into ``chunk_size`` pieces: a full chunk of ``bytes``
    passes as it is, smaller ``bytes`` are joined once; a mutable piece (a buffer the
    generator may fill again) is copied when it comes."""
    held: list[bytes] = []
    size = 0
    for piece in chunks:
        if not isinstance(piece, (bytes, bytearray, memoryview)):
            raise PackagingError(
                f"content generator yielded {type(piece).__name__}, not bytes", path=arcname
            )
        if not held and isinstance(piece, bytes) and len(piece) == chunk_size:
            yield piece
            continue
        if not isinstance(piece, bytes):
            piece = bytes(piece)
        if not piece:
            continue
        held.append(piece)
        size += len(piece)
        if size < chunk_size:
            continue
        data = b"".join(held)
        full = size - size % chunk_size
        if full == size == chunk_size:
            yield data
        else:
            view = memoryview(data)
            for start in range(0, full, chunk_size):
                yield bytes(view[start : start + chunk_size])
            view.release()
        held = [data[full:]] if full < size else []
        size -= full
    if held:
        yield b"".join(held)
