"""Pack an artifact tree as TheRock's ``fileset_tool.py artifact-archive`` does, written
apart from the reader under test: ``artifact_manifest.txt`` first, then every path below
each listed stage dir (``tarfile.add(..., recursive=False)``, so symlinks stay symlink
members and a file with several names becomes a hardlink member), compressed with zstd
(level 3, TheRock's default), xz (preset 0 here, 6 in TheRock: the same stream format,
written faster) or not at all; ``sidecar`` writes ``<archive>.sha256sum``."""

from __future__ import annotations

import hashlib
import lzma
import os
import tarfile
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import BinaryIO

import zstandard

SUFFIX = {
    "zstd": ".tar.zst",
    "xz": ".tar.xz",
    "none": ".tar",
    "pyzstd": ".tar.zst",
    "pyzstd-seekable": ".tar.zst",
}


def _walk(base: Path) -> Iterator[Path]:
    """Every path below ``base`` (not following symlinks), parents first."""
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        here = Path(dirpath)
        for name in sorted([*dirnames, *filenames]):
            yield here / name


def _depth_first(base: Path) -> Iterator[Path]:
    """TheRock's order (``PatternMatcher.add_basedir``): each directory followed at once by
    everything below it, entries in ``os.scandir`` order, which no one sorts; reverse name
    order here, so that it differs from the sorted walk on every file system."""
    for entry in sorted(os.scandir(base), key=lambda e: e.name, reverse=True):
        yield Path(entry.path)
        if entry.is_dir(follow_symlinks=False):
            yield from _depth_first(Path(entry.path))


def pack_artifact(
    art: Path,
    dest: Path,
    compression: str = "zstd",
    *,
    sidecar: bool = False,
    order: str = "sorted",
) -> Path:
    """``order``: ``sorted`` (parents first, names sorted) or ``unsorted`` (TheRock's
    depth-first order, names reversed)."""
    out = dest / f"{art.name}{SUFFIX[compression]}"
    manifest = art / "artifact_manifest.txt"
    with out.open("wb") as raw, ExitStack() as stack:
        stream: BinaryIO = raw
        if compression == "zstd":
            compressor = zstandard.ZstdCompressor(level=3)
            stream = stack.enter_context(compressor.stream_writer(raw, closefd=False))
        elif compression == "xz":
            stream = stack.enter_context(lzma.LZMAFile(raw, "wb", preset=0))  # type: ignore[assignment]
        elif compression == "pyzstd":
            import pyzstd

            stream = stack.enter_context(pyzstd.ZstdFile(raw, "wb", level_or_option=3))  # type: ignore[assignment]
        elif compression == "pyzstd-seekable":
            import pyzstd

            stream = stack.enter_context(  # type: ignore[assignment]
                pyzstd.SeekableZstdFile(
                    raw, "wb", level_or_option=3, max_frame_content_size=256 << 10
                )
            )
        if compression.startswith("pyzstd"):  # TarFile's write mode, as archive_util opens it
            opened = tarfile.TarFile(fileobj=stream, mode="w", format=tarfile.PAX_FORMAT)
        else:
            opened = tarfile.open(fileobj=stream, mode="w|", format=tarfile.PAX_FORMAT)  # noqa: SIM115
        with opened as tar:
            tar.add(manifest, arcname=manifest.name, recursive=False)
            for line in manifest.read_text().splitlines():
                if not line.strip() or not (art / line).is_dir():
                    continue
                walk = _walk if order == "sorted" else _depth_first
                for path in walk(art / line):
                    tar.add(path, arcname=f"{line}/{path.relative_to(art / line)}", recursive=False)
    if sidecar:
        digest = hashlib.sha256(out.read_bytes()).hexdigest()
        Path(f"{out}.sha256sum").write_text(digest + "\n")
    return out


def pack_tree(
    tree: Path,
    dest: Path,
    compression: str = "zstd",
    *,
    keep: frozenset[str] = frozenset(),
    order: str = "sorted",
) -> Path:
    """Every artifact dir of ``tree`` as an archive in ``dest`` (the ones named in ``keep``
    copied as directories instead, a mixed input dir)."""
    import shutil

    dest.mkdir(parents=True, exist_ok=True)
    for art in sorted(tree.iterdir()):
        if not art.is_dir():
            continue
        if art.name in keep:
            shutil.copytree(art, dest / art.name, symlinks=True)
        else:
            pack_artifact(art, dest, compression, order=order)
    return dest
