"""Real ROCm 7 wheels from PyPI, downloaded once into the cache and pinned by sha256.

They carry modern HIP fat binaries: compressed CCOB v3 bundles with LLVM generic targets
(``gfx9-4-generic``, ``gfx10-3-generic``, ``gfx11-generic``, ``gfx12-generic``) next to
plain ISAs, in ELF shared objects (manylinux) and PE DLLs (``win_amd64``). ``pip download``
fetches them (any index pip is configured for); a wheel whose bytes differ from the pin is
refused.
"""

from __future__ import annotations

import collections
import hashlib
import struct
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pefile
import zstandard
from elftools.elf.elffile import ELFFile

from kpack.errors import ToolError
from sample_tree.debian_inputs import default_cache_dir

__all__ = [
    "BITSANDBYTES_WIN",
    "CYLLAMA",
    "GAFIME",
    "JAX10_PJRT",
    "JAX60_PJRT",
    "JAX_PJRT",
    "JAX_PLUGIN",
    "SPLINE_CONV",
    "Digests",
    "PypiWheel",
    "fat_members",
    "fat_pe_members",
    "fat_sections",
    "fetch_wheel",
    "independent_code_objects",
    "independent_pe_code_objects",
    "independent_section_objects",
    "pe_section",
    "pypi_wheel",
    "rocm7_bundles",
]


@dataclass(frozen=True)
class PypiWheel:
    project: str
    version: str
    filename: str
    sha256: str
    overlay_root: str  # the package dir that holds the fat binaries ('' if none does alone)
    python: str = "3.11"
    platform: str = "manylinux_2_28_x86_64"


#: 8 MB: ``_linalg.so``, ``_prng.so``, ``_solver.so`` ... each one CCOB v3 zstd bundle for
#: gfx908, gfx90a and the four generic targets.
JAX_PLUGIN = PypiWheel(
    "jax-rocm7-plugin",
    "0.10.0",
    "jax_rocm7_plugin-0.10.0-cp311-cp311-manylinux_2_28_x86_64.whl",
    "41fc46f1ce64207f8f144cb0d89f304dadd4a4f4de5c541ad44de380afad43bd",
    "jax_rocm7_plugin/",
)

#: 137 MB: ``xla_rocm_plugin.so`` (520 MB), 41 CCOB v3 bundles, 1.21 GB of device code.
JAX_PJRT = PypiWheel(
    "jax-rocm7-pjrt",
    "0.10.0",
    "jax_rocm7_pjrt-0.10.0-py3-none-manylinux_2_28_x86_64.whl",
    "fe0a40550c60e1b9f82eebfa6243ed6a7e3de7a07369142232bf8e331de03181",
    "jax_plugins/",
)

#: 39 MB, ``win_amd64``: besides CUDA, CPU and XPU DLLs, ``libbitsandbytes_rocm714.dll``,
#: ``…_rocm715.dll`` and ``…_rocm72.dll``, linked by the Windows HIP SDK: a ``.hip_fat``
#: section with two CCOB v3 zstd bundles (22 ISAs, gfx908 to gfx1201; 7 for ROCm 7.2) and
#: the wrappers in ``.hipFatB``.
BITSANDBYTES_WIN = PypiWheel(
    "bitsandbytes",
    "0.50.2",
    "bitsandbytes-0.50.2-py3-none-win_amd64.whl",
    "c697963c8fda3dcd0d7ebd9b5211ae4067feef7cd06e0350d4e816a434fe683d",
    "bitsandbytes/",
    python="3.12",
    platform="win_amd64",
)


#: 134 MB, ROCm 10.1, ``Root-Is-Purelib: true``: ``jax_plugins/xla_rocm10/xla_rocm_plugin.so``
#: (459 MB), 1215 code objects for 27 targets from gfx900 to gfx1250 (no generic targets).
#: Its only tags are ``py3-none-manylinux_2_27_x86_64``.
JAX10_PJRT = PypiWheel(
    "jax-rocm10-pjrt",
    "0.12.0",
    "jax_rocm10_pjrt-0.12.0-py3-none-manylinux_2_27_x86_64.whl",
    "45ee7b471b71a582ce165dd63069b10d1d8923d849b61b6fa8783f1d13294edb",
    "jax_plugins/",
    platform="manylinux_2_27_x86_64",
)

#: 123 MB, ROCm 6.0: ``jax_plugins/xla_rocm60/xla_rocm_plugin.so`` (560 MB) with 261 code
#: objects in *plain* (uncompressed) bundles, 292 MB for 9 targets from gfx906 to gfx1201:
#: the large plain-bundle wheel of the split benchmark (not used by the test suite).
JAX60_PJRT = PypiWheel(
    "jax-rocm60-pjrt",
    "0.5.0",
    "jax_rocm60_pjrt-0.5.0-py3-none-manylinux_2_28_x86_64.whl",
    "e8097aa9dde2b759604e7b3f163e50dc83380968002e32fc770a8f91126d1b55",
    "jax_plugins/",
)

#: 60 MB, auditwheel layout (cp312-abi3 only): the HIP library
#: ``cyllama_rocm.libs/libggml-hip-1f7b8bcc.so`` (187 MB; 420 code objects for gfx90a,
#: gfx942 and gfx1100) sits beside the package, outside ``cyllama/``, whose extension
#: modules load it through RPATH ``$ORIGIN/../../cyllama_rocm.libs``.
CYLLAMA = PypiWheel(
    "cyllama-rocm",
    "0.7.0",
    "cyllama_rocm-0.7.0-cp312-abi3-manylinux_2_31_x86_64.manylinux_2_35_x86_64.whl",
    "e6ebb996d986f1add67a29300ded7781d50456c3f5311ae648f1d72a3b144b9c",
    "",
    python="3.12",
    platform="manylinux_2_35_x86_64",
)

#: 0.5 MB: ``gafime_rocm/libgafime_rocm.so`` (HIP fat library, 13 ISAs from gfx90a to gfx1201)
#: needs ``libamdhip64.so.7`` through the build machine's RUNPATH ``/opt/rocm/lib``; the
#: extension module beside it needs no ROCm library.
GAFIME = PypiWheel(
    "gafime-rocm",
    "0.4.7",
    "gafime_rocm-0.4.7-cp311-cp311-manylinux_2_28_x86_64.whl",
    "9286d4fdc7b0e4b6e8edd08324f36c6619f63d9f43c393a6d9edcd4028a4ef70",
    "gafime_rocm/",
    platform="manylinux_2_28_x86_64",
)

#: 1.4 MB: PyG's torch-spline-conv for ROCm, rebased onto the rocm-sdk set by hand: every
#: module's RUNPATH is ``$ORIGIN/../torch/lib:$ORIGIN/../_rocm_sdk_core/lib:…`` (right for
#: one directory and no nonce); ``_basis_cuda.so`` and ``_weighting_cuda.so`` need
#: ``libamdhip64.so.7`` and carry 29 ISAs.
SPLINE_CONV = PypiWheel(
    "torch-spline-conv-rocm",
    "1.2.2.post7",
    "torch_spline_conv_rocm-1.2.2.post7-cp311-cp311-manylinux_2_32_x86_64.whl",
    "81a84ea2514d88289c450b0d613789d666d46c4371cfbad384b68c81eaff663e",
    "torch_spline_conv/",
    platform="manylinux_2_32_x86_64",
)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_wheel(wheel: PypiWheel, cache_dir: Path | None = None) -> Path:
    """The cached wheel (downloaded on first use); :class:`ToolError` if it cannot be had."""
    where = (cache_dir or default_cache_dir()) / "pypi"
    path = where / wheel.filename
    if not path.is_file():
        where.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--python-version", wheel.python, "--platform", wheel.platform,
               "-d", str(where), f"{wheel.project}=={wheel.version}"]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not path.is_file():
            raise ToolError(
                f"cannot download {wheel.filename} from PyPI (exit {proc.returncode})\n"
                f"{proc.stdout}{proc.stderr}".rstrip()
            )
    actual = _sha256(path)
    if actual != wheel.sha256:
        raise ToolError(f"{path}: sha256 {actual} is not the pinned {wheel.sha256}")
    return path


# --- an independent reader of the fat binaries, written from the spec -----------------------

PLAIN = b"__CLANG_OFFLOAD_BUNDLE__"
Digests = collections.Counter[tuple[str, str]]  # (target, sha256) -> count


def pypi_wheel(wheel: PypiWheel) -> Path:
    """The cached wheel; a test without it is skipped locally and fails in CI."""
    from tests.conftest import require

    try:
        return fetch_wheel(wheel)
    except ToolError as exc:
        require(False, f"cannot fetch {wheel.filename}: {exc.message}")
        raise AssertionError from exc  # not reached


def _plain_objects(data: bytes, out: Digests) -> int:
    """Code objects of the plain bundle at the start of ``data``; returns its end."""
    assert data[:24] == PLAIN
    (count,) = struct.unpack_from("<Q", data, 24)
    pos, end = 32, 32
    for _ in range(count):
        offset, size, length = struct.unpack_from("<QQQ", data, pos)
        triple = data[pos + 24 : pos + 24 + length].decode()
        pos += 24 + length
        end = max(end, offset + size)
        if not triple.startswith("host"):
            target = triple.rpartition("--")[2]
            out[(target, hashlib.sha256(data[offset : offset + size]).hexdigest())] += 1
    return max(end, pos)


def independent_code_objects(so: Path) -> Digests:
    """Every device code object of ``so``'s ``.hip_fatbin``, decoded from the spec."""
    with so.open("rb") as f:
        section = ELFFile(f).get_section_by_name(".hip_fatbin").data()
    return independent_section_objects(section)


def independent_section_objects(section: bytes) -> Digests:
    """Every device code object of a device-code section's bytes (plain and CCOB v3
    bundles, zero padding between them)."""
    out: Digests = collections.Counter()
    pos = 0
    while pos < len(section):
        if section[pos] == 0:
            pos += 1
            continue
        if section[pos : pos + 4] == b"CCOB":
            version, method = struct.unpack_from("<HH", section, pos + 4)
            assert (version, method) == (3, 1)  # v3, zstd: what ROCm 7 writes
            total, size, _hash = struct.unpack_from("<QQQ", section, pos + 8)
            plain = zstandard.ZstdDecompressor().decompress(
                section[pos + 32 : pos + total], max_output_size=size
            )
            assert len(plain) == size
            _plain_objects(plain, out)
            pos += total
        else:
            pos += _plain_objects(section[pos:], out)
    return out


def fat_members(wheel: Path, dest: Path) -> list[Path]:
    """Extract ``wheel`` into ``dest``; its ELF files that carry a ``.hip_fatbin``."""
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(dest)
    found = []
    for path in sorted(dest.rglob("*.so*")):
        with path.open("rb") as f:
            if ELFFile(f).get_section_by_name(".hip_fatbin") is not None:
                found.append(path)
    return found


def fat_sections(tree: Path) -> list[Path]:
    """The ELF files under ``tree`` that still carry device code: a ``.hip_fatbin`` with
    bytes in the file (a split leaves it ``SHT_NOBITS``) holding at least one code object."""
    found = []
    for path in sorted(p for p in tree.rglob("*") if p.is_file()):
        with path.open("rb") as f:
            if f.read(4) != b"\x7fELF":
                continue
            f.seek(0)
            section = ELFFile(f).get_section_by_name(".hip_fatbin")
            if section is None or section["sh_type"] == "SHT_NOBITS":
                continue
            if independent_section_objects(section.data()):
                found.append(path)
    return found


def pe_section(data: bytes, name: bytes) -> bytes:
    """The bytes of PE section ``name`` (up to its VirtualSize), read by ``pefile``."""
    pe = pefile.PE(data=data, fast_load=True)
    found = [s for s in pe.sections if s.Name.rstrip(b"\0") == name]
    assert len(found) == 1, (name, [s.Name for s in pe.sections])
    return found[0].get_data()[: found[0].Misc_VirtualSize]


def independent_pe_code_objects(dll: Path) -> Digests:
    """Every device code object of ``dll``'s ``.hip_fat``, decoded from the spec."""
    return independent_section_objects(pe_section(dll.read_bytes(), b".hip_fat"))


def fat_pe_members(wheel: Path, dest: Path) -> list[Path]:
    """Extract ``wheel`` into ``dest``; its PE files that carry a ``.hip_fat`` section."""
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(dest)
    found = []
    for path in sorted(dest.rglob("*")):
        if path.suffix.lower() in (".dll", ".pyd", ".exe") and path.is_file():
            pe = pefile.PE(str(path), fast_load=True)
            if any(s.Name.rstrip(b"\0") == b".hip_fat" for s in pe.sections):
                found.append(path)
            pe.close()
    return found


def rocm7_bundles(dest: Path, count: int | None = 3, wheel: PypiWheel = JAX_PLUGIN) -> list[bytes]:
    """``count`` (all: None) real ROCm 7 offload bundles (CCOB v3, generic targets), cut
    from the ``.hip_fatbin`` sections of ``wheel``'s libraries at the total size each CCOB
    header declares; ``dest`` receives the extracted wheel."""
    out: list[bytes] = []
    for so in fat_members(pypi_wheel(wheel), dest):
        with so.open("rb") as f:
            section = ELFFile(f).get_section_by_name(".hip_fatbin").data()
        pos = 0
        while pos < len(section):
            if section[pos] == 0:
                pos += 1
                continue
            if section[pos : pos + 4] != b"CCOB":
                raise AssertionError(f"{so}: expected a CCOB bundle at {pos:#x}")
            (total,) = struct.unpack_from("<Q", section, pos + 8)
            out.append(section[pos : pos + total])
            pos += total
    if count is None:
        return out
    if len(out) < count:
        raise AssertionError(f"only {len(out)} bundles in {wheel.filename}")
    return out[:count]
