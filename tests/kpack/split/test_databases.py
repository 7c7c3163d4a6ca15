"""Database handlers on trees laid out as upstream lays them out (kpack.md §4).

Each artifact below mirrors what TheRock's stage dirs hold for it: Composable Kernel's
per-arch static libraries next to MIOpen, hipKernelProvider's ``engines/arch_content`` and
``engines/test_arch_content`` trees in hipDNN's plugin dir, and RocJitsu's translations
cache in the RCCL artifact. A retired ``.kpm`` manifest in ``.kpack/`` is plain data.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from kpack.databases import load_handlers
from kpack.split import split_artifact

MIOPEN = "ml-libs/MIOpen/stage"
CK = "ml-libs/composable_kernel/stage"
HIPDNN = "ml-libs/hipDNN/stage"
RCCL = "comm-libs/rccl/stage"
ENGINES = "lib/hipdnn_plugins/engines"


def put(artifact: Path, stage: str, relpath: str, data: bytes | None = None) -> None:
    dest = artifact / stage / relpath
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data if data is not None else f"{stage}/{relpath}\n".encode())


def manifest(artifact: Path, *stages: str) -> None:
    (artifact / "artifact_manifest.txt").write_text("\n".join(stages) + "\n")


def files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} - {
        "artifact_manifest.txt"
    }


def sha(data: str) -> str:
    return hashlib.sha256(data.encode()).hexdigest()


def test_composable_kernel_static_libraries(tmp_path: Path) -> None:
    art = tmp_path / "miopen_lib_gfx94X-dcgpu"
    per_arch = {
        "lib/libdevice_conv_operations_gfx942.a": "gfx942",
        "lib/libdevice_conv_operations_gfx90a_xnackp.a": "gfx90a",
        "lib/libdevice_conv_operations_gfx90a_xnack_.a": "gfx90a",
        "lib/libdevice_conv_operations_gfx942_sramecc__xnack_.a": "gfx942",
        "lib/libdevice_conv_operations_gfx1250.a": "gfx1250",
    }
    for rel in per_arch:
        put(art, CK, rel)
    put(art, CK, "lib/libdevice_conv_operations.a")  # the unsuffixed archive stays generic
    put(art, CK, "include/ck/ck.hpp")
    put(art, MIOPEN, "share/miopen/db/gfx1250_256.db.txt")  # MIOpen's list reaches gfx1250
    put(art, MIOPEN, "share/miopen/db/gfx942130.db.txt")
    manifest(art, CK, MIOPEN)
    out = tmp_path / "out"
    result = split_artifact(art, out, handlers=load_handlers(["miopen", "composablekernel"]))
    assert sorted(p.name for p in result.outputs) == [
        "miopen_lib_generic",
        "miopen_lib_gfx1250",
        "miopen_lib_gfx90a",
        "miopen_lib_gfx942",
    ]
    for rel, arch in per_arch.items():
        assert (out / f"miopen_lib_{arch}" / CK / rel).read_bytes() == (art / CK / rel).read_bytes()
    assert files(out / "miopen_lib_gfx1250") == {
        f"{CK}/lib/libdevice_conv_operations_gfx1250.a",
        f"{MIOPEN}/share/miopen/db/gfx1250_256.db.txt",
    }
    assert files(out / "miopen_lib_generic") == {
        f"{CK}/lib/libdevice_conv_operations.a",
        f"{CK}/include/ck/ck.hpp",
    }
    # --gpu-targets selects on the bare arch whatever the sanitized features
    scoped = split_artifact(
        art,
        tmp_path / "scoped",
        handlers=load_handlers(["composablekernel"]),
        gpu_targets=["gfx90a:xnack+"],
    )
    assert sorted(p.name for p in scoped.outputs) == ["miopen_lib_generic", "miopen_lib_gfx90a"]


def test_hipkernelprovider_arch_content_at_any_depth(tmp_path: Path) -> None:
    art = tmp_path / "hipkernelprovider_lib_gfx94X-dcgpu"
    per_arch = {
        f"{ENGINES}/arch_content/hip-kernel-provider/gfx942/gemm.co": "gfx942",
        f"{ENGINES}/arch_content/rocke/gfx950/conv/fwd.co": "gfx950",
        f"{ENGINES}/arch_content/gfx90a/k.co": "gfx90a",
        f"{ENGINES}/test_arch_content/hip-kernel-provider/unit/shared/gfx942/t.co": "gfx942",
    }
    for rel in per_arch:
        put(art, HIPDNN, rel)
    put(art, HIPDNN, f"{ENGINES}/arch_content/hip-kernel-provider/manifest.json")
    put(art, HIPDNN, f"{ENGINES}/libhipkernelprovider_plugin.so")
    manifest(art, HIPDNN)
    out = tmp_path / "out"
    result = split_artifact(art, out, handlers=load_handlers(["hipkernelprovider"]))
    assert sorted(p.name for p in result.outputs) == [
        "hipkernelprovider_lib_generic",
        "hipkernelprovider_lib_gfx90a",
        "hipkernelprovider_lib_gfx942",
        "hipkernelprovider_lib_gfx950",
    ]
    for rel, arch in per_arch.items():
        assert (out / f"hipkernelprovider_lib_{arch}" / HIPDNN / rel).is_file(), rel
    assert files(out / "hipkernelprovider_lib_generic") == {
        f"{HIPDNN}/{ENGINES}/arch_content/hip-kernel-provider/manifest.json",
        f"{HIPDNN}/{ENGINES}/libhipkernelprovider_plugin.so",
    }


def test_rocjitsu_translations_move_to_their_domain_arch(tmp_path: Path) -> None:
    art = tmp_path / "rccl_lib_gfx125X-all"
    root = "share/rocjitsu/translations"
    moved = [
        f"{root}/gfx1250-b0-a0/v1/{sha('a')}.man",
        f"{root}/gfx1250-b0-a0/v1/{sha('a')}.obj",
        f"{root}/gfx1250-b0-a0/v1/{sha('b')}.obj",
    ]
    kept = [
        f"{root}/gfx9999-z0/v1/{sha('c')}.obj",  # a domain RocJitsu has not told us about
        f"{root}/gfx1250-b0-a0/v1/README",
        "lib/librccl.so.1",
    ]
    for rel in moved + kept:
        put(art, RCCL, rel)
    manifest(art, RCCL)
    out = tmp_path / "out"
    result = split_artifact(art, out, handlers=load_handlers(["hotswap_cache"]))
    assert sorted(p.name for p in result.outputs) == ["rccl_lib_generic", "rccl_lib_gfx1250"]
    assert files(out / "rccl_lib_gfx1250") == {f"{RCCL}/{rel}" for rel in moved}
    assert files(out / "rccl_lib_generic") == {f"{RCCL}/{rel}" for rel in kept}


def test_a_retired_kpm_manifest_is_plain_data(tmp_path: Path) -> None:
    """An old rocm-kpack wrote ``.kpack/<P>.kpm`` (MessagePack, not a ``KPAK`` archive);
    today it is neither an error nor an archive: a plain file kept in the generic output."""
    art = tmp_path / "blas_lib_gfx94X-dcgpu"
    stage = "math-libs/BLAS/rocBLAS/stage"
    kpm = b"\x84\xaeformat_version\x01"  # the start of a .kpm map
    put(art, stage, ".kpack/blas_lib.kpm", kpm)
    put(art, stage, ".kpack/blas_lib_gfx942.kpm", kpm)
    put(art, stage, "lib/rocblas/library/TensileLibrary_lazy_gfx942.dat")
    manifest(art, stage)
    out = tmp_path / "out"
    result = split_artifact(art, out, handlers=load_handlers())
    assert sorted(p.name for p in result.outputs) == ["blas_lib_generic", "blas_lib_gfx942"]
    generic = out / "blas_lib_generic" / stage
    assert (generic / ".kpack/blas_lib.kpm").read_bytes() == kpm
    assert (generic / ".kpack/blas_lib_gfx942.kpm").read_bytes() == kpm
    assert files(out / "blas_lib_gfx942") == {
        f"{stage}/lib/rocblas/library/TensileLibrary_lazy_gfx942.dat"
    }
    assert not [p for p in out.rglob("*.kpack") if p.is_file()]
