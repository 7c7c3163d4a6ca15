"""Bytes saved by storing each code object once per ``.kpack`` archive (issue 32, item 2).

    python benchmarks/bench_shared_frames.py [--wheel X.whl ...] [--tree ARTIFACT_DIR ...]

Splits each input in this run (``kpack split-wheel`` on the cached PyPI ROCm wheels of
tests/pypi_inputs.py by default, ``kpack split-artifacts`` on ``--tree`` artifacts) and reads
every archive written: its size as written (each code object stored once, entries sharing
ordinals) against the baseline, the size the same archive has with one frame per entry
(every extra entry of a shared ordinal adds its ``u32`` size prefix and its frame, or its
blob in scheme ``none``; the TOC is the same size, its ordinals being small ints either
way). Prints per input: entries, stored frames, archive bytes, baseline bytes, the bytes
saved and the ratio written/baseline.
"""

from __future__ import annotations

import argparse
import os
import struct
import subprocess
import sys
import tempfile
import zipfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import msgpack

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


def archive_figures(raw: bytes) -> tuple[int, int, int, int]:
    """(entries, stored frames, size, size with one frame per entry) of one archive."""
    (toc_offset,) = struct.unpack_from("<Q", raw, 8)
    toc = msgpack.unpackb(raw[toc_offset:], raw=False)
    uses = Counter(e["ordinal"] for targets in toc["toc"].values() for e in targets.values())
    if toc.get("compression_scheme", "none") == "none":
        sizes = [b["size"] for b in toc["blobs"]]
        prefix = 0
    else:
        pos = toc["zstd_offset"]
        (count,) = struct.unpack_from("<I", raw, pos)
        pos += 4
        sizes = []
        for _ in range(count):
            (size,) = struct.unpack_from("<I", raw, pos)
            sizes.append(size)
            pos += 4 + size
        prefix = 4
    extra = sum((n - 1) * (prefix + sizes[o]) for o, n in uses.items())
    return sum(uses.values()), len(sizes), len(raw), len(raw) + extra


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
    entries = frames = size = base = 0
    for raw in archives(out):
        e, f, s, b = archive_figures(raw)
        entries, frames, size, base = entries + e, frames + f, size + s, base + b
    if not base:
        print(f"{label}: no archives")
        return
    saved = base - size
    print(
        f"{label}: {entries} entries in {frames} frames; archives {size / 1e6:.1f} MB, "
        f"one frame per entry {base / 1e6:.1f} MB; saved {saved / 1e6:.1f} MB "
        f"({100 * saved / base:.1f} %), ratio {size / base:.3f}"
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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--wheel", type=Path, action="append", default=[], help="a wheel to split")
    p.add_argument("--overlay-root", default="", help="overlay root of the --wheel inputs")
    p.add_argument("--tree", type=Path, action="append", default=[], help="an artifact dir")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-shared-") as name:
        tmp = Path(name)
        inputs: list[tuple[Path, str]] = [(w, args.overlay_root) for w in args.wheel]
        if not args.wheel and not args.tree:
            wheels: tuple[PypiWheel, ...] = DEFAULT_WHEELS
            inputs = [(fetch_wheel(w), w.overlay_root) for w in wheels]
        for wheel, root in inputs:
            report(wheel.name, split_wheel(wheel, root, tmp))
        for tree in args.tree:
            out = tmp / tree.name
            run([sys.executable, "-m", "kpack", "split-artifacts", "--artifact-dir", str(tree),
                 "--output-dir", str(out)])  # fmt: skip
            report(tree.name, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
