"""The input wheel: parse its name, verify its RECORD, extract it once (a source).

:func:`open_wheel` extracts every member into a directory while hashing it, then checks
the RECORD against what was read: a file missing from RECORD, a RECORD entry without a
file, a wrong hash or size, or a weak hash algorithm is an error, and all problems are
reported together. The result is a frozen :class:`InputWheel`; nothing else touches the
zip file.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import logging
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from kpack.errors import PackagingError

__all__ = ["InputWheel", "WheelEntry", "open_wheel"]

log = logging.getLogger(__name__)

_CHUNK = 1 << 20
_SIGNATURES = ("RECORD.jws", "RECORD.p7s")
_WEAK = {"md5", "sha1"}


@dataclass(frozen=True)
class WheelEntry:
    arcname: str
    size: int
    executable: bool


@dataclass(frozen=True)
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
    def wheel_info(self) -> bytes:
        return (self.root / self.dist_info / "WHEEL").read_bytes()


def parse_filename(path: Path) -> tuple[str, str, str | None, str]:
    """``(name, version, build, tag)`` of ``<name>-<version>(-<build>)?-<py>-<abi>-<plat>.whl``."""
    if path.suffix != ".whl":
        raise PackagingError("not a wheel: the file name does not end in .whl", path=path)
    parts = path.name[: -len(".whl")].split("-")
    if len(parts) == 6 and not parts[2][:1].isdigit():
        raise PackagingError(
            "variant wheels (a label after the platform tag) cannot be split", path=path
        )
    if len(parts) not in (5, 6) or not all(parts):
        raise PackagingError(
            "not a wheel file name: expected <name>-<version>[-<build>]-<py>-<abi>-<platform>.whl",
            path=path,
        )
    build = parts[2] if len(parts) == 6 else None
    return parts[0], parts[1], build, "-".join(parts[-3:])


def open_wheel(path: Path, dest: Path) -> InputWheel:
    """Verify ``path`` and extract it into ``dest`` (which must be empty or missing)."""
    path = Path(path)
    name, version, build, tag = parse_filename(path)
    try:
        with zipfile.ZipFile(path) as archive:
            infos = _members(archive, path)
            dist_info = _dist_info(infos, path)
            hashes = {info.filename: _extract(archive, info, dest, path) for info in infos}
    except zipfile.BadZipFile as exc:
        raise PackagingError(f"not a wheel: not a valid zip file ({exc})", path=path) from exc
    except OSError as exc:
        raise PackagingError(f"cannot read the wheel: {exc}", path=path) from exc
    record_name = f"{dist_info}/RECORD"
    _verify_record(dest, record_name, hashes, path)
    skipped = {record_name, *(f"{dist_info}/{s}" for s in _SIGNATURES)}
    entries = tuple(
        WheelEntry(i.filename, i.file_size, bool((i.external_attr >> 16) & 0o111))
        for i in infos
        if i.filename not in skipped
    )
    for required in ("METADATA", "WHEEL"):
        if f"{dist_info}/{required}" not in hashes:
            raise PackagingError(f"{dist_info}/{required} is missing", path=path)
    log.info("%s: RECORD verified, %d files", path.name, len(entries))
    return InputWheel(path, dest, name, version, build, tag, dist_info, entries)


def _members(archive: zipfile.ZipFile, path: Path) -> list[zipfile.ZipInfo]:
    problems: list[str] = []
    seen: set[str] = set()
    files: list[zipfile.ZipInfo] = []
    for info in archive.infolist():
        name = info.filename
        if name in seen:
            problems.append(f"{name}: duplicate member")
        seen.add(name)
        if info.is_dir():
            continue
        pure = PurePosixPath(name)
        if pure.is_absolute() or ".." in pure.parts or "\\" in name:
            problems.append(f"{name}: unsafe member name")
        elif stat.S_ISLNK(info.external_attr >> 16):
            problems.append(f"{name}: symbolic links are not allowed in wheels")
        files.append(info)
    if problems:
        raise PackagingError("invalid wheel members", path=path, problems=problems)
    return files


def _dist_info(infos: list[zipfile.ZipInfo], path: Path) -> str:
    tops = sorted({i.filename.split("/", 1)[0] for i in infos if "/" in i.filename})
    dist_infos = [t for t in tops if t.endswith(".dist-info")]
    if len(dist_infos) != 1:
        found = ", ".join(dist_infos) or "none"
        raise PackagingError(
            f"not a wheel: expected exactly one .dist-info directory, found {found}", path=path
        )
    return dist_infos[0]


def _extract(archive: zipfile.ZipFile, info: zipfile.ZipInfo, dest: Path, path: Path) -> bytes:
    """Write one member below ``dest``; return its sha256 (computed while writing)."""
    target = dest / info.filename
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    with archive.open(info) as src, open(target, "wb") as out:
        while chunk := src.read(_CHUNK):
            digest.update(chunk)
            out.write(chunk)
    mode = 0o755 if (info.external_attr >> 16) & 0o111 else 0o644
    target.chmod(mode)
    return digest.digest()


def _verify_record(root: Path, record_name: str, sha256: dict[str, bytes], path: Path) -> None:
    if record_name not in sha256:
        raise PackagingError(f"bad RECORD: {record_name} is missing", path=path)
    try:
        text = (root / record_name).read_text(encoding="utf-8")
        rows = list(csv.reader(io.StringIO(text)))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise PackagingError(f"bad RECORD: cannot parse {record_name}: {exc}", path=path) from exc
    problems: list[str] = []
    listed: set[str] = set()
    for number, row in enumerate(rows, 1):
        if not row:
            continue
        if len(row) != 3:
            problems.append(f"line {number}: expected 3 fields, got {len(row)}")
            continue
        arcname, hash_field, size_field = row
        if arcname in listed:
            problems.append(f"{arcname}: listed twice")
        listed.add(arcname)
        if arcname not in sha256:
            problems.append(f"{arcname}: listed in RECORD but not in the wheel")
            continue
        problems += _check_row(root, record_name, arcname, hash_field, size_field, sha256)
    unlisted = sorted(set(sha256) - listed)
    problems += [f"{name}: in the wheel but not listed in RECORD" for name in unlisted]
    if problems:
        raise PackagingError(f"bad RECORD ({record_name})", path=path, problems=problems)


def _check_row(
    root: Path, record_name: str, arcname: str, hash_field: str, size_field: str,
    sha256: dict[str, bytes],
) -> list[str]:  # fmt: skip
    if arcname == record_name or arcname.endswith(_SIGNATURES):
        return []
    algorithm, _, encoded = hash_field.partition("=")
    if not encoded:
        return [f"{arcname}: no hash in RECORD"]
    if algorithm in _WEAK or algorithm not in hashlib.algorithms_guaranteed:
        return [f"{arcname}: hash algorithm {algorithm!r} is not allowed"]
    if algorithm == "sha256":
        digest = sha256[arcname]
    else:
        digest = hashlib.new(algorithm, (root / arcname).read_bytes()).digest()
    problems = []
    actual = base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
    if encoded.rstrip("=") != actual:
        problems.append(f"{arcname}: {algorithm} mismatch (RECORD {encoded}, file {actual})")
    size = (root / arcname).stat().st_size
    if size_field and size_field != str(size):
        problems.append(f"{arcname}: size mismatch (RECORD {size_field}, file {size})")
    return problems
