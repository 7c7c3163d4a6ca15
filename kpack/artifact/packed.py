"""TheRock's artifact archives, read in one streaming pass.

TheRock moves artifacts between machines as one archive per artifact directory, named
after it: ``{name}_{component}_{target}.tar.zst`` (zstd, ``artifact_manager.py push``'s
default), ``.tar.xz``, or a plain ``.tar``; ``artifact_manifest.txt`` is the first member,
the stage trees follow at their relative paths (``fileset_tool.py artifact-archive``), and a
``<archive>.sha256sum`` sidecar may hold the digest of the archive's bytes.

:func:`unpack_artifact` reads one archive front to back exactly once: ``tarfile`` parses the
headers of a streaming decompressor's output, read forward only, and each member's data goes
straight from the decompressor into its file (memory stays flat whatever the archive's size);
it lays the members out as an artifact directory inside a spool directory the caller owns and
removes. The spool is what the rest of the build reads with random access (ELF headers,
edits, copies); the scan of that directory is then the very scan an extracted tree gets
(:mod:`kpack.artifact.tree`), so names, manifests, stage dirs and symlinks inside the
artifact are checked by the same code. What only an archive can hold is refused here, each
as one error naming the archive and the member: a path that is absolute or climbs out, a
member below a symlink member, a member given twice, a device or FIFO, a hardlink to
anything but an earlier regular file of the same archive, a first member that is not the
manifest; and a truncated, corrupt or wrongly compressed archive, or one whose sidecar
digest does not match. Modes are kept as TheRock's ``fetch`` extracts them (tarfile's
``tar`` filter: no setuid/setgid/sticky bits, no group or other write bits).
"""

from __future__ import annotations

import hashlib
import lzma
import os
import stat
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from kpack.artifact.names import MANIFEST, ArtifactId
from kpack.common.safepath import safe_relpath
from kpack.errors import ArtifactError

__all__ = [
    "ARCHIVE_SUFFIXES",
    "PackedArtifact",
    "archive_id",
    "naming_archive",
    "unpack_artifact",
]

#: The archive forms an artifact may come in; TheRock writes the first two.
ARCHIVE_SUFFIXES = (".tar.zst", ".tar.xz", ".tar")
#: The digest sidecar TheRock writes beside an archive (``artifact_manager.py``).
SIDECAR_SUFFIX = ".sha256sum"

_MAGIC = {".tar.zst": b"\x28\xb5\x2f\xfd", ".tar.xz": b"\xfd7zXZ\x00"}
_KIND = {".tar.zst": "zstd", ".tar.xz": "xz", ".tar": "tar"}
_CHUNK = 1 << 20
_BLOCK = 512
_END = 2 * _BLOCK  # tar's end-of-archive marker: two zero blocks
#: tarfile's ``tar`` filter, as TheRock's ``fetch`` extracts: these mode bits go.
_DROPPED_BITS = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX | stat.S_IWGRP | stat.S_IWOTH


@dataclass(frozen=True, kw_only=True)
class PackedArtifact:
    """One archive found in an input directory (read by :func:`unpack_artifact`)."""

    id: ArtifactId
    path: Path
    size: int

    @property
    def suffix(self) -> str:
        return next(s for s in ARCHIVE_SUFFIXES if self.path.name.endswith(s))


def archive_id(name: str) -> tuple[ArtifactId | None, str] | None:
    """``(id, suffix)`` for a file named like an artifact archive (``id`` is None when the
    stem does not parse); None for any other name."""
    for suffix in ARCHIVE_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return ArtifactId.parse(name[: -len(suffix)]), suffix
    return None


class _Forward:
    """The decompressed tar stream as tarfile's random-access mode reads a file: ``tell`` and
    ``seek``, forward only (a skip decompresses and drops), so member data is read straight
    into the spool without tarfile's stream buffer. It counts what it reads and keeps the last
    1 KiB: a whole tar ends in two zero blocks, so an archive cut between two members is told
    from a whole one."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.total = 0
        self.tail = b""

    def _seen(self, data: bytes | memoryview) -> None:
        self.total += len(data)
        self.tail = (self.tail + bytes(data[-_END:]))[-_END:]

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size)
        self._seen(data)
        return data

    def readinto(self, buffer: memoryview) -> int:
        count = self.stream.readinto(buffer)  # type: ignore[attr-defined]
        self._seen(buffer[:count])
        return count  # type: ignore[no-any-return]

    def tell(self) -> int:
        return self.total

    def seek(self, offset: int, whence: int = 0) -> int:
        target = offset if whence == 0 else self.total + offset
        if whence not in (0, 1) or target < self.total:
            raise tarfile.ReadError("the archive is read forward only")
        while self.total < target:
            if not self.read(min(_CHUNK, target - self.total)):
                break
        return self.total

    def drain(self) -> None:
        while self.read(_CHUNK):
            pass

    @property
    def whole(self) -> bool:
        return self.total % 512 == 0 and self.tail == bytes(_END)


class _Hashing:
    """The raw archive, read forward only, hashed as it goes (for the sidecar)."""

    def __init__(self, raw: BinaryIO, *, hashing: bool) -> None:
        self.raw = raw
        self.digest = hashlib.sha256() if hashing else None

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size)
        if self.digest is not None:
            self.digest.update(data)
        return data

    def readinto(self, buffer: bytearray | memoryview) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def drain(self) -> None:
        """Read to the end (what follows tar's end marker counts in the digest too)."""
        while self.read(_CHUNK):
            pass


@contextmanager
def _decompressed(packed: PackedArtifact, raw: _Hashing) -> Iterator[BinaryIO]:
    with packed.path.open("rb") as peek:
        head = peek.read(6)
    magic = _MAGIC.get(packed.suffix)
    if magic is not None and not head.startswith(magic):
        found = next((_KIND[s] for s, m in _MAGIC.items() if head.startswith(m)), "unknown")
        raise ArtifactError(
            f"is not a {_KIND[packed.suffix]} stream (its first bytes are {found}'s); "
            "the name's suffix must match the compression",
            path=packed.path,
        )
    if packed.suffix == ".tar.zst":
        import zstandard

        reader = zstandard.ZstdDecompressor().stream_reader(
            raw,  # type: ignore[arg-type]  # a reader: read() is all it calls
            read_across_frames=True,
        )
        with reader:
            yield reader
    elif packed.suffix == ".tar.xz":
        with lzma.LZMAFile(raw) as stream:  # type: ignore[arg-type]
            yield stream  # type: ignore[misc]
    else:
        yield raw  # type: ignore[misc]


def _read_sidecar(packed: PackedArtifact) -> str | None:
    sidecar = packed.path.with_name(packed.path.name + SIDECAR_SUFFIX)
    if not sidecar.is_file():
        return None
    words = sidecar.read_text(encoding="utf-8", errors="replace").split()
    if not words:
        raise ArtifactError("is empty", path=sidecar)
    return words[0].lower()


def unpack_artifact(packed: PackedArtifact, spool: Path) -> Path:
    """Stream ``packed`` once into ``spool/<artifact dir name>``; return that directory.

    ``spool`` must exist and be private to the caller; the directory made in it must not
    exist yet (one artifact, one archive: the caller refuses a second source)."""
    expected = _read_sidecar(packed)
    target = spool / packed.id.dirname
    target.mkdir()
    codec_errors = _codec_errors()
    with packed.path.open("rb") as handle:
        raw = _Hashing(handle, hashing=expected is not None)
        try:
            with _decompressed(packed, raw) as stream:
                tail = _Forward(stream)
                _Unpacker(packed, target, tail).run()
                tail.drain()
            raw.drain()
            if not tail.whole:
                raise tarfile.ReadError("the archive ends before tar's end-of-archive marker")
        except (tarfile.TarError, EOFError, *codec_errors) as exc:  # type: ignore[misc]
            kind = _KIND[packed.suffix]
            raise ArtifactError(
                f"not a readable {kind} artifact archive (truncated or corrupt): {exc}",
                path=packed.path,
            ) from exc
    if raw.digest is not None and raw.digest.hexdigest() != expected:
        raise ArtifactError(
            f"sha256 {raw.digest.hexdigest()} does not match {packed.path.name}{SIDECAR_SUFFIX} "
            f"({expected})",
            path=packed.path,
        )
    return target


def _codec_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [lzma.LZMAError]
    try:
        import zstandard

        errors.append(zstandard.ZstdError)
    except ImportError:  # pragma: no cover - zstandard is a dependency
        pass
    return tuple(errors)


class _Unpacker:
    """The one pass over one archive's members."""

    def __init__(self, packed: PackedArtifact, target: Path, stream: _Forward) -> None:
        self.packed = packed
        self.target = target
        self.stream = stream
        self.seen: dict[str, str] = {}  # member path -> "file" | "dir" | "symlink"
        self.links: set[str] = set()
        self.made: set[Path] = {target}  # directories known to exist
        self.buffer = memoryview(bytearray(_CHUNK))

    def fail(self, member: str, message: str) -> ArtifactError:
        return ArtifactError(f"member {member!r}: {message}", path=self.packed.path)

    def run(self) -> None:
        # tarfile reads each header at the offset where the previous member ended; the
        # member data between is copied by _member, so every seek it asks for is forward
        with tarfile.open(fileobj=self.stream, mode="r:") as tar:  # type: ignore[call-overload]
            first = True
            for info in tar:
                if first and (info.name != MANIFEST or not info.isreg()):
                    raise ArtifactError(
                        f"the first member must be the regular file {MANIFEST} (as TheRock "
                        f"writes it), not {info.name!r}",
                        path=self.packed.path,
                    )
                first = False
                self._member(info)
                self.stream.seek(tar.offset)  # the padding up to the next header
            if first:
                raise ArtifactError(f"holds no members (no {MANIFEST})", path=self.packed.path)
            self._at_end(tar.offset)

    def _at_end(self, offset: int) -> None:
        """tarfile stops at the first block that is no member header, the damaged header of
        a member as well as tar's end-of-archive marker: here it must be the marker (two
        zero blocks), or the members behind a damaged header would be dropped unseen. A
        stream that ends before is left to the end-of-archive check."""
        if self.stream.total - offset != _BLOCK:
            return
        if self.stream.tail[-_BLOCK:] == bytes(_BLOCK):
            second = self.stream.read(_BLOCK)
            if len(second) < _BLOCK or second == bytes(_BLOCK):
                return
            offset += _BLOCK
        raise tarfile.ReadError(
            f"the block at offset {offset} of the tar stream is neither a member header nor "
            "tar's end-of-archive marker"
        )

    def _relpath(self, name: str) -> str:
        rel = safe_relpath(
            name, what="member", source=self.packed.path, error=ArtifactError, allow_dir_suffix=True
        ).as_posix()
        if rel in self.seen:
            raise self.fail(rel, "is in the archive twice")
        below = next((str(p) for p in PurePosixPath(rel).parents if str(p) in self.links), None)
        if below is not None:
            raise self.fail(rel, f"lies below the symlink member {below!r}")
        bad = next(
            (str(p) for p in PurePosixPath(rel).parents if self.seen.get(str(p)) == "file"), None
        )
        if bad is not None:
            raise self.fail(rel, f"lies below the regular file member {bad!r}")
        return rel

    def _mkdirs(self, path: Path) -> None:
        if path not in self.made:
            path.mkdir(parents=True, exist_ok=True)
            self.made.add(path)

    def _member(self, info: tarfile.TarInfo) -> None:
        rel = self._relpath(info.name)
        path = self.target / rel
        mode = info.mode & 0o7777 & ~_DROPPED_BITS
        if info.isdir():
            self._mkdirs(path)
            self.seen[rel] = "dir"
            return
        if self.seen.get(rel) is None and path.is_dir() and not path.is_symlink():
            raise self.fail(rel, "is a file member where earlier members made a directory")
        self._mkdirs(path.parent)
        if info.isreg():
            self._copy(rel, path, info)
            os.chmod(path, mode)
            self.seen[rel] = "file"
        elif info.issym():
            os.symlink(info.linkname, path)
            self.seen[rel] = "symlink"
            self.links.add(rel)
        elif info.islnk():
            self._hardlink(rel, path, info.linkname)
        else:
            raise self.fail(rel, "is not a regular file, directory or symlink")

    def _copy(self, rel: str, path: Path, info: tarfile.TarInfo) -> None:
        """The member's data, read from its first byte on into one reused buffer and written
        out; a stream that ends first is a truncated archive. A sparse member (GNU tar
        ``--sparse``, old GNU or PAX form) stores only its data regions: each lands at its
        offset and the file is cut to the member's full size, as ``tar -x`` makes it."""
        self.stream.seek(info.offset_data)  # forward only: past a PAX sparse map, if any
        sparse = getattr(info, "sparse", None)
        regions = sparse if sparse is not None else [(0, info.size)]
        with path.open("xb", buffering=0) as out:
            for offset, length in regions:
                out.seek(offset)
                self._copy_region(rel, out, length)
            if sparse is not None:
                out.truncate(info.size)

    def _copy_region(self, rel: str, out: BinaryIO, length: int) -> None:
        left = length
        while left:
            count = self.stream.readinto(self.buffer[: min(left, _CHUNK)])
            if count == 0:
                raise tarfile.ReadError(f"member {rel!r}: the data ends early")
            view = self.buffer[:count]
            while view:
                view = view[out.write(view) :]
            left -= count

    def _hardlink(self, rel: str, path: Path, linkname: str) -> None:
        """TheRock's ``tarfile.add`` writes a file with several names as one regular member
        and hardlink members naming it; an extracted tree holds it twice, as regular files."""
        source = linkname.removesuffix("/")
        if self.seen.get(source) != "file":
            raise self.fail(
                rel, f"is a hardlink to {linkname!r}, which is no earlier regular file member"
            )
        os.link(self.target / source, path)
        self.seen[rel] = "file"


@contextmanager
def naming_archive(packed: PackedArtifact, directory: Path) -> Iterator[None]:
    """Errors raised while ``directory`` (``packed`` unpacked) is read name the archive and
    the member, never the spool the reader happens to use."""
    try:
        yield
    except ArtifactError as exc:
        where = exc.path or ""
        if where != str(directory) and not where.startswith(f"{directory}{os.sep}"):
            raise
        inner = where[len(str(directory)) :].lstrip(os.sep)
        shown = f"{packed.path}" + (f" (member {inner})" if inner else "")
        message = exc.message.replace(f"{directory}{os.sep}", "").replace(str(directory), ".")
        raise ArtifactError(message, path=shown, problems=exc.problems) from exc
