"""A second, independent ``.kpack`` reader with HRX's rules (libhrx ``kpack.c``), for tests.

It shares no code with :mod:`kpack.archive`: the whole file is read into memory (and
refused over 2 GiB), the TOC is decoded with msgpack, the zstd blob's frames are walked
linearly by their u32 size prefixes, and every entry must have ``original_size`` > 0 and a
frame whose content size (declared and decoded) equals it.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import msgpack
import zstandard

HRX_MAX_FILE = 2 << 30  # HRX reads whole archives and refuses any over 2 GiB


class HrxRefused(Exception):
    """The archive breaks one of HRX's rules."""


def _require(ok: bool, why: str) -> None:
    if not ok:
        raise HrxRefused(why)


def hrx_read(path: Path) -> dict[tuple[str, str], bytes]:
    """Every ``(binary_key, target)`` of ``path`` and its code object, as HRX loads them."""
    size = path.stat().st_size
    _require(size <= HRX_MAX_FILE, f"{size} bytes: over 2 GiB")
    raw = path.read_bytes()  # the whole file, as HRX reads it
    _require(len(raw) >= 16 and raw[:4] == b"KPAK", "bad magic")
    version, toc_offset = struct.unpack_from("<IQ", raw, 4)
    _require(version == 1, f"version {version}")
    _require(64 <= toc_offset < len(raw), f"toc_offset {toc_offset}")
    toc: dict[str, Any] = msgpack.unpackb(raw[toc_offset:], raw=False, strict_map_key=False)
    scheme = toc.get("compression_scheme", "none")
    stored: list[bytes]
    if scheme == "zstd-per-kernel":
        start, length = toc["zstd_offset"], toc["zstd_size"]
        _require(start + length <= toc_offset, "zstd blob runs into the TOC")
        (count,) = struct.unpack_from("<I", raw, start)
        pos, end, stored = start + 4, start + length, []
        for _ in range(count):  # linearly, by the size prefixes
            _require(pos + 4 <= end, "frame prefix past the blob")
            (frame_size,) = struct.unpack_from("<I", raw, pos)
            _require(pos + 4 + frame_size <= end, "frame past the blob")
            stored.append(raw[pos + 4 : pos + 4 + frame_size])
            pos += 4 + frame_size
        _require(pos == end, "bytes after the last frame")
    else:
        _require(scheme == "none", f"scheme {scheme!r}")
        stored = [raw[b["offset"] : b["offset"] + b["size"]] for b in toc["blobs"]]
    out: dict[tuple[str, str], bytes] = {}
    for key, targets in toc["toc"].items():
        for target, entry in targets.items():
            original = entry["original_size"]
            _require(isinstance(original, int) and original > 0, f"{key} {target}: original_size")
            _require(0 <= entry["ordinal"] < len(stored), f"{key} {target}: ordinal")
            blob = stored[entry["ordinal"]]
            if scheme == "zstd-per-kernel":
                declared = zstandard.get_frame_parameters(blob).content_size
                _require(declared == original, f"{key} {target}: frame content size {declared}")
                data = zstandard.ZstdDecompressor().decompress(blob, max_output_size=original)
            else:
                data = blob
            _require(len(data) == original, f"{key} {target}: {len(data)} bytes, not {original}")
            out[(key, target)] = data
    _require(set(toc["gfx_arches"]) >= {t for _, t in out}, "a target missing from gfx_arches")
    return out
