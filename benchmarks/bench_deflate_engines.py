"""Compare deflate engines on one large member, in 4 MiB chunks, as the wheel writer streams it.

    python benchmarks/bench_deflate_engines.py [FILE] [--pypi]

``--pypi`` measures the host library of ``jax-rocm7-pjrt`` 0.10.0 after the split (the
495 MB ``xla_rocm_plugin.so`` without device code): the wheel is split into a temporary
directory first. Each engine compresses the same chunks on one thread; CPU time and size
are printed as ratios against the standard library's ``zlib`` at level 6, measured in the
same run. Engines: stdlib ``zlib`` 6 (pigz-style sync-flushed chunks), joined libdeflate
chunks (``kpack.wheelfile._join``, what members over 64 MiB use), and zlib-ng 6/7/9 when
the ``zlib-ng`` package is installed (it is not a dependency).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHUNK = 4 << 20


def _sync_flushed(module: ModuleType, level: int) -> Callable[[bytes, bool], bytes]:
    def run(chunk: bytes, final: bool) -> bytes:
        comp = module.compressobj(level, zlib.DEFLATED, -15)
        return comp.compress(chunk) + comp.flush(zlib.Z_FINISH if final else zlib.Z_SYNC_FLUSH)

    return run


def _pjrt_host(work: Path) -> Path:
    from kpack.wheelsplit import SplitOptions, split_wheel
    from tests.pypi_inputs import JAX_PJRT, fetch_wheel

    out = work / "split"
    split_wheel(fetch_wheel(JAX_PJRT), out, SplitOptions(JAX_PJRT.overlay_root, "amd-device"))
    member = "jax_plugins/xla_rocm7/xla_rocm_plugin.so"
    with zipfile.ZipFile(next(out.glob("jax_rocm7_pjrt-*.whl"))) as zf:
        zf.extract(member, work)
    return work / member


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", type=Path)
    parser.add_argument("--pypi", action="store_true", help="jax-rocm7-pjrt's host library")
    args = parser.parse_args()
    if (args.file is None) == (not args.pypi):
        parser.error("give FILE or --pypi")
    from kpack.wheelfile._join import joiner

    join = joiner()
    engines: list[tuple[str, Callable[[bytes, bool], bytes]]] = [("zlib 6", _sync_flushed(zlib, 6))]
    if join is not None:
        engines.append(("joined libdeflate 6", lambda c, f: join.compress(c, 6, final=f)))
    try:
        from zlib_ng import zlib_ng

        engines += [(f"zlib-ng {lv}", _sync_flushed(zlib_ng, lv)) for lv in (6, 7, 9)]
    except ImportError:
        print("zlib-ng not installed: its rows are left out")
    with tempfile.TemporaryDirectory() as tmp:
        path = _pjrt_host(Path(tmp)) if args.pypi else args.file
        data = path.read_bytes()
    chunks = [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]
    print(f"{path.name}: {len(data) / 1e6:.1f} MB, {len(chunks)} chunks of 4 MiB, one thread")
    base: tuple[float, int] | None = None
    for name, run in engines:
        start = time.process_time()
        size = sum(len(run(c, i == len(chunks) - 1)) for i, c in enumerate(chunks))
        cpu = time.process_time() - start
        base = base or (cpu, size)
        print(f"{name:22s} cpu {cpu:6.2f} s {cpu / base[0]:5.2f}x   "
              f"size {size / 1e6:8.1f} MB {size / base[1]:6.3f}x")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
