"""``rocm_kpack.kpack`` / ``rocm_kpack.compression`` as hipKernelProvider imports them.

The call pattern is that of rocm-libraries'
``dnn-providers/hip-kernel-provider/rocKE-client/aot/tools/rocke_kpack_pack.py``
(``pack_arch``: ``PackedKernelArchive(group_name="rocke_client", gfx_arch_family=arch,
gfx_arches=[arch], compressor=ZstdCompressor(compression_level=3))``, then per instance
``prepare_kernel(relative_path="rocke/<op>/<family>/<name>", gfx_arch=arch, hsaco_data=...,
metadata={"cache_key", "symbol"})`` + ``add_kernel``, ``finalize_archive()``, ``write(path)``,
and a read-back through ``PackedKernelArchive.read(path).get_kernel(key, arch)``); its SDPA
packer keys ``.co`` files by their path (``fmha_v3_fwd/MI300/fwd_hd128_bf16_rtne.co``). The
API is rocm-kpack's ``python/rocm_kpack/kpack.py`` and ``compression.py`` (ROCm/rocm-kpack
e3483286e751060b3a70b792792cc122632c66e8).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import msgpack
import pytest
from rocm_kpack.compression import NoOpCompressor, ZstdCompressor
from rocm_kpack.kpack import PackedKernelArchive

from kpack.archive import KernelInput, KpackArchive, write_kpack
from kpack.errors import ArchiveError

REPO = Path(__file__).resolve().parents[2]
ARCH = "gfx942"


def code_objects() -> dict[tuple[str, str, str], bytes]:
    """Real code objects (the sample tree's) under rocKE-style instance names."""
    found = sorted((REPO / "sample_tree").rglob("*.hsaco")) + sorted(
        (REPO / "sample_tree").rglob("*.co")
    )
    blobs = [p.read_bytes() for p in found] or [b"\x7fELF" + bytes(range(256)) * 40]
    names = [("gemm", "universal", "f16_128x128"), ("sdpa", "fmha_fwd_mfma", "hd128_bf16")]
    names += [("norm", "rms", f"n{i}") for i in range(3)]
    return {n: blobs[i % len(blobs)] + bytes([i]) * (i + 1) for i, n in enumerate(names)}


def pack(out: Path, compressor: ZstdCompressor | NoOpCompressor) -> dict[str, bytes]:
    """Drive the API as ``rocke_kpack_pack.pack_arch`` does; returns key -> code object."""
    archive = PackedKernelArchive(
        group_name="rocke_client",
        gfx_arch_family=ARCH,
        gfx_arches=[ARCH],
        compressor=compressor,
    )
    packed = {}
    for (op, family, name), hsaco in code_objects().items():
        key = f"rocke/{op}/{family}/{name}"
        prepared = archive.prepare_kernel(
            relative_path=key,
            gfx_arch=ARCH,
            hsaco_data=hsaco,
            metadata={"cache_key": hashlib.sha256(hsaco).hexdigest(), "symbol": name},
        )
        archive.add_kernel(prepared)
        packed[key] = hsaco
    archive.finalize_archive()
    archive.write(out)
    return packed


@pytest.mark.parametrize("compressor", [ZstdCompressor(compression_level=3), NoOpCompressor()])
def test_rocke_pack_round_trips(
    tmp_path: Path, compressor: ZstdCompressor | NoOpCompressor
) -> None:
    path = tmp_path / "out" / f"rocke_client_{ARCH}.kpack"
    packed = pack(path, compressor)

    written = PackedKernelArchive.read(path)
    for key, hsaco in packed.items():
        assert written.get_kernel(key, ARCH) == hsaco
    assert written.get_kernel("rocke/gemm/universal/missing", ARCH) is None
    assert written.get_kernel(next(iter(packed)), "gfx90a") is None
    assert written.toc["rocke/sdpa/fmha_fwd_mfma/hd128_bf16"][ARCH]["metadata"] == {
        "cache_key": hashlib.sha256(packed["rocke/sdpa/fmha_fwd_mfma/hd128_bf16"]).hexdigest(),
        "symbol": "hd128_bf16",
    }
    written.close()

    with KpackArchive.open(path) as ours:
        ours.verify()
        assert ours.gfx_arches == (ARCH,)
        assert ours.scheme == compressor.SCHEME_NAME
        assert ours.group_name == "rocke_client"
        assert ours.gfx_arch_family == ARCH
        assert ours.keys() == sorted((key, ARCH) for key in packed)
        assert {key: ours.read(key, ARCH) for key, _ in ours} == packed

    raw = path.read_bytes()
    toc = msgpack.unpackb(raw[int.from_bytes(raw[8:16], "little") :], raw=False)
    assert toc["gfx_arches"] == [ARCH]
    assert toc["compression_scheme"] == compressor.SCHEME_NAME
    assert set(toc["toc"]) == set(packed)


def test_same_bytes_as_kpack_writer(tmp_path: Path) -> None:
    """The face adds nothing of its own: write_kpack writes the same file for the kernels."""
    face = tmp_path / "face.kpack"
    packed = pack(face, ZstdCompressor(compression_level=3))
    direct = tmp_path / "direct.kpack"
    kernels = [
        KernelInput(
            key,
            ARCH,
            data,
            {"cache_key": hashlib.sha256(data).hexdigest(), "symbol": key.rsplit("/", 1)[1]},
        )
        for key, data in packed.items()
    ]
    write_kpack(
        direct,
        kernels,
        group_name="rocke_client",
        gfx_arch_family=ARCH,
        key_rule="name",
    )
    assert face.read_bytes() == direct.read_bytes()


def test_sdpa_co_paths_and_backslashes(tmp_path: Path) -> None:
    archive = PackedKernelArchive("hip_kernel_provider_sdpa", ARCH, [ARCH], compressor=None)
    archive.add_kernel(
        archive.prepare_kernel("fmha_v3_fwd\\MI300\\fwd_hd128_bf16_rtne.co", ARCH, b"co")
    )
    archive.finalize_archive()
    path = tmp_path / "sdpa.kpack"
    archive.write(path)
    with PackedKernelArchive.read(path) as written:
        assert list(written.toc) == ["fmha_v3_fwd/MI300/fwd_hd128_bf16_rtne.co"]
        assert written.get_kernel("fmha_v3_fwd/MI300/fwd_hd128_bf16_rtne.co", ARCH) == b"co"


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("", "empty"),
        ("rocke/gemm\x00/x", "control character"),
        ("rocke/gemm\n/x", "control character"),
        ("rocke/\udc80", "not valid UTF-8"),
        ("rocke/" + "x" * 5000, "more than 4096"),
    ],
)
def test_bad_key_is_one_error_and_no_file(tmp_path: Path, key: str, reason: str) -> None:
    archive = PackedKernelArchive("rocke_client", ARCH, [ARCH], compressor=ZstdCompressor())
    archive.add_kernel(archive.prepare_kernel("rocke/gemm/universal/ok", ARCH, b"ok"))
    archive.add_kernel(archive.prepare_kernel(key, ARCH, b"bad"))
    archive.finalize_archive()
    path = tmp_path / "bad.kpack"
    with pytest.raises(ArchiveError, match=reason) as caught:
        archive.write(path)
    assert len(caught.value.problems) == 1
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("arch", "reason"), [("gfx90a", "not in"), ("sm_90", "not a target id")])
def test_unknown_arch_is_one_error(arch: str, reason: str) -> None:
    archive = PackedKernelArchive("rocke_client", ARCH, [ARCH], compressor=ZstdCompressor())
    with pytest.raises(ArchiveError, match=reason):
        archive.add_kernel(archive.prepare_kernel("rocke/gemm/universal/a", arch, b"x"))


def test_duplicate_and_order_errors(tmp_path: Path) -> None:
    archive = PackedKernelArchive("rocke_client", ARCH, [ARCH], compressor=ZstdCompressor())
    archive.add_kernel(archive.prepare_kernel("rocke/a/b/c", ARCH, b"x"))
    with pytest.raises(ArchiveError, match="added already"):
        archive.add_kernel(archive.prepare_kernel("rocke/a/b/c", ARCH, b"y"))
    with pytest.raises(RuntimeError, match="finalize_archive"):
        archive.write(tmp_path / "x.kpack")
    with pytest.raises(ArchiveError, match="compression_level"):
        ZstdCompressor(compression_level=0)


def test_declared_arches_and_kernel_keys_stay_strict(tmp_path: Path) -> None:
    """gfx_arches is the declared list; the default key rule still wants '<path>#<N>'."""
    path = tmp_path / "two.kpack"
    kernels = [KernelInput("rocke/a/b/c", ARCH, b"x")]
    write_kpack(
        path,
        kernels,
        group_name="g",
        gfx_arch_family=ARCH,
        key_rule="name",
        gfx_arches=["gfx942", "gfx90a"],
    )
    with KpackArchive.open(path) as archive:
        assert archive.gfx_arches == ("gfx90a", "gfx942")
    with pytest.raises(ArchiveError, match="<forward-slash path>#<N>"):
        write_kpack(tmp_path / "k.kpack", kernels, group_name="g", gfx_arch_family=ARCH)
    with pytest.raises(ArchiveError, match="not in gfx_arches"):
        write_kpack(
            tmp_path / "k.kpack",
            [KernelInput("lib/x.so#0", ARCH, b"x")],
            group_name="g",
            gfx_arch_family=ARCH,
            gfx_arches=["gfx90a"],
        )
    assert not (tmp_path / "k.kpack").exists()
