"""Bytes saved by storing each code object once per ``.kpack`` archive (issue 32, item 2).

    python benchmarks/bench_shared_frames.py [--wheel X.whl ...] [--tree ARTIFACT_DIR ...]
                                             [--sample-tree] [--twice]

Splits each input in this run (``kpack split-wheel`` on the cached PyPI ROCm wheels of
tests/pypi_inputs.py by default, ``kpack split-artifacts`` on ``--tree`` artifacts and, with
``--sample-tree``, on the kpack-mode sample tree of real Debian and hipcc-built binaries (a
tree: each ``_generic`` artifact in it);
``--twice``: Debian's real ``librocrand.so.1.1`` shipped under two names in one wheel, as a
wheel without symlinks ships a library and its soname) and reads every archive written: its
size as written (each code object stored once, entries sharing ordinals) against the
baseline, the size the same archive has with one frame per entry (every extra entry of a
shared ordinal adds its ``u32`` size prefix and its frame, or its blob in scheme ``none``;
the TOC is the same size, its ordinals being small ints either way). An independent count
decodes every stored frame and counts the distinct code objects: ``missed`` is the frames
that repeat one already stored (0 when nothing was left to share). Prints per input:
entries, stored frames, distinct code objects, archive bytes, baseline bytes, the bytes
saved and the ratio written/baseline.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import struct
import subprocess
import sys
import tempfile
import zipfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import zstandard

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.pypi_inputs import (  # noqa: E402
    CYLLAMA,
    GAFIME,
    JAX_PJRT,
    JAX_PLUGIN,
    SPLINE_CONV,
    PypiWheel,
    fetch_wheel,
)

DEFAULT_WHEELS = (JAX_PLUGIN, GAFIME, SPLINE_CONV, CYLLAMA, JAX_PJRT)


def archive_figures(raw: bytes) -> tuple[int, int, int, int, int]:
    """(entries, stored frames, distinct code objects, size, size with one frame per
    entry) of one archive."""
    (toc_offset,) = struct.unpack_from("<Q", raw, 8)
    toc = msgpack.unpackb(raw[toc_offset:], raw=False)
    uses = Counter(e["ordinal"] for targets in toc["toc"].values() for e in targets.values())
    blobs: list[bytes] = []
    if toc.get("compression_scheme", "none") == "none":
        blobs = [raw[b["offset"] : b["offset"] + b["size"]] for b in toc["blobs"]]
        prefix = 0
    else:
        pos = toc["zstd_offset"]
        (count,) = struct.unpack_from("<I", raw, pos)
        pos += 4
        for _ in range(count):
            (size,) = struct.unpack_from("<I", raw, pos)
            blobs.append(zstandard.ZstdDecompressor().decompress(raw[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        prefix = 4
    stored = _stored_sizes(raw, toc, prefix)
    extra = sum((n - 1) * (prefix + stored[o]) for o, n in uses.items())
    distinct = len({hashlib.sha256(b).digest() for b in blobs})
    return sum(uses.values()), len(blobs), distinct, len(raw), len(raw) + extra


def _stored_sizes(raw: bytes, toc: dict[str, Any], prefix: int) -> list[int]:
    if not prefix:
        return [b["size"] for b in toc["blobs"]]
    pos = toc["zstd_offset"]
    (count,) = struct.unpack_from("<I", raw, pos)
    sizes = []
    pos += 4
    for _ in range(count):
        (size,) = struct.unpack_from("<I", raw, pos)
        sizes.append(size)
        pos += 4 + size
    return sizes


def archives(out: Path) -> Iterator[bytes]:
    for path in sorted(out.rglob("*")):
        if path.is_file() and path.suffix == ".kpack":
            yield path.read_bytes()
        elif path.is_file() and path.suffix == ".whl":
            with zipfile.ZipFile(path) as z:
                for name in sorted(z.namelist()):
                    if name.endswith(".kpack"):
                        yield z.read(name)


def report(label: str, out: Path) -> None:
    entries = frames = distinct = size = base = 0
    for raw in archives(out):
        e, f, d, s, b = archive_figures(raw)
        entries, frames, distinct = entries + e, frames + f, distinct + d
        size, base = size + s, base + b
    if not base:
        print(f"{label}: no archives")
        return
    saved = base - size
    print(
        f"{label}: {entries} entries in {frames} frames ({distinct} distinct code objects, "
        f"missed {frames - distinct}); archives {size / 1e6:.2f} MB, one frame per entry "
        f"{base / 1e6:.2f} MB; saved {saved / 1e6:.2f} MB ({100 * saved / base:.1f} %), "
        f"ratio {size / base:.3f}"
    )


def run(cmd: list[str]) -> None:
    env = {**os.environ, "SOURCE_DATE_EPOCH": "1700000000"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr}")


def split_wheel(wheel: Path, overlay_root: str, tmp: Path) -> Path:
    out = tmp / wheel.stem
    cmd = [sys.executable, "-m", "kpack", "split-wheel", "--input", str(wheel)]
    cmd += ["--output-dir", str(out), "--device-package-prefix", "bench-device"]
    if overlay_root:
        cmd += ["--overlay-root", overlay_root]
    run(cmd)
    return out


def twice_wheel(tmp: Path) -> Path:
    """Debian's real librocrand (7 ISAs) under its file name and its soname, in one wheel."""
    from kpack.wheelfile import Member, write_wheel
    from sample_tree.debian_inputs import fetch_debs

    lib = fetch_debs(["librocrand1"])["librocrand1"] / "usr/lib/x86_64-linux-gnu/librocrand.so.1.1"
    members = [
        Member("rocrand_twice/__init__.py", b""),
        Member("rocrand_twice/lib/librocrand.so.1", lib, executable=True),
        Member("rocrand_twice/lib/librocrand.so.1.1", lib, executable=True),
    ]
    return write_wheel(
        tmp / "twice", dist_name="rocrand_twice", version="1.0", tag="py3-none-linux_x86_64",
        members=members, metadata=b"Metadata-Version: 2.1\nName: rocrand-twice\nVersion: 1.0\n",
    ).path  # fmt: skip


def sample_tree(tmp: Path) -> Path:
    """The kpack-mode sample tree (real Debian binaries and hipcc-built ones)."""
    from sample_tree.make_sample_tree import make_sample_tree

    return make_sample_tree(tmp / "sample" / "artifacts", family="gfx90a-dcgpu", kpack_split=True)


def artifact_dirs(tree: Path) -> list[Path]:
    """``tree`` if it is one artifact, else its artifacts that still hold device code."""
    if (tree / "artifact_manifest.txt").is_file():
        return [tree]
    found = [d for d in sorted(tree.iterdir()) if (d / "artifact_manifest.txt").is_file()]
    return [d for d in found if d.name.endswith("_generic")] or found


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--wheel", type=Path, action="append", default=[], help="a wheel to split")
    p.add_argument("--overlay-root", default="", help="overlay root of the --wheel inputs")
    p.add_argument("--tree", type=Path, action="append", default=[], help="an artifact dir")
    p.add_argument("--sample-tree", action="store_true", help="the kpack-mode sample tree")
    p.add_argument("--twice", action="store_true", help="Debian's librocrand under two names")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-shared-") as name:
        tmp = Path(name)
        inputs: list[tuple[Path, str]] = [(w, args.overlay_root) for w in args.wheel]
        if not (args.wheel or args.tree or args.sample_tree or args.twice):
            wheels: tuple[PypiWheel, ...] = DEFAULT_WHEELS
            inputs = [(fetch_wheel(w), w.overlay_root) for w in wheels]
        if args.twice:
            inputs.append((twice_wheel(tmp), "rocrand_twice/"))
        for wheel, root in inputs:
            report(wheel.name, split_wheel(wheel, root, tmp))
        trees = list(args.tree)
        if args.sample_tree:
            trees.append(sample_tree(tmp))
        for tree in trees:
            out = tmp / "split" / tree.name
            for artifact in artifact_dirs(tree):
                run([sys.executable, "-m", "kpack", "split-artifacts", "--artifact-dir",
                     str(artifact), "--output-dir", str(out / artifact.name)])  # fmt: skip
            report(tree.name, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
