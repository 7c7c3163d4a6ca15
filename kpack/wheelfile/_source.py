"""The input wheel: parse its name, verify its RECORD, extract it once (a source).

:func:`open_wheel` extracts every member into a directory while hashing it, then checks
the RECORD against what was read: a file missing from RECORD, a RECORD entry without a
file, a wrong hash or size, or a weak hash algorithm is an error, and all problems are
reported together. The result is a frozen :class:`InputWheel`; nothing else touches the
zip file.

The wheel is untrusted. Every ``zipfile`` call sits inside one reader boundary
(:func:`_zip_errors`), so a damaged archive — truncated, a corrupt header, an encrypted or
unknown-compression member, a bad CRC, a non-UTF-8 name — is one :class:`PackagingError`
naming the wheel and the member, never a stray ``EOFError`` or ``zlib.error``. Member names
must be safe relative paths (:func:`kpack.common.safepath.safe_relpath`), written only through a
:class:`kpack.common.safepath.Root`. Before anything is extracted, the declared sizes are checked
against :class:`Limits` (expansion ratio per member, total unpacked size); while extracting,
the bytes really produced are counted against the declared size, so a member cannot inflate
past what its header promised.
"""

from __future__ import annotations

import hashlib
import logging
import lzma
import re
import stat
import struct
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from kpack.common.cli import format_over, format_size
from kpack.common.frozen import frozen
from kpack.common.safepath import Root, case_collisions, safe_relpath, windows_platform
from kpack.errors import PackagingError, UnsafePathError
from kpack.wheelfile._inflate import member_chunks, read_ahead, starts_with
from kpack.wheelfile._record import SIGNATURES, verify_record
from kpack.wheelfile._reuse import DeflateStream

__all__ = ["DEFAULT_LIMITS", "InputWheel", "Limits", "WheelEntry", "open_wheel"]

log = logging.getLogger(__name__)

_CHUNK = 1 << 20
_FLAG_UTF8 = 0x800
_READ_AHEAD_MIN = 16 << 20  # members this large are inflated on a second thread
_READ_AHEAD_CHUNKS = 4
#: Binaries (ELF, PE) this large have their deflate blocks indexed, so that the edited copy a
#: split writes can reuse them (:mod:`kpack.wheelfile._reuse`).
_INDEX_MIN = 16 << 20
_BINARY_MAGIC = (b"\x7fELF", b"MZ")
# Everything zipfile (and the codecs under it) raises on a damaged archive.
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    EOFError,
    IndexError,
    KeyError,
    NotImplementedError,
    RuntimeError,
    UnicodeDecodeError,
    ValueError,
    struct.error,
    zlib.error,
    lzma.LZMAError,
    OverflowError,
)


@frozen
class Limits:
    """How far an untrusted wheel may expand when extracted.

    ``max_ratio`` bounds ``uncompressed / compressed`` of every member that unpacks to more
    than ``ratio_floor`` bytes (tiny members legitimately reach any ratio); real wheels stay
    well under 100:1 (shared libraries 2-5:1, text 5-20:1). ``max_total`` bounds the sum of
    all members' sizes; the largest framework wheels unpack to a few GB.
    """

    max_ratio: float = 1000.0
    max_total: int = 64 * 10**9  # --max-unpacked-size 64GB
    ratio_floor: int = 1 << 20


DEFAULT_LIMITS = Limits()


@contextmanager
def _zip_errors(path: Path, member: str | None = None) -> Iterator[None]:
    """Turn whatever a damaged zip makes ``zipfile`` raise into one :class:`PackagingError`
    naming the wheel. An ``OSError`` naming a file is a failed write of that output (a full
    disk): it passes unchanged, so the input is never blamed for it."""
    where = f" (member {member!r})" if member else ""
    try:
        yield
    except PackagingError:
        raise
    except UnicodeDecodeError as exc:  # a name flagged as UTF-8 that is not
        shown = _shown_bytes(exc.object) if isinstance(exc.object, bytes) else "?"
        raise PackagingError(
            f"damaged wheel{where}: member name {shown} is not valid UTF-8", path=path
        ) from None
    except _ZIP_ERRORS as exc:
        if isinstance(exc, zipfile.BadZipFile):
            what = "corrupt member data" if member else "not a valid zip file"
        else:
            what = type(exc).__name__
        raise PackagingError(f"damaged wheel{where}: {what}: {exc}", path=path) from None
    except OSError as exc:
        if exc.filename is not None:  # a failed write names its output (kpack.common.outfile)
            raise
        if exc.errno is not None:  # the machine failed reading the wheel (EIO): not damage
            raise PackagingError(f"cannot read{where}: {exc.strerror}", path=path) from None
        # bz2 and friends report bad data as OSError
        raise PackagingError(f"damaged wheel{where}: {exc}", path=path) from None


@frozen
class WheelEntry:
    arcname: str
    size: int
    executable: bool
    #: The member's deflate stream in the input, for its copy to reuse (None if stored).
    stream: DeflateStream | None = None


@frozen
class InputWheel:
    """A verified, extracted wheel. ``root`` holds every member at its arcname."""

    path: Path
    root: Path
    name: str  # the file-name form, e.g. 'torch'
    version: str
    build: str | None
    tag: str  # the compressed tag set, e.g. 'cp311-cp311-linux_x86_64'
    dist_info: str  # e.g. 'torch-2.9.0.dist-info'
    entries: tuple[WheelEntry, ...]  # every member but RECORD (and its signatures)

    @property
    def metadata(self) -> bytes:
        return (self.root / self.dist_info / "METADATA").read_bytes()

    @property
    def data_dir(self) -> str:
        """``torch-2.9.0.data``: members below it install by scheme."""
        return self.dist_info[: -len(".dist-info")] + ".data"

    def install_path(self, arcname: str) -> str:
        """Where a member lands in site-packages: ``<name>.data/purelib/x`` and
        ``<name>.data/platlib/x`` install as ``x`` (both schemes are site-packages for a
        platform wheel); every other member at its arcname."""
        for scheme in ("purelib", "platlib"):
            prefix = f"{self.data_dir}/{scheme}/"
            if arcname.startswith(prefix):
                return arcname[len(prefix) :]
        return arcname

    @property
    def wheel_info(self) -> bytes:
        return (self.root / self.dist_info / "WHEEL").read_bytes()


def parse_filename(path: Path) -> tuple[str, str, str | None, str]:
    """``(name, version, build, tag)`` of ``<name>-<version>(-<build>)?-<py>-<abi>-<plat>.whl``,
    each as the file name spells it (the tag a possibly compressed set), once
    :func:`packaging.utils.parse_wheel_filename` has found the name valid."""
    if path.suffix != ".whl":
        raise PackagingError("not a wheel: the file name does not end in .whl", path=path)
    parts = path.name[: -len(".whl")].split("-")
    if len(parts) == 6 and parts[2] and not parts[2][:1].isdigit():
        raise PackagingError(
            "variant wheels (a label after the platform tag) cannot be split", path=path
        )
    try:
        build = parse_wheel_filename(path.name)[2]
    except InvalidWheelFilename as exc:
        reason = re.search(r"\(([^)]*)\)", str(exc)) or re.match(r"([^:]*):", str(exc))
        why = reason.group(1) if reason else "invalid"  # packaging's words
        raise PackagingError(
            f"not a wheel file name ({why.lower()}): expected "
            "<name>-<version>[-<build>]-<py>-<abi>-<platform>.whl",
            path=path,
        ) from exc
    return parts[0], parts[1], parts[2] if build else None, "-".join(parts[-3:])


def open_wheel(
    path: Path, dest: Path, limits: Limits = DEFAULT_LIMITS, *, index: bool = False
) -> InputWheel:
    """Verify ``path`` and extract it into ``dest`` (which must be empty or missing). With
    ``index``, the deflate blocks of large binaries are indexed (for a split, which edits
    them: :mod:`kpack.wheelfile._reuse`)."""
    path = Path(path)
    name, version, build, tag = parse_filename(path)
    _check_regular(path)
    dest.mkdir(parents=True, exist_ok=True)
    root = Root(dest, error=PackagingError)
    try:
        with _zip_errors(path), zipfile.ZipFile(path) as archive:
            infos = _members(archive, path, windows=windows_platform(tag))
            _check_sizes(infos, limits, path)
            dist_info = _dist_info(infos, path)
            streams: dict[str, DeflateStream] = {}
            hashes = {
                info.filename: _extract(archive, info, root, path, streams, index=index)
                for info in infos
            }
    except zipfile.BadZipFile as exc:  # pragma: no cover - _zip_errors converts it
        raise PackagingError(f"not a wheel: not a valid zip file ({exc})", path=path) from exc
    record_name = f"{dist_info}/RECORD"
    verify_record(dest, record_name, hashes, path)
    skipped = {record_name, *(f"{dist_info}/{s}" for s in SIGNATURES)}
    entries = tuple(
        WheelEntry(
            i.filename,
            i.file_size,
            bool((i.external_attr >> 16) & 0o111),
            streams.get(i.filename),
        )
        for i in infos
        if i.filename not in skipped
    )
    for required in ("METADATA", "WHEEL"):
        if f"{dist_info}/{required}" not in hashes:
            raise PackagingError(f"{dist_info}/{required} is missing", path=path)
    log.info("%s: RECORD verified, %d files", path.name, len(entries))
    return InputWheel(
        path=path,
        root=dest,
        name=name,
        version=version,
        build=build,
        tag=tag,
        dist_info=dist_info,
        entries=entries,
    )


def _check_regular(path: Path) -> None:
    """The wheel must be a regular file: a directory is no zip, and opening a FIFO would
    wait for a writer forever."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise PackagingError(f"cannot read: {exc.strerror}", path=path) from None
    if not stat.S_ISREG(mode):
        what = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise PackagingError(f"not a wheel: {what}", path=path)


def _members(archive: zipfile.ZipFile, path: Path, *, windows: bool) -> list[zipfile.ZipInfo]:
    """The file members, every name checked: a safe relative path, UTF-8 (as the wheel
    format says), no duplicate and, for a Windows wheel, no two differing only in case."""
    problems: list[str] = []
    seen: set[str] = set()
    files: list[zipfile.ZipInfo] = []
    for info in archive.infolist():
        name = info.filename
        if name in seen:
            problems.append(f"{name}: duplicate member (refusing to pick one)")
        seen.add(name)
        is_dir = name.endswith("/")  # ZipInfo.is_dir() fails on an empty name
        try:
            safe_relpath(name, what="member name", allow_dir_suffix=is_dir)
        except UnsafePathError as exc:
            problems.append(f"{name!r}: unsafe member name ({exc.message})")
            continue
        if (raw := _raw_name(info)) is not None:
            problems.append(f"member name {raw} is not valid UTF-8")
        elif is_dir:
            continue
        elif stat.S_ISLNK(info.external_attr >> 16):
            problems.append(f"{name}: symbolic links are not allowed in wheels")
        elif info.flag_bits & 0x1:
            problems.append(f"{name}: encrypted member")
        elif info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            problems.append(
                f"{name}: compression method {info.compress_type} (wheels use stored or deflate)"
            )
        files.append(info)
    if windows:
        names = (i.filename.rstrip("/") for i in archive.infolist())
        problems += [
            f"{p} differ only in case (one file on Windows)" for p in case_collisions(names)
        ]
    if problems:
        raise PackagingError("invalid wheel members", path=path, problems=problems)
    return files


def _raw_name(info: zipfile.ZipInfo) -> str | None:
    """A name stored without the UTF-8 flag, whose bytes are not UTF-8, shown as
    ``'bad\\xff.py'`` (``zipfile`` decodes such names as cp437, and refuses a flagged name
    that is not UTF-8 itself); None for a UTF-8 name."""
    if info.flag_bits & _FLAG_UTF8 or info.orig_filename.isascii():
        return None
    raw = info.orig_filename.encode("cp437")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return _shown_bytes(raw)
    return None


def _shown_bytes(raw: bytes) -> str:
    return "'" + raw.decode("utf-8", "backslashreplace") + "'"


def _check_sizes(infos: list[zipfile.ZipInfo], limits: Limits, path: Path) -> None:
    """Refuse, before extracting anything, a wheel whose declared sizes exceed ``limits``."""
    problems: list[str] = []
    total = 0
    for info in infos:
        total += info.file_size
        if info.file_size > limits.ratio_floor:
            ratio = info.file_size / max(info.compress_size, 1)
            if ratio > limits.max_ratio:
                problems.append(
                    f"{info.filename}: {format_size(info.compress_size)} would expand to "
                    f"{format_size(info.file_size)} ({ratio:.0f}:1, limit "
                    f"{limits.max_ratio:.0f}:1; raise it with --max-expansion-ratio)"
                )
    if total > limits.max_total:
        problems.append(
            f"members unpack to {format_over(total, limits.max_total)} "
            "(raise it with --max-unpacked-size)"
        )
    if problems:
        raise PackagingError("wheel would expand too far", path=path, problems=problems)


def _dist_info(infos: list[zipfile.ZipInfo], path: Path) -> str:
    tops = sorted({i.filename.split("/", 1)[0] for i in infos if "/" in i.filename})
    dist_infos = [t for t in tops if t.endswith(".dist-info")]
    if len(dist_infos) != 1:
        found = ", ".join(dist_infos) or "none"
        raise PackagingError(
            f"not a wheel: expected exactly one .dist-info directory, found {found}", path=path
        )
    return dist_infos[0]


def _extract(
    archive: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    root: Root,
    path: Path,
    streams: dict[str, DeflateStream],
    *,
    index: bool,
) -> bytes:
    """Write one member below ``root``; return its sha256 (computed while writing). A
    deflated member's stream goes to ``streams``, its blocks indexed with ``index`` if it is
    a large ELF or PE file (one a split may edit).

    Reads are counted: a member producing more or fewer bytes than its declared size is an
    error (``zipfile`` stops at the declared size and checks the CRC; the count guards that).
    """
    digest = hashlib.sha256()
    produced = 0
    mode = 0o755 if (info.external_attr >> 16) & 0o111 else 0o644
    with (
        _zip_errors(path, info.filename),
        root.open_write(info.filename, what="member", mode=mode) as out,
    ):
        found: list[DeflateStream] = []
        blocks = index and info.file_size >= _INDEX_MIN
        blocks = blocks and starts_with(archive, info, _BINARY_MAGIC)
        chunks = member_chunks(archive, info, _CHUNK, streams=found, blocks=blocks)
        if info.file_size >= _READ_AHEAD_MIN:
            chunks = read_ahead(chunks, _READ_AHEAD_CHUNKS)
        for chunk in chunks:
            produced += len(chunk)
            if produced > info.file_size:
                raise PackagingError(
                    f"member {info.filename!r} expands past its declared {info.file_size} bytes",
                    path=path,
                )
            digest.update(chunk)
            out.write(chunk)
    if produced != info.file_size:
        raise PackagingError(
            f"member {info.filename!r} holds {produced} bytes, not its declared {info.file_size}",
            path=path,
        )
    root.join(info.filename).chmod(mode)
    if found:
        streams[info.filename] = found[0]
    return digest.digest()
