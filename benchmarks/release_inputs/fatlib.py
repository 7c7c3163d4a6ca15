"""Fat shared libraries of real code objects: one plain offload bundle per translation unit.

A :class:`LibrarySpec` names the translation units (pool unit, pass) a library holds and
the targets each bundle carries. In pass ``p`` target ``j`` of :data:`TARGETS` gets the
real code object of pool target ``(j + p) % 31``, relabelled when that is another target
(:func:`source_index`): pass 0 is the pool as it is for its 31 real targets, and up to 31
passes never put the same bytes twice into one target's share of a unit.

Each bundle is written as clang-offload-bundler lays one out (an empty host entry, code
objects 4096-aligned) and streamed into a ``.hip_fatbin`` file, bundles 4096-aligned; gcc
then links a small shared library around it (``.incbin``), with one ``.hipFatBinSegment``
wrapper per bundle, its SONAME and fixed ``SOURCE_DATE_EPOCH``-free inputs, so the same
spec gives the same bytes. Libraries are cached by their spec under
``<cache>/bench/libs/<key>/``; gcc holds one library's section in memory while linking.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO

from benchmarks.release_inputs.pool import REAL, Pool
from benchmarks.release_inputs.targets import TARGETS, relabel
from kpack.errors import ToolError

__all__ = ["LibrarySpec", "make_library", "source_index", "unit_bytes"]

_ALIGN = 4096
_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
_HOST = b"host-x86_64-unknown-linux-gnu-"
_DEVICE = "hipv4-amdgcn-amd-amdhsa--"
_INDEX = {t.name: i for i, t in enumerate(TARGETS)}
#: Bump when the bytes a spec gives change.
FORMAT = 1


@dataclass(frozen=True, kw_only=True)
class LibrarySpec:
    filename: str  # lib/<filename>, e.g. librocblas.so.5.1
    soname: str
    units: tuple[tuple[int, int], ...]  # (pool unit, pass)
    targets: tuple[str, ...]

    def key(self) -> str:
        text = json.dumps({"format": FORMAT, **asdict(self)}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:24]


def source_index(target: str, pass_: int) -> int:
    """Index in :data:`REAL` of the real code object target ``target`` gets in ``pass_``."""
    return (_INDEX[target] + pass_) % len(REAL)


def _round(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def _header(targets: Sequence[str], sizes: Sequence[int]) -> tuple[bytes, int]:
    """The bundle header for ``targets`` (host entry first) and the bundle's length."""
    triples = [_HOST, *(f"{_DEVICE}{t}".encode() for t in targets)]
    head_len = len(_MAGIC) + 8 + sum(24 + len(t) for t in triples)
    first = pos = _round(head_len)
    head = bytearray(_MAGIC + struct.pack("<Q", len(triples)))
    head += struct.pack("<QQQ", first, 0, len(_HOST)) + _HOST
    for triple, size in zip(triples[1:], sizes, strict=True):
        head += struct.pack("<QQQ", pos, size, len(triple)) + triple
        pos = _round(pos + size)
    return bytes(head) + bytes(first - len(head)), pos


def unit_bytes(pool: Pool, unit: int, pass_: int, targets: Sequence[str]) -> int:
    """The length of the bundle of ``unit`` in ``pass_`` for ``targets``, 4096-rounded."""
    sizes = pool.sizes(unit)
    return _header(targets, [sizes[source_index(t, pass_)] for t in targets])[1]


def _write_unit(out: BinaryIO, pool: Pool, unit: int, pass_: int, targets: Sequence[str]) -> None:
    sizes = pool.sizes(unit)
    head, _ = _header(targets, [sizes[source_index(t, pass_)] for t in targets])
    out.write(head)
    with pool.unit(unit) as code_objects:
        for target in targets:
            source = source_index(target, pass_)
            data = code_objects[source]
            out.write(data if REAL[source] == target else relabel(data, target))
            out.write(bytes(_round(len(data)) - len(data)))


_MAIN_C = "int rocm_bench_library_probe(int x) { return 3 * x; }\n"


def _asm(fatbin: Path, offsets: Sequence[int]) -> str:
    lines = [
        '\t.section .hip_fatbin,"a",@progbits',
        "\t.p2align 12",
        ".Lfatbin:",
        f'\t.incbin "{fatbin}"',
        '\t.section .hipFatBinSegment,"aw",@progbits',
        "\t.p2align 3",
    ]
    for offset in offsets:
        lines += ["\t.long 0x48495046, 1", f"\t.quad .Lfatbin + {offset}", "\t.quad 0"]
    lines.append('\t.section .note.GNU-stack,"",@progbits')
    return "\n".join(lines) + "\n"


def _link(work: Path, offsets: Sequence[int], spec: LibrarySpec, out: Path) -> None:
    (work / "main.c").write_text(_MAIN_C)
    (work / "fatbin.s").write_text(_asm(work / "fatbin.bin", offsets))
    cmd = [
        "gcc",
        "-O1",
        "-g0",
        "-shared",
        "-fPIC",
        f"-Wl,-soname,{spec.soname}",
        "-Wl,--build-id=sha1",
        "main.c",
        "fatbin.s",
        "-o",
        str(out),
    ]
    proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ToolError(f"gcc failed (exit {proc.returncode}): {' '.join(cmd)}\n{proc.stderr}")


def make_library(pool: Pool, spec: LibrarySpec, cache: Path) -> Path:
    """The library of ``spec``, from the cache or made into it."""
    final = cache / "bench" / "libs" / spec.key() / spec.filename
    if final.is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    if shutil.which("gcc") is None:
        raise ToolError("gcc is needed to link the benchmark's fat libraries")
    with tempfile.TemporaryDirectory(prefix="fatlib-", dir=final.parent) as tmp:
        work = Path(tmp)
        offsets = []
        with (work / "fatbin.bin").open("wb") as out:
            for unit, pass_ in spec.units:
                offsets.append(out.tell())
                _write_unit(out, pool, unit, pass_, spec.targets)
        partial = work / spec.filename
        _link(work, offsets, spec, partial)
        os.chmod(partial, 0o755)
        partial.rename(final)
    return final
