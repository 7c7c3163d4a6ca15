"""Synthesise offload bundles, CCOBs and ``.kpack`` files, and read real ones independently.

Everything here is written straight from the spec tables (kpack.md §1, §2) with ``struct``,
``zlib``, ``zstandard`` and ``msgpack`` -- it never calls :mod:`kpack.bundle` or
:mod:`kpack.archive` -- so tests can use it as an oracle for our writers and parsers. The
tool wrappers (pyelftools, ``objcopy``, ``clang-offload-bundler-15``, ``hipcc``) are oracles
for real binaries.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
import subprocess
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgpack
import zstandard
from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection

AMDGCN = "hipv4-amdgcn-amd-amdhsa--"
HOST = "host-x86_64-unknown-linux-gnu-"
PLAIN_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
BUNDLER = "clang-offload-bundler-15"
EM_AMDGPU = 224

# bookworm librocrand1 (real-inputs.md §2): target -> e_flags of its code object
ROCRAND_FLAGS = {
    "gfx803": 0x2A,
    "gfx900:xnack-": 0x22C,
    "gfx906:xnack-": 0x62F,
    "gfx908:xnack-": 0x630,
    "gfx90a:xnack+": 0x73F,
    "gfx90a:xnack-": 0x63F,
    "gfx1030": 0x36,
}
ROCRAND_LIB = "usr/lib/x86_64-linux-gnu/librocrand.so.1.1"

KERNEL_A = """#include <hip/hip_runtime.h>
__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
extern "C" int launch_scale(float* x, float a, int n) {
  hipLaunchKernelGGL(scale, dim3((n + 255) / 256), dim3(256), 0, 0, x, a, n);
  return static_cast<int>(hipGetLastError());
}
"""
KERNEL_B = KERNEL_A.replace("scale", "shift").replace("float", "int").replace("*=", "+=")


# --- synthetic inputs ---------------------------------------------------------------------


def fake_code_object(target: str, size: int = 512, e_flags: int = 0x30) -> bytes:
    """An ELF64 header claiming AMDGPU (``e_machine`` 224), then bytes derived from ``target``."""
    ident = b"\x7fELF" + bytes([2, 1, 1, 64, 2]) + bytes(7)
    header = ident + struct.pack(
        "<HHIQQQIHHHHHH", 3, EM_AMDGPU, 1, 0, 0, 0, e_flags, 64, 0, 0, 0, 0, 0
    )
    filler = hashlib.sha256(target.encode()).digest() * (size // 32 + 1)
    return (header + filler)[:size] if size >= len(header) else filler[:size]


def round_up(value: int, align: int) -> int:
    return -(-value // align) * align


def spec_plain_bundle(
    entries: Sequence[tuple[str, bytes]], *, align: int = 16, host: str | None = HOST
) -> bytes:
    """A plain bundle laid out per kpack.md §2.2 (host entry first, size 0)."""
    records = ([(host, b"")] if host is not None else []) + list(entries)
    header_len = 32 + sum(24 + len(t) for t, _ in records)
    offsets, pos = [], round_up(header_len, align)
    for _, data in records[1 if host is not None else 0 :]:
        offsets.append(pos)
        pos = round_up(pos + len(data), align)
    if host is not None:
        offsets.insert(0, offsets[0] if offsets else header_len)
    out = bytearray(PLAIN_MAGIC + struct.pack("<Q", len(records)))
    for (triple, data), offset in zip(records, offsets, strict=True):
        out += struct.pack("<QQQ", offset, len(data), len(triple)) + triple.encode()
    end = max([len(out), *(o + len(d) for (_, d), o in zip(records, offsets, strict=True))])
    out += bytes(end - len(out))
    for (_, data), offset in zip(records, offsets, strict=True):
        out[offset : offset + len(data)] = data
    return bytes(out)


def compress(data: bytes, method: str, level: int = 3) -> bytes:
    if method == "zstd":
        cctx = zstandard.ZstdCompressor(level=level, write_content_size=True, write_checksum=False)
        return bytes(cctx.compress(data))
    return zlib.compress(data, level)


def spec_ccob(
    plain: bytes,
    *,
    version: int = 2,
    method: str = "zstd",
    method_id: int | None = None,
    total: int | None = None,
    uncompressed: int | None = None,
    payload: bytes | None = None,
) -> bytes:
    """A CCOB per kpack.md §2.3; the keyword overrides forge inconsistent headers."""
    body = compress(plain, method) if payload is None else payload
    mid = {"zlib": 0, "zstd": 1}[method] if method_id is None else method_id
    digest = int.from_bytes(hashlib.md5(plain).digest()[:8], "little")
    size = len(plain) if uncompressed is None else uncompressed
    head = b"CCOB" + struct.pack("<HH", version, mid)
    if version == 1:
        return head + struct.pack("<IQ", size, digest) + body
    if version == 3:
        return head + struct.pack("<QQQ", total or 32 + len(body), size, digest) + body
    return head + struct.pack("<IIQ", total or 24 + len(body), size, digest) + body


def section(*bundles: bytes, align: int = 4096) -> tuple[bytes, list[int]]:
    """Concatenate bundles, each starting ``align``-aligned (zero padding between)."""
    out = bytearray()
    starts = []
    for bundle in bundles:
        out += bytes(round_up(len(out), align) - len(out))
        starts.append(len(out))
        out += bundle
    return bytes(out), starts


def sample_bundle(targets: Sequence[str], *, size: int = 300, align: int = 16) -> bytes:
    return spec_plain_bundle(
        [(AMDGCN + t, fake_code_object(t, size)) for t in targets], align=align
    )


def spec_kpack(
    kernels: Sequence[tuple[str, str, bytes]],
    *,
    scheme: str | None = "none",
    extra: dict[str, object] | None = None,
) -> bytes:
    """A ``.kpack`` per §1 with ordinals in *insertion* order, as rocm-kpack's writer does.

    ``scheme=None`` omits ``compression_scheme`` (older release). ``extra`` overrides TOC keys.
    """
    toc: dict[str, dict[str, object]] = {}
    blob = bytearray()
    blobs = []
    frames = []
    for ordinal, (key, target, data) in enumerate(kernels):
        toc.setdefault(key, {})[target] = {
            "type": "hsaco",
            "ordinal": ordinal,
            "original_size": len(data),
        }
        blobs.append({"offset": 64 + len(blob), "size": len(data)})
        blob += data
        frames.append(compress(data, "zstd"))
    if scheme == "zstd-per-kernel":
        blob = bytearray(struct.pack("<I", len(frames)))
        for frame in frames:
            blob += struct.pack("<I", len(frame)) + frame
    arches = sorted({t for _, t, _ in kernels})
    meta: dict[str, object] = {
        "format_version": 1,
        "group_name": "test",
        "gfx_arch_family": arches[0] if arches else "",
        "gfx_arches": arches,
        "toc": toc,
    }
    if scheme is not None:
        meta["compression_scheme"] = scheme
    if scheme == "zstd-per-kernel":
        meta.update(zstd_offset=64, zstd_size=len(blob))
    else:
        meta["blobs"] = blobs
    meta.update(extra or {})
    head = b"KPAK" + struct.pack("<IQ", 1, 64 + len(blob))
    packed: bytes = msgpack.packb(meta, use_bin_type=True)
    return head.ljust(64, b"\0") + bytes(blob) + packed


def read_kpack_by_spec(raw: bytes) -> tuple[dict[str, Any], dict[tuple[str, str], bytes]]:
    """Independent reader: the TOC and every kernel's bytes, straight from the spec."""
    magic, version, toc_offset = struct.unpack_from("<4sIQ", raw)
    assert (magic, version) == (b"KPAK", 1)
    assert raw[16:64] == bytes(48)
    toc = msgpack.unpackb(raw[toc_offset:], raw=False)
    scheme = toc.get("compression_scheme", "none")
    stored: list[bytes] = []
    if scheme == "none":
        stored = [raw[b["offset"] : b["offset"] + b["size"]] for b in toc["blobs"]]
    else:
        pos = toc["zstd_offset"]
        (count,) = struct.unpack_from("<I", raw, pos)
        pos += 4
        for _ in range(count):
            (size,) = struct.unpack_from("<I", raw, pos)
            frame = raw[pos + 4 : pos + 4 + size]
            params = zstandard.get_frame_parameters(frame)
            assert not params.has_checksum and params.dict_id == 0
            stored.append(zstandard.ZstdDecompressor().decompress(frame))
            assert params.content_size == len(stored[-1])
            pos += 4 + size
        assert pos == toc["zstd_offset"] + toc["zstd_size"] == toc_offset
    kernels = {
        (key, target): stored[entry["ordinal"]]
        for key, targets in toc["toc"].items()
        for target, entry in targets.items()
    }
    return toc, kernels


# --- real binaries ------------------------------------------------------------------------


def run(
    cmd: Sequence[str | os.PathLike[str]], **kwargs: object
) -> subprocess.CompletedProcess[str]:
    proc: subprocess.CompletedProcess[str] = subprocess.run(  # type: ignore[call-overload]
        [os.fspath(c) for c in cmd], capture_output=True, text=True, check=False, **kwargs
    )
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} -> {proc.returncode}\n{proc.stderr}")
    return proc


def fatbin_extent(path: Path) -> tuple[int, int, int]:
    """``(sh_offset, sh_size, sh_addr)`` of ``.hip_fatbin``, read with pyelftools."""
    with path.open("rb") as f:
        sec = ELFFile(f).get_section_by_name(".hip_fatbin")
        assert sec is not None, f"{path} has no .hip_fatbin"
        return sec["sh_offset"], sec["sh_size"], sec["sh_addr"]


def wrapper_targets(path: Path) -> list[int]:
    """Bundle offsets the ``.hipFatBinSegment`` wrappers point at (RELA addend - section addr)."""
    with path.open("rb") as f:
        elf = ELFFile(f)
        fatbin = elf.get_section_by_name(".hip_fatbin")
        seg = elf.get_section_by_name(".hipFatBinSegment")
        rela = elf.get_section_by_name(".rela.dyn")
        assert fatbin is not None and seg is not None and isinstance(rela, RelocationSection)
        slots = {seg["sh_addr"] + 24 * i + 8: i for i in range(seg["sh_size"] // 24)}
        found = {
            slots[r["r_offset"]]: r["r_addend"] - fatbin["sh_addr"]
            for r in rela.iter_relocations()
            if r["r_offset"] in slots
        }
    return [found[i] for i in sorted(found)]


def dump_fatbin(path: Path, out: Path) -> Path:
    run(["objcopy", "-O", "binary", "--only-section=.hip_fatbin", path, out])
    return out


def bundler_list(bundle_file: Path) -> list[str]:
    return run([BUNDLER, "--list", "--type=o", f"--input={bundle_file}"]).stdout.split()


def bundler_unbundle(bundle_file: Path, triple: str, out: Path) -> bytes:
    """The code object for ``triple``, extracted by clang-offload-bundler (first bundle only)."""
    run([
        BUNDLER, "--unbundle", "--type=o", f"--targets={triple}",
        f"--input={bundle_file}", f"--output={out}",
    ])  # fmt: skip
    return out.read_bytes()


def have_bundler() -> bool:
    return shutil.which(BUNDLER) is not None and shutil.which("objcopy") is not None


def compile_hip(
    hipcc: Path, workdir: Path, sources: dict[str, str], archs: Sequence[str], name: str
) -> Path:
    """Compile ``sources`` (file name -> text) into the shared library ``workdir/name``."""
    workdir.mkdir(parents=True, exist_ok=True)
    for file, text in sources.items():
        (workdir / file).write_text(text)
    out = workdir / name
    flags = [f"--offload-arch={a}" for a in archs]
    env = {**os.environ, "HIP_PLATFORM": "amd"}
    run([hipcc, *flags, "-fPIC", "-shared", *sources, "-o", out], cwd=workdir, env=env)
    return out


def elf_header(code_object: bytes) -> tuple[int, int, int, int]:
    """``(EI_OSABI, EI_ABIVERSION, e_machine, e_flags)`` of an ELF64 code object."""
    assert code_object[:4] == b"\x7fELF"
    (machine,) = struct.unpack_from("<H", code_object, 18)
    (flags,) = struct.unpack_from("<I", code_object, 48)
    return code_object[7], code_object[8], machine, flags
