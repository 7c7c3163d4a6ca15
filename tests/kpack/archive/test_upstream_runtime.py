"""rocm-kpack's own C++ runtime and Python reader load archives whose entries share ordinals.

Opt-in (marker ``upstream``; ``.ci/run`` runs it only when ``ROCM_KPACK_SOURCE`` is set):
``ROCM_KPACK_SOURCE`` names a checkout of ROCm/rocm-kpack (``runtime/``) or of
ROCm/rocm-systems (``shared/kpack/runtime/``). Its runtime sources are compiled here with
g++ against Debian's ``libmsgpack-cxx-dev`` and ``libzstd-dev`` (as its CMakeLists does, less
the find_package names Debian's msgpack-cxx 4 spells otherwise) into the test cache,
keyed by the sources' digest, and driven through its C API with ctypes; its Python reader
runs from the checkout's ``python/`` in a child process. No upstream code is kept in this
repository.

What the runtime does with ordinals (rocm-kpack ``runtime/src``, checked at e3483286,
Feb 2026): ``toc_parser.cpp`` keeps each entry's ``ordinal``; ``compression.cpp``'s
``build_zstd_frame_index`` walks ``num_kernels`` size-prefixed frames into a list and
``decompress_zstd`` / ``decompress_noop`` check only ``ordinal < frames`` (``< blobs``),
decompressing into one buffer that every ``kpack_get_kernel`` overwrites and copies out
(``kpack.cpp``); ``loader.cpp`` caches open archives by path, never code objects by
ordinal; ``num_kernels`` is never compared with the number of TOC entries. So entries
sharing an ordinal read the same frame, each call its own copy.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from kpack.archive import KernelInput, write_kpack
from kpack.bundle import make_plain_bundle
from kpack.cli import main
from kpack.wheelfile import Member, write_wheel
from sample_tree.debian_inputs import default_cache_dir
from tests.conftest import require
from tests.kpack.archive.test_shared_ordinals import _num_kernels, _toc
from tests.kpack.bundle_fixtures import fake_code_object
from tests.kpack.transform.test_synthetic import GFX, pad
from tests.kpack.transform_fixtures import synthetic
from tests.kpack.wheel_fixtures import TAG, VERSION, metadata

pytestmark = pytest.mark.upstream

KPACK_SUCCESS = 0
KPACK_ERROR_KERNEL_NOT_FOUND = 5
HEADERS = ("/usr/include/msgpack.hpp", "/usr/include/zstd.h")


def _source() -> Path:
    source = os.environ.get("ROCM_KPACK_SOURCE")
    if not source:
        pytest.skip("set ROCM_KPACK_SOURCE to a rocm-kpack or rocm-systems checkout")
    return Path(source)


def _in_source(source: Path, tail: str) -> Path:
    """``runtime`` or ``python`` of a rocm-kpack, a rocm-systems or a shared/kpack tree."""
    for candidate in (source / tail, source / "shared/kpack" / tail):
        if candidate.is_dir():
            return candidate
    pytest.fail(f"ROCM_KPACK_SOURCE={source}: no {tail}/ or shared/kpack/{tail}/ in it")


@pytest.fixture(scope="module")
def runtime() -> Iterator[ctypes.CDLL]:
    """rocm-kpack's runtime, built from ``$ROCM_KPACK_SOURCE`` once per source digest."""
    source = _source()
    require(shutil.which("g++") is not None, "needs g++")
    for header in HEADERS:
        require(
            Path(header).is_file(),
            f"needs {header} (apt-get install libmsgpack-cxx-dev libzstd-dev)",
        )
    root = _in_source(source, "runtime")
    sources = sorted((root / "src").glob("*.cpp"))
    digest = hashlib.sha256()
    for path in sorted([*sources, *(root / "src").glob("*.h"), *(root / "include").rglob("*.h")]):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    lib = default_cache_dir() / "kpack-runtime" / digest.hexdigest()[:16] / "librocm_kpack.so"
    if not lib.is_file():
        lib.parent.mkdir(parents=True, exist_ok=True)
        partial = lib.with_name(f".{lib.name}.{os.getpid()}")
        cmd = ["g++", "-std=c++17", "-O1", "-fPIC", "-shared", "-fvisibility=hidden"]
        cmd += ["-DROCM_KPACK_EXPORTS", f"-I{root / 'include'}", *map(str, sources)]
        cmd += ["-lzstd", "-o", str(partial)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr
        partial.replace(lib)
    dll = ctypes.CDLL(str(lib))
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    dll.kpack_open.argtypes = [ctypes.c_char_p, ctypes.POINTER(vp)]
    dll.kpack_close.argtypes = [vp]
    dll.kpack_get_binary_count.argtypes = [vp, ctypes.POINTER(sz)]
    dll.kpack_get_kernel.argtypes = [
        vp, ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(vp), ctypes.POINTER(sz)
    ]  # fmt: skip
    dll.kpack_free_kernel.argtypes = [vp]
    dll.kpack_cache_create.argtypes = [ctypes.POINTER(vp)]
    dll.kpack_cache_destroy.argtypes = [vp]
    dll.kpack_load_code_object.argtypes = [
        vp, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint32,
        ctypes.POINTER(ctypes.c_char_p), sz, ctypes.POINTER(vp), ctypes.POINTER(sz),
    ]  # fmt: skip
    dll.kpack_free_code_object.argtypes = [vp]
    yield dll


def _take(dll: ctypes.CDLL, data: ctypes.c_void_p, size: ctypes.c_size_t, free: str) -> bytes:
    assert data.value is not None
    out = ctypes.string_at(data.value, size.value)
    getattr(dll, free)(data)
    return out


def get_kernel(dll: ctypes.CDLL, archive: Path, binary: str, arch: str) -> bytes | int:
    """The kernel's bytes as ``kpack_get_kernel`` returns them, or its error code."""
    handle = ctypes.c_void_p()
    assert dll.kpack_open(str(archive).encode(), ctypes.byref(handle)) == KPACK_SUCCESS
    try:
        data, size = ctypes.c_void_p(), ctypes.c_size_t()
        rc = dll.kpack_get_kernel(
            handle, binary.encode(), arch.encode(), ctypes.byref(data), ctypes.byref(size)
        )
        return rc if rc != KPACK_SUCCESS else _take(dll, data, size, "kpack_free_kernel")
    finally:
        dll.kpack_close(handle)


@pytest.mark.parametrize("scheme", ["zstd-per-kernel", "none"])
def test_get_kernel_reads_every_entry_of_shared_ordinals(
    runtime: ctypes.CDLL, tmp_path: Path, scheme: str
) -> None:
    """Seven entries of one binary and one of another share a frame; one entry has its own."""
    same = fake_code_object("gfx942", 4000)
    other = fake_code_object("gfx942", 3000, e_flags=0x31)
    kernels = [
        KernelInput(f"lib/librccl.so#{i}", "gfx942", same if i != 3 else other) for i in range(7)
    ]
    kernels.append(KernelInput("lib/libother.so#0", "gfx942", same))
    path = tmp_path / "a.kpack"
    write_kpack(path, kernels, group_name="g", gfx_arch_family="gfx942", scheme=scheme)  # type: ignore[arg-type]
    stored = len(_toc(path)["blobs"]) if scheme == "none" else _num_kernels(path)  # type: ignore[arg-type]
    assert stored == 2
    # the same entries read twice over, in an order that alternates between the two frames
    for k in [*kernels, *reversed(kernels)]:
        assert get_kernel(runtime, path, k.binary_key, k.target) == bytes(k.data)  # type: ignore[arg-type]
    missing = get_kernel(runtime, path, "lib/librccl.so#7", "gfx942")
    assert missing == KPACK_ERROR_KERNEL_NOT_FOUND


_UPSTREAM_READ = """
import json, sys
from pathlib import Path
import rocm_kpack
from rocm_kpack.kpack import PackedKernelArchive
assert Path(rocm_kpack.__file__).is_relative_to(sys.argv[1]), rocm_kpack.__file__
archive = PackedKernelArchive.read(Path(sys.argv[2]))
keys = [(b, t) for b, targets in sorted(archive.toc.items()) for t in sorted(targets)]
print(json.dumps({f"{b}|{t}": archive.get_kernel(b, t).hex() for b, t in keys}))
"""


@pytest.mark.parametrize("scheme", ["zstd-per-kernel", "none"])
def test_upstream_python_reader_reads_every_entry(tmp_path: Path, scheme: str) -> None:
    """rocm-kpack's own Python reader (``rocm_kpack/kpack.py``, not this repository's face
    of it), run from the checkout in a child process: ``get_kernel`` decompresses
    ``frame_index[ordinal]`` for each entry, so shared ordinals read as their bytes."""
    python = _in_source(_source(), "python")
    same = fake_code_object("gfx942", 4000)
    other = fake_code_object("gfx942", 3000, e_flags=0x31)
    kernels = [KernelInput(f"lib/a.so#{i}", "gfx942", same if i else other) for i in range(4)]
    kernels.append(KernelInput("lib/b.so#0", "gfx942", same))
    path = tmp_path / "a.kpack"
    write_kpack(path, kernels, group_name="g", gfx_arch_family="gfx942", scheme=scheme)  # type: ignore[arg-type]
    env = {**os.environ, "PYTHONPATH": str(python)}
    proc = subprocess.run(
        [sys.executable, "-c", _UPSTREAM_READ, str(python), str(path)],
        capture_output=True, text=True, env=env, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = {key: bytes.fromhex(value) for key, value in json.loads(proc.stdout).items()}
    assert got == {f"{k.binary_key}|{k.target}": bytes(k.data) for k in kernels}  # type: ignore[arg-type]


def _marker(binary: Path) -> bytes:
    with binary.open("rb") as f:
        section = ELFFile(f).get_section_by_name(".rocm_kpack_ref")
        assert section is not None, f"{binary} has no .rocm_kpack_ref"
        return bytes(section.data())


def test_loader_resolves_wrappers_pointing_at_one_bundle(
    runtime: ctypes.CDLL, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The loader path HIP takes: a wheel split by ``kpack split-wheel`` (three wrappers, two
    at one bundle: two frames per archive), host and device wheels unpacked into one
    site-packages; ``kpack_load_code_object`` for each ``co_index`` through one cache (the
    shared frame read again after the other) returns each wrapper's code object."""
    require(shutil.which("gcc") is not None, "needs gcc")
    targets = ("gfx900", "gfx1030")
    objects = [{t: fake_code_object(t, 9000, e_flags=0x30 + i) for t in targets} for i in range(2)]
    bundles = [make_plain_bundle([(GFX + t, o[t]) for t in targets], align=8) for o in objects]
    first = pad(bundles[0])
    lib = synthetic(tmp_path / "build", "lib", first + pad(bundles[1]), [0, len(first), 0])
    members = [Member("demo/__init__.py", b""), Member("demo/lib/libdemo.so", lib, executable=True)]
    wheel = write_wheel(
        tmp_path / "in", dist_name="demo", version=VERSION, tag=TAG, members=members,
        metadata=metadata("demo"),
    ).path  # fmt: skip
    out = tmp_path / "out"
    argv = ["split-wheel", "--input", str(wheel), "--output-dir", str(out)]
    argv += ["--overlay-root", "demo/", "--device-package-prefix", "amd-demo"]
    assert main(argv) == 0, capsys.readouterr().err
    site = tmp_path / "site"
    for built in sorted(out.glob("*.whl")):
        with zipfile.ZipFile(built) as z:
            z.extractall(site)
    archives = sorted(p for p in site.rglob("*.kpack") if p.is_file())
    assert len(archives) == 2 and all(_num_kernels(a) == 2 for a in archives)
    binary = site / "demo/lib/libdemo.so"
    marker = ctypes.create_string_buffer(_marker(binary), 64 * 1024)  # the loader reads <= 64 KiB
    cache = ctypes.c_void_p()
    assert runtime.kpack_cache_create(ctypes.byref(cache)) == KPACK_SUCCESS
    try:
        for target in targets:
            arch = (ctypes.c_char_p * 1)(target.encode())
            for index in (0, 1, 2, 0, 2):
                data, size = ctypes.c_void_p(), ctypes.c_size_t()
                rc = runtime.kpack_load_code_object(
                    cache, marker.raw, str(binary).encode(), index, arch, 1,
                    ctypes.byref(data), ctypes.byref(size),
                )  # fmt: skip
                assert rc == KPACK_SUCCESS, (target, index, rc)
                got = _take(runtime, data, size, "kpack_free_code_object")
                assert got == objects[1 if index == 1 else 0][target], (target, index)
    finally:
        runtime.kpack_cache_destroy(cache)
