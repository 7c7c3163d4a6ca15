"""Device bytes and compression time per zstd level, on real device code.

    python benchmarks/bench_device_compression.py [--pypi] [--pypi10] [--rocsparse]
                                                  [--wheel X.whl] [--library X.so]
                                                  [--levels 3,6,9,12] [--ours 6,7,8,9]
                                                  [--max-level 19] [--split-levels 3,8]
                                                  [--json PATH]

Every ``.kpack`` kernel is one independent zstd frame (kpack.md §1.2), so what a user
downloads for a GPU is the sum of its code objects' frames. For each input this decodes
the code objects once (into a spool file, mapped), then compresses every one of them as
its own frame, the way the splitter makes frames (streaming compressor, size pledged,
no checksum), once per configuration, on one thread, and prints per configuration:
the frames' bytes and the CPU time, each as a ratio against level 3 with zstd's parameters
(rocm-kpack's frames) measured in the same run.

Configurations: zstd's own parameters at each level of ``--levels`` (rocm-kpack's frames;
19 is slow: ``--max-level``); our frames (``kpack.archive.compressor``: the level with a
128 MiB window, which zstd shrinks to each code object's size) at each of ``--ours``; and
long-distance matching within a frame (``ldm``) at ``--ldm-at``. Every frame is decoded back
with a default decoder's window limit and compared.

``--split-levels A,B`` also times the whole split (``kpack split-wheel -j 2`` of the
wheel, or ``kpack split-artifacts -j 2`` of a one-library artifact) at each level, in a
fresh process, best of ``--repeat`` alternating runs, and prints the wall-time ratio of
each level against the first: what the default costs end to end.

``--json PATH`` also writes the key figures per input: the bytes and CPU seconds of level 3
and of the default (``kpack.archive.DEFAULT_LEVEL`` through ``compressor``, measured even
when ``--ours`` leaves it out), their ratios, and the split's best wall time per
``--split-levels`` level (with the default's ratio against level 3 when both are timed).

Inputs: ``--pypi`` jax-rocm7-pjrt 0.10.0 (41 CCOB v3 bundles, 1.21 GB of device code,
generic targets), ``--pypi10`` jax-rocm10-pjrt 0.12.0 (ROCm 10, up to gfx1250),
``--rocsparse`` Debian's librocsparse (1.31 GB of plain bundles, downloaded once), any
``--wheel`` or ``--library``; with none of them jax-rocm7-plugin 0.10.0 and Debian's
librocrand (both small).
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

import zstandard  # noqa: E402

from kpack.archive import DEFAULT_LEVEL, compressor  # noqa: E402
from kpack.archive._write import compress_frame  # noqa: E402
from kpack.transform import ExtractedKernel, extract_kernels, stream_kernels  # noqa: E402

WINDOW_LIMIT = 1 << 27  # a default zstd decoder's largest window (ZSTD_WINDOWLOG_LIMIT_DEFAULT)


@dataclass(frozen=True)
class Config:
    name: str
    level: int
    make: Callable[[], zstandard.ZstdCompressor]


def _plain(level: int) -> zstandard.ZstdCompressor:
    """zstd's own parameters at ``level``, as rocm-kpack makes its frames."""
    return zstandard.ZstdCompressor(level=level, write_content_size=True, write_checksum=False)


def ours_name(level: int) -> str:
    return f"level {level} 128M window"


def configs(levels: list[int], ours: list[int], ldm_at: list[int]) -> list[Config]:
    out = [Config(f"level {n}", n, lambda n=n: _plain(n)) for n in levels]
    out += [Config(ours_name(n), n, lambda n=n: compressor(n)) for n in ours]
    for n in ldm_at:
        params = zstandard.ZstdCompressionParameters.from_level(
            n, write_content_size=True, write_checksum=False, enable_ldm=True
        )
        make = lambda p=params: zstandard.ZstdCompressor(compression_params=p)  # noqa: E731
        out.append(Config(f"level {n} ldm", n, make))
    return out


# -- inputs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Input:
    name: str
    binaries: list[Path]  # fat host binaries
    wheel: Path | None = None  # split end to end as a wheel
    overlay_root: str = ""


def fat_binaries_of(wheel: Path, work: Path) -> list[Path]:
    """The wheel's members that hold device code, extracted under ``work``."""
    found = []
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            name = info.filename
            if info.is_dir() or not (name.endswith((".so", ".dll")) or ".so." in name):
                continue
            with z.open(info) as f:
                head = f.read(4)
            if head not in (b"\x7fELF", b"MZ\x90\x00"):
                continue
            path = work / info.filename
            path.parent.mkdir(parents=True, exist_ok=True)
            with z.open(info) as src, path.open("wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
            try:
                if extract_kernels(path):
                    found.append(path)
                    continue
            except Exception:
                pass
            path.unlink()
    return found


def gather(args: argparse.Namespace, work: Path) -> list[Input]:
    sys.path.insert(0, str(ROOT / "tests"))
    from sample_tree.debian_inputs import fetch_debs
    from tests import pypi_inputs

    inputs = []
    wheels = []
    if args.pypi:
        wheels.append(pypi_inputs.JAX_PJRT)
    if args.pypi10:
        wheels.append(pypi_inputs.JAX10_PJRT)
    for spec in wheels:
        path = pypi_inputs.fetch_wheel(spec)
        binaries = fat_binaries_of(path, work / spec.project)
        inputs.append(Input(spec.filename, binaries, path, spec.overlay_root))
    if args.wheel:
        binaries = fat_binaries_of(args.wheel, work / "wheel")
        inputs.append(Input(args.wheel.name, binaries, args.wheel, args.overlay_root or "."))
    if args.rocsparse:
        root = fetch_debs(["librocsparse0"])["librocsparse0"]
        lib = root / "usr/lib/x86_64-linux-gnu/librocsparse.so.0.1"
        inputs.append(Input("librocsparse", [lib]))
    for lib in args.library or ():
        inputs.append(Input(lib.name, [lib]))
    if not inputs:
        path = pypi_inputs.fetch_wheel(pypi_inputs.JAX_PLUGIN)
        inputs.append(Input(path.name, fat_binaries_of(path, work / "plugin"), path,
                            pypi_inputs.JAX_PLUGIN.overlay_root))  # fmt: skip
        root = fetch_debs(["librocrand1"])["librocrand1"]
        inputs.append(Input("librocrand", [root / "usr/lib/x86_64-linux-gnu/librocrand.so.1.1"]))
    return inputs


# -- code objects -----------------------------------------------------------------------------


def spool_code_objects(binaries: list[Path], spool: Path) -> list[tuple[str, int, int]]:
    """Decode every code object once into ``spool``: (target, offset, size) per object."""
    ranges: list[tuple[str, int, int]] = []
    with spool.open("wb") as out:
        for binary in binaries:
            kernels = extract_kernels(binary)

            def sink(kernel: ExtractedKernel) -> Callable[[bytes | memoryview], object]:
                ranges.append((kernel.target, out.tell(), kernel.size))
                return out.write

            stream_kernels(kernels, sink)
    return ranges


def frames(view: memoryview, ranges: list[tuple[str, int, int]]) -> Iterator[memoryview]:
    for _, offset, size in ranges:
        yield view[offset : offset + size]


def measure(cfg: Config, view: memoryview, ranges: list[tuple[str, int, int]]) -> tuple[int, float]:
    """Bytes of every frame and the CPU seconds spent compressing; each frame checked."""
    cctx = cfg.make()
    dctx = zstandard.ZstdDecompressor(max_window_size=WINDOW_LIMIT)
    total = 0
    cpu = 0.0
    for data in frames(view, ranges):
        start = time.process_time()
        writer_out = compress_frame(cctx, data)
        cpu += time.process_time() - start
        total += len(writer_out)
        if dctx.decompress(writer_out) != data:
            raise SystemExit(f"{cfg.name}: a frame does not decode to its code object")
    return total, cpu


# -- the whole split --------------------------------------------------------------------------


def split_once(inp: Input, level: int, out: Path) -> float:
    import shutil

    shutil.rmtree(out, ignore_errors=True)
    if inp.wheel is not None:
        cmd = [sys.executable, "-m", "kpack", "split-wheel", "-q", "-j", "2",
               "--input", str(inp.wheel), "--output-dir", str(out),
               "--overlay-root", inp.overlay_root or ".",
               "--device-package-prefix", "bench-device",
               "--compression-level", str(level)]  # fmt: skip
    else:
        artifact = out.parent / f"art-{inp.name}" / "bench_lib_generic"
        if not artifact.is_dir():
            stage = artifact / "math-libs/bench/stage/lib"
            stage.mkdir(parents=True)
            for binary in inp.binaries:
                os.link(binary, stage / binary.name) if _same_fs(binary, stage) else shutil.copy2(
                    binary, stage / binary.name
                )
            (artifact / "artifact_manifest.txt").write_text("math-libs/bench/stage\n")
        cmd = [sys.executable, "-m", "kpack", "split-artifacts", "-q", "-j", "2",
               "--artifact-dir", str(artifact), "--output-dir", str(out),
               "--artifact-prefix", "bench_lib", "--compression-level", str(level)]  # fmt: skip
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
    return time.perf_counter() - start


def _same_fs(a: Path, b: Path) -> bool:
    return a.stat().st_dev == b.stat().st_dev


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pypi", action="store_true", help="jax-rocm7-pjrt 0.10.0")
    parser.add_argument("--pypi10", action="store_true", help="jax-rocm10-pjrt 0.12.0")
    parser.add_argument("--rocsparse", action="store_true", help="Debian's librocsparse")
    parser.add_argument("--wheel", type=Path, help="any wheel with fat binaries")
    parser.add_argument("--overlay-root", default=None)
    parser.add_argument("--library", type=Path, action="append", help="a fat host binary")
    parser.add_argument("--levels", default="3,6,9,12", help="levels with zstd's parameters")
    parser.add_argument("--max-level", type=int, default=0, help="also this slow level (19)")
    parser.add_argument("--ours", default="6,7,8,9", help="levels of our frames (128M window)")
    parser.add_argument("--ldm-at", default="8", help="levels to try long-distance matching at")
    parser.add_argument("--split-levels", default="", help="time the whole split at these")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write the key figures here")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",") if x]
    if 3 not in levels:
        levels.insert(0, 3)
    if args.max_level:
        levels.append(args.max_level)
    ours = [int(x) for x in args.ours.split(",") if x]
    if args.json and DEFAULT_LEVEL not in ours:
        ours.append(DEFAULT_LEVEL)  # the JSON always holds the default
    ldm_at = [int(x) for x in args.ldm_at.split(",") if x]
    split_levels = [int(x) for x in args.split_levels.split(",") if x]
    figures = []
    with tempfile.TemporaryDirectory(dir=Path.home()) as tmp:
        work = Path(tmp)
        for inp in gather(args, work):
            results = report(inp, work, configs(levels, ours, ldm_at))
            walls = split_report(inp, work, split_levels, args.repeat) if split_levels else {}
            figures.append(key_figures(inp, results, walls))
    if args.json:
        doc = {"default_level": DEFAULT_LEVEL, "repeat": args.repeat, "inputs": figures}
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


def key_figures(
    inp: Input, results: dict[str, tuple[int, float]], walls: dict[int, float]
) -> dict[str, object]:
    """Level 3 against the default, in bytes, CPU and (if timed) the whole split's wall time."""
    base_bytes, base_cpu = results["level 3"]
    out: dict[str, object] = {
        "input": inp.name,
        "level3": {"bytes": base_bytes, "cpu": base_cpu},
        "default": None,
        "bytes_ratio": None,
        "cpu_ratio": None,
        "split_wall": {str(level): wall for level, wall in walls.items()},
        "split_ratio": None,
    }
    if ours_name(DEFAULT_LEVEL) in results:
        size, cpu = results[ours_name(DEFAULT_LEVEL)]
        out["default"] = {"level": DEFAULT_LEVEL, "bytes": size, "cpu": cpu}
        out["bytes_ratio"] = size / base_bytes
        out["cpu_ratio"] = cpu / base_cpu
    if 3 in walls and DEFAULT_LEVEL in walls:
        out["split_ratio"] = walls[DEFAULT_LEVEL] / walls[3]
    return out


def report(inp: Input, work: Path, cfgs: list[Config]) -> dict[str, tuple[int, float]]:
    spool = work / "spool"
    ranges = spool_code_objects(inp.binaries, spool)
    raw = sum(size for _, _, size in ranges)
    targets = sorted({t for t, _, _ in ranges})
    print(f"\n{inp.name}: {len(inp.binaries)} fat binaries, {len(ranges)} code objects, "
          f"{raw / 1e6:.1f} MB raw, {len(targets)} targets")  # fmt: skip
    with spool.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        view = memoryview(m)
        results = {cfg.name: measure(cfg, view, ranges) for cfg in cfgs}
        base_bytes, base_cpu = results["level 3"]
        print(f"{'configuration':18s} {'device MB':>10s} {'bytes':>7s} {'CPU s':>8s} {'time':>7s}")
        for name, (size, cpu) in results.items():
            print(f"{name:18s} {size / 1e6:10.2f} {size / base_bytes:6.3f}x "
                  f"{cpu:8.2f} {cpu / base_cpu:6.2f}x")  # fmt: skip
        del view
    table = {k: {"bytes": b, "cpu": c} for k, (b, c) in results.items()}
    print(json.dumps({"input": inp.name, "raw": raw, "results": table}))
    spool.unlink()
    return results


def split_report(inp: Input, work: Path, levels: list[int], repeat: int) -> dict[int, float]:
    best: dict[int, float] = {}
    for _ in range(repeat):
        for level in levels:
            wall = split_once(inp, level, work / f"split-{level}")
            best[level] = min(best.get(level, wall), wall)
    base = best[levels[0]]
    for level in levels:
        print(f"whole split at level {level:2d}: {best[level]:6.2f} s  "
              f"{best[level] / base:5.2f}x level {levels[0]}")  # fmt: skip
    return best


if __name__ == "__main__":
    sys.exit(main())
