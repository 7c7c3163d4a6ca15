"""A listing of a tree's artifact archives (``--print-shards N --artifact-listing FILE``):
the names and sizes a shard plan needs, read without the archives themselves.

A CI plan job lists the bucket TheRock uploaded a run's archives to instead of fetching them
all. Each line ends in an archive's byte size and file name, whatever comes before them, so
``aws s3 ls s3://BUCKET/RUN-linux/`` output (``DATE TIME SIZE NAME``) is a listing as it is,
and so is ``SIZE NAME``. Skipped: blank lines, ``PRE dir/`` prefix lines, and names that
are no artifact archive (``index.html``, ``.sha256sum`` sidecars), with a log line. An
artifact listed both as ``.tar.zst`` and as ``.tar.xz`` is planned from the ``.tar.zst``, as
TheRock's ``artifact_manager.py fetch`` prefers it. Refused, all problems at once: a line
without a size, a name with a ``/`` in it, an archive name that does not parse as
``{name}_{component}_{target}``, one file name listed twice, a listing with no archive.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from kpack.artifact.names import ArtifactId
from kpack.artifact.packed import ARCHIVE_SUFFIXES, archive_id
from kpack.errors import ArtifactError

__all__ = ["ListedArchive", "read_listing"]

log = logging.getLogger(__name__)

#: A listing holds a line per archive: far below this for any TheRock run.
_MAX_BYTES = 16 << 20


@dataclass(frozen=True, kw_only=True)
class ListedArchive:
    """One archive of the listing: its artifact, file name and size in bytes."""

    id: ArtifactId
    file: str
    size: int


def read_listing(path: Path) -> list[ListedArchive]:
    """The archives ``path`` lists, one per artifact, sorted by artifact name."""
    lines = _read_lines(path)
    found: dict[str, list[ListedArchive]] = {}
    seen: set[str] = set()
    problems: list[str] = []
    for number, line in enumerate(lines, start=1):
        listed = _parse(line, number, problems)
        if listed is None:
            continue
        if listed.file in seen:
            problems.append(f"line {number}: {listed.file} is listed twice")
            continue
        seen.add(listed.file)
        found.setdefault(listed.id.dirname, []).append(listed)
    if not found and not problems:
        problems.append("no artifact archive ({name}_{component}_{target}.tar.zst|.tar.xz|.tar)")
    if problems:
        raise ArtifactError("not a listing of artifact archives", path=path, problems=problems)
    return [_preferred(forms) for _, forms in sorted(found.items())]


def _read_lines(path: Path) -> list[str]:
    try:
        with path.open("rb") as handle:
            data = handle.read(_MAX_BYTES + 1)
    except OSError as e:
        raise ArtifactError(f"cannot read the listing: {e.strerror or e}", path=path) from None
    if len(data) > _MAX_BYTES:
        raise ArtifactError(f"listing larger than {_MAX_BYTES} bytes", path=path)
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise ArtifactError(f"listing is not UTF-8 text (byte {e.start})", path=path) from None


def _parse(line: str, number: int, problems: list[str]) -> ListedArchive | None:
    fields = line.split()
    if not fields or fields[-1].endswith("/"):
        return None  # blank, or a prefix ("PRE logs/")
    name = fields[-1]
    found = archive_id(name)
    if found is None:
        log.info("listing line %d: skipping %s (not an artifact archive)", number, name)
        return None
    if len(fields) < 2 or not fields[-2].isdigit():
        problems.append(f"line {number}: no byte size before {name}")
        return None
    if "/" in name:
        problems.append(f"line {number}: {name} is a path, not a file name")
        return None
    art_id, _ = found
    if art_id is None:
        problems.append(
            f"line {number}: {name} does not parse as {{name}}_{{component}}_{{target}}"
        )
        return None
    return ListedArchive(id=art_id, file=name, size=int(fields[-2]))


def _preferred(forms: list[ListedArchive]) -> ListedArchive:
    """The form to fetch of an artifact listed more than once: ``.tar.zst`` first."""
    chosen = min(
        forms, key=lambda f: next(i for i, s in enumerate(ARCHIVE_SUFFIXES) if f.file.endswith(s))
    )
    for other in forms:
        if other is not chosen:
            log.info("listing: %s also listed as %s; planning that one", other.file, chosen.file)
    return chosen
