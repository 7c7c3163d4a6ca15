"""A torch-sized fat wheel: over 20,000 code objects for 36 targets in about 5 GB of members.

Its fat libraries are made like a tree's (:mod:`.fatlib`), every bundle with all 36 targets:
every pool unit of pass 0 (the large ones, 70-115 MB decoded per bundle), then the pool's
small units (under 10 MB) pass after pass until the code-object count is reached — torch's
libraries hold thousands of small kernels' bundles beside a few large ones. They are cut at
:data:`plan.CAP` bytes into ``torch_sized/lib/libtorch_hip.so``, ``libc10_hip.so`` …, and
written by the project's deterministic wheel writer (deflate level 6, ``SOURCE_DATE_EPOCH``
or a fixed time), so the same command gives the same wheel.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from benchmarks.release_inputs.fatlib import LibrarySpec, make_library, unit_bytes
from benchmarks.release_inputs.plan import ALL, CAP, wheel_units
from benchmarks.release_inputs.pool import open_pool
from kpack.wheelfile import Member, write_wheel

__all__ = ["DIST", "OVERLAY_ROOT", "WheelResult", "make_release_wheel"]

DIST = "torch-sized"
VERSION = "2.9.0"
OVERLAY_ROOT = "torch_sized/"
TAG = "cp312-cp312-manylinux_2_28_x86_64"
EPOCH = 1700000000
_NAMES = (
    "libtorch_hip",
    "libc10_hip",
    "libtorch_hip_linalg",
    "libtorch_hip_sparse",
    "libtorch_hip_fft",
    "libtorch_hip_attention",
    "libtorch_hip_reduce",
    "libtorch_hip_conv",
    "libtorch_hip_quant",
)


@dataclass(frozen=True, kw_only=True)
class WheelResult:
    path: Path
    content_bytes: int
    code_objects: int
    targets: int


def _chunks(units: list[tuple[int, int]], sizes: list[int]) -> list[list[tuple[int, int]]]:
    out: list[list[tuple[int, int]]] = [[]]
    size = 0
    for unit, grows in zip(units, sizes, strict=True):
        if out[-1] and size + grows > CAP:
            out.append([])
            size = 0
        out[-1].append(unit)
        size += grows
    return out


def make_release_wheel(out_dir: Path, *, code_objects: int, cache: Path) -> WheelResult:
    """Write the wheel into ``out_dir``; its libraries are cached like a tree's."""
    pool = open_pool(cache)
    units = wheel_units(pool, code_objects)
    chunks = _chunks(units, [unit_bytes(pool, u, p, ALL) for u, p in units])
    members = [Member(f"{OVERLAY_ROOT}__init__.py", b'"""A torch-sized fat wheel."""\n')]
    for i, chunk in enumerate(chunks):
        name = _NAMES[i % len(_NAMES)] + (f"_{i // len(_NAMES) + 1}" if i >= len(_NAMES) else "")
        spec = LibrarySpec(
            filename=f"{name}.so", soname=f"{name}.so", units=tuple(chunk), targets=ALL
        )
        members.append(Member(f"{OVERLAY_ROOT}lib/{name}.so", make_library(pool, spec, cache)))
    metadata = f"Metadata-Version: 2.1\nName: {DIST}\nVersion: {VERSION}\n".encode()
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", EPOCH))
    out_dir.mkdir(parents=True, exist_ok=True)
    result = write_wheel(
        out_dir,
        dist_name=DIST,
        version=VERSION,
        tag=TAG,
        members=members,
        metadata=metadata,
        epoch=epoch,
    )
    content = sum(m.source.stat().st_size for m in members if isinstance(m.source, Path))
    return WheelResult(
        path=result.path,
        content_bytes=content,
        code_objects=len(units) * len(ALL),
        targets=len(ALL),
    )
