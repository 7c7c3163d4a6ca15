"""Write the split wheels with our deterministic wheel writer (:mod:`kpack.wheelfile`)."""

from __future__ import annotations

import logging
import os
import shutil
import stat
import tempfile
import time
import zipfile
from collections.abc import Sequence
from email.parser import BytesHeaderParser
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import Version

from kpack.common.frozen import frozen
from kpack.common.progress import Progress
from kpack.common.safepath import open_new
from kpack.errors import PackagingError
from kpack.split import HostContent
from kpack.wheelfile import (
    InputWheel,
    Member,
    Reuse,
    WheelEntry,
    WheelResult,
    expand_tag,
    write_wheel,
)
from kpack.wheelsplit._kernels import host_source

__all__ = [
    "HostLayout",
    "dist_info_name",
    "kept_wheel_info",
    "unpack_wheels",
    "write_split_wheel",
]

log = logging.getLogger(__name__)

_REGENERATED = ("METADATA", "WHEEL", "RECORD", "RECORD.jws", "RECORD.p7s")


@frozen
class HostLayout:
    """The host payload: kept members (from the input) and stripped binaries."""

    members: tuple[Member, ...]

    @property
    def arcnames(self) -> frozenset[str]:
        return frozenset(m.arcname for m in self.members)


def dist_info_name(name: str, version: str) -> str:
    return f"{canonicalize_name(name).replace('-', '_')}-{Version(version)}.dist-info"


def host_layout(
    wheel: InputWheel, stripped: dict[str, HostContent], moved: frozenset[str]
) -> HostLayout:
    """Every input member but the moved database files and the regenerated dist-info
    files; stripped binaries streamed from their verified transforms."""
    members = []
    regenerated = {f"{wheel.dist_info}/{n}" for n in _REGENERATED}
    for entry in wheel.entries:
        if entry.arcname in moved or entry.arcname in regenerated:
            continue
        content = stripped.get(entry.arcname)
        source = wheel.root / entry.arcname if content is None else host_source(content)
        reuse = _reuse(wheel, entry, content)
        members.append(Member(entry.arcname, source, executable=entry.executable, reuse=reuse))
    return HostLayout(tuple(members))


def _reuse(wheel: InputWheel, entry: WheelEntry, content: HostContent | None) -> Reuse | None:
    """How the host copy of ``entry`` may reuse the input's deflate stream: whole when it is
    unchanged, in the runs a transform (ELF or PE) keeps of the extracted member; else not
    at all."""
    stream = entry.stream
    extracted = wheel.root / entry.arcname
    if stream is None:
        return None
    if content is None or isinstance(content, Path):
        return Reuse.unchanged(stream) if content in (None, extracted) else None
    return Reuse(stream, content.kept_runs()) if content.path == extracted else None


def write_split_wheel(
    dest: Path,
    wheel: InputWheel,
    *,
    dist_name: str,
    version: str,
    members: Sequence[Member],
    metadata: bytes,
    jobs: int,
    label: str | None = None,
    progress: Progress | None = None,
) -> WheelResult:
    """One wheel with ``wheel``'s tag (and build tag) and its WHEEL file as it is
    (``Root-Is-Purelib`` included: a device wheel's archives must install into the same
    scheme as the host's binaries); ``label`` makes it a variant wheel. ``progress`` is
    told of every member's bytes as they are read and of the wheel when it is written."""
    renamed = wheel.build is not None or label is not None
    scratch = Path(tempfile.mkdtemp(prefix=".wheel-", dir=dest)) if renamed else dest
    start = time.monotonic()
    try:
        result = write_wheel(
            scratch, dist_name=dist_name, version=version, tag=wheel.tag, members=members,
            metadata=metadata, jobs=jobs, wheel_info=kept_wheel_info(wheel), progress=progress,
        )  # fmt: skip
        result = _rename(result, dest, wheel, label)
    finally:
        if renamed:
            shutil.rmtree(scratch, ignore_errors=True)
    if progress is not None:
        progress.package_done(result.path.name, result.size, time.monotonic() - start)
    return result


def kept_wheel_info(wheel: InputWheel) -> bytes:
    """The input's WHEEL file as it is; if its ``Tag`` lines are not the tags of its file
    name (a renamed wheel), every other line as it is and the file name's tags."""
    given = wheel.wheel_info
    tags = expand_tag(wheel.tag)
    headers = BytesHeaderParser().parsebytes(given)
    theirs = sorted(str(t).strip() for t in headers.get_all("Tag", []))
    if theirs == sorted(tags) and headers.get("Wheel-Version"):
        return given
    log.warning(
        "%s: WHEEL's Tag lines (%s) are not the file name's; the split wheels get %s",
        wheel.path.name,
        ", ".join(theirs) or "none",
        ", ".join(tags),
    )
    lines = [line for line in given.decode("utf-8").splitlines() if line.strip()]
    kept = [line for line in lines if not line.lower().startswith("tag:")]
    if not any(line.lower().startswith("wheel-version:") for line in kept):
        kept.insert(0, "Wheel-Version: 1.0")
    return ("\n".join([*kept, *(f"Tag: {t}" for t in tags)]) + "\n").encode("utf-8")


def _rename(result: WheelResult, dest: Path, wheel: InputWheel, label: str | None) -> WheelResult:
    """Move a wheel written under its plain name to its name with build tag and label."""
    name = result.path.name[: -len(".whl")]
    if wheel.build is not None:
        head, tag = name.split("-", 2)[:2], wheel.tag
        name = "-".join([*head, wheel.build, tag])
    if label is not None:
        name = f"{name}-{label}"
    final = dest / (name + ".whl")
    if final != result.path:
        if final.exists():
            raise PackagingError("output exists already", path=final)
        os.replace(result.path, final)
    return WheelResult(final, result.size, result.file_count, result.uncompressed_bytes)


def unpack_wheels(directory: Path) -> None:
    """``--output-format directory``: replace each wheel in ``directory`` (just written by
    us) by the tree it holds, named as the wheel without ``.whl``, RECORD included, file
    modes kept: the layout rocm-kpack's directory output has."""
    for wheel in sorted(directory.glob("*.whl")):
        dest = directory / wheel.name[: -len(".whl")]
        dest.mkdir()
        with zipfile.ZipFile(wheel) as archive:
            for info in archive.infolist():
                path = dest / info.filename
                path.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(info) as src, open_new(path) as out:  # names path on ENOSPC
                    shutil.copyfileobj(src, out, 1 << 20)
                path.chmod(0o755 if (info.external_attr >> 16) & stat.S_IXUSR else 0o644)
        wheel.unlink()
