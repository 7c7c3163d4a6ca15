"""A Windows artifact tree as TheRock lays one out (for tests): DLLs and EXEs in ``bin/``,
import libraries (``.lib``) in ``lib/``, no symlinks, no RPATH. Host binaries are PE images
linked here by lld-link; fat ones carry real ROCm 7 offload bundles in ``.hip_fat``."""

from __future__ import annotations

from pathlib import Path

from tests.kpack.pe_fixtures import build_pe

from .treeutil import add_artifact, write_manifest


def write_windows_tree(
    root: Path, bundles: list[bytes], *, kpack: bool, family: str, rocminfo: bool = True
) -> dict[str, Path]:
    """Write the tree; return the fat DLLs it holds by tree-relative path."""
    work = root.parent / f"{root.name}.pe"
    work.mkdir(parents=True, exist_ok=True)
    write_manifest(root, kpack=kpack)
    hip = build_pe(work / "amdhip64_7.dll", []).read_bytes()
    hipinfo = build_pe(work / "hipInfo.exe", [], exe=True).read_bytes()
    rocblas = build_pe(work / "rocblas.dll", bundles)
    rocrand = build_pe(work / "rocrand.dll", bundles[1:])
    add_artifact(root, "core-hip_lib_generic", "core/clr/stage", {"bin/amdhip64_7.dll": hip})
    header = b"#pragma once\n"
    dev = {"lib/amdhip64.lib": b"!<arch>\n", "include/hip/hip_runtime.h": header}
    add_artifact(root, "core-hip_dev_generic", "core/clr/stage", dev)
    run = {"bin/hipInfo.exe": hipinfo}
    if rocminfo:
        run["bin/rocminfo.exe"] = build_pe(work / "rocminfo.exe", [], exe=True).read_bytes()
    add_artifact(root, "core-hipinfo_run_generic", "core/hipinfo/stage", run)
    blas = "math-libs/BLAS/rocBLAS/stage"
    add_artifact(root, f"blas_lib_{family}", blas, {
        "bin/rocblas.dll": rocblas.read_bytes(),
        "bin/rocblas/library/TensileLibrary_lazy_gfx90a.dat": b"gfx90a kernel database",
        "bin/rocblas/library/TensileLibrary.dat": b"arch-neutral index",
    })  # fmt: skip
    dev = {"lib/rocblas.lib": b"!<arch>\n", "include/rocblas/rocblas.h": header}
    add_artifact(root, "blas_dev_generic", blas, dev)
    rand = "math-libs/rocRAND/stage"
    add_artifact(root, f"rand_lib_{family}", rand, {"bin/rocrand.dll": rocrand.read_bytes()})
    return {f"{blas}/bin/rocblas.dll": rocblas, f"{rand}/bin/rocrand.dll": rocrand}
