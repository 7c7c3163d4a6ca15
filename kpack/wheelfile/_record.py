"""RECORD (PEP 376, PEP 427), written and verified in one place.

:func:`render_record` writes the RECORD of a wheel this project makes: ``path,sha256=<urlsafe
base64, no padding>,size`` per member, its own row empty. :func:`verify_record` checks the
RECORD of a wheel read as input against what was extracted: every member listed once, every
hash and size right. Hash names must be ``hashlib``-guaranteed with a fixed digest of at
least 256 bits (PEP 427: sha256 or stronger); ``md5``, ``sha1``, ``sha224`` and the
variable-length ``shake_*`` are refused, and a digest that is not urlsafe base64 or has the
wrong length is malformed, not a mismatch.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import logging
import re
from collections.abc import Sequence
from pathlib import Path

from kpack.errors import PackagingError
from kpack.wheelfile._deflate import WrittenMember

__all__ = ["RECORD_HASHES", "SIGNATURES", "render_record", "verify_record"]

log = logging.getLogger(__name__)

_CHUNK = 1 << 20


SIGNATURES = ("RECORD.jws", "RECORD.p7s")


#: RECORD hash names accepted: guaranteed by every ``hashlib``, with a fixed digest of at
#: least 256 bits (PEP 427: sha256 or stronger). ``md5``, ``sha1``, ``sha224`` and the
#: variable-length ``shake_*`` are refused.
RECORD_HASHES = frozenset(
    n for n in hashlib.algorithms_guaranteed if hashlib.new(n).digest_size >= 32
)


_URLSAFE_B64 = re.compile(r"[A-Za-z0-9_-]*")


def verify_record(root: Path, record_name: str, sha256: dict[str, bytes], path: Path) -> None:
    if record_name not in sha256:
        raise PackagingError(f"bad RECORD: {record_name} is missing", path=path)
    try:
        text = (root / record_name).read_text(encoding="utf-8")
        rows = list(csv.reader(io.StringIO(text)))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise PackagingError(f"bad RECORD: cannot parse {record_name}: {exc}", path=path) from exc
    problems: list[str] = []
    listed: set[str] = set()
    unhashed = 0
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
        problems += _check_row(
            root, arcname, hash_field, size_field, record_name=record_name, sha256=sha256
        )
        skipped = arcname == record_name or arcname.endswith(SIGNATURES)
        unhashed += not hash_field and not skipped
    if unhashed:
        log.warning(
            "%s: %d RECORD entries have no hash (accepted, as pip accepts them; sizes checked "
            "where given; the output RECORD hashes every file)",
            path.name,
            unhashed,
        )
    unlisted = sorted(set(sha256) - listed)
    problems += [f"{name}: in the wheel but not listed in RECORD" for name in unlisted]
    if problems:
        raise PackagingError(f"bad RECORD ({record_name})", path=path, problems=problems)


class _BadHash(ValueError):
    """A RECORD hash field that cannot be checked (its message is the problem)."""


def _claimed_digest(hash_field: str) -> tuple[str, bytes]:
    """``(algorithm, digest)`` of a RECORD hash field ``<name>=<urlsafe base64, no padding>``."""
    algorithm, _, encoded = hash_field.partition("=")
    if algorithm not in RECORD_HASHES:
        allowed = ", ".join(sorted(RECORD_HASHES))
        raise _BadHash(f"hash algorithm {algorithm[:40]!r} is not allowed (use {allowed})")
    size = hashlib.new(algorithm).digest_size
    text = encoded.rstrip("=")
    try:
        if not _URLSAFE_B64.fullmatch(text):
            raise ValueError(text)
        digest = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        raise _BadHash(
            f"malformed {algorithm} digest {encoded[:100]!r} (not urlsafe base64)"
        ) from None
    if len(digest) != size:
        raise _BadHash(
            f"malformed {algorithm} digest {encoded[:100]!r} ({len(digest)} bytes, "
            f"{algorithm} has {size})"
        )
    return algorithm, digest


def _file_digest(path: Path, algorithm: str) -> bytes:
    digest = hashlib.new(algorithm)
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.digest()


def _b64(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _check_row(
    root: Path,
    arcname: str,
    hash_field: str,
    size_field: str,
    *,
    record_name: str,
    sha256: dict[str, bytes],
) -> list[str]:
    if arcname == record_name or arcname.endswith(SIGNATURES):
        return []
    problems = []
    if hash_field:  # a row without a hash (`path,,size`) is accepted, as pip accepts it
        try:
            algorithm, claimed = _claimed_digest(hash_field)
        except _BadHash as exc:
            return [f"{arcname}: {exc}"]
        if algorithm == "sha256":
            digest = sha256[arcname]
        else:
            digest = _file_digest(root / arcname, algorithm)
        if claimed != digest:
            problems.append(
                f"{arcname}: {algorithm} mismatch (RECORD {_b64(claimed)}, file {_b64(digest)})"
            )
    size = (root / arcname).stat().st_size
    if size_field and size_field != str(size):
        problems.append(f"{arcname}: size mismatch (RECORD {size_field}, file {size})")
    return problems


def render_record(written: Sequence[WrittenMember], record_name: str) -> bytes:
    """RECORD as CSV: ``path,sha256=<urlsafe b64, no padding>,size``; its own row empty."""
    text = io.StringIO()
    rows = csv.writer(text, lineterminator="\n")
    for item in written:
        digest = base64.urlsafe_b64encode(item.sha256).rstrip(b"=").decode("ascii")
        rows.writerow((item.arcname, f"sha256={digest}", item.size))
    rows.writerow((record_name, "", ""))
    return text.getvalue().encode("utf-8")
