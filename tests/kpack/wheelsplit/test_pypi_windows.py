"""A real ``win_amd64`` wheel from PyPI with HIP fat binaries: bitsandbytes 0.50.2.

Its ROCm DLLs were linked by the Windows HIP SDK (not by our fixtures): ``.hip_fat`` with
CCOB v3 zstd bundles for up to 22 ISAs, ``.hipFatB`` wrappers, base relocations. Oracles:
``pefile`` (headers, warnings, checksum, base relocations, exports, imports), ``llvm-readobj
--coff`` and a bundle decoder written from the spec for the code objects, ``pip install
--platform win_amd64`` for the split wheels, and Wine's PE loader running the DLLs' own HIP
registration (``tests/kpack/wheelsplit/wine_probe.py``) for what the runtime is handed.
"""

from __future__ import annotations

import collections
import hashlib
import struct
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from email.parser import Parser
from pathlib import Path

import msgpack
import pefile
import pytest

import kpack.wheelsplit as spw
from kpack.resolve import resolve_binary
from kpack.transform import extract_kernels, plan_pe_transform, transform_binary
from tests.kpack.bundle_fixtures import read_kpack_by_spec
from tests.kpack.wheelsplit.wine_probe import WineProbe
from tests.pypi_inputs import (
    BITSANDBYTES_WIN,
    Digests,
    fat_pe_members,
    independent_pe_code_objects,
    pe_section,
    pypi_wheel,
)

pytestmark = pytest.mark.real

HIPF, HIPK = b"FPIH", b"HIPK"  # the wrapper magics as they sit on disk (spec 2.5)
ROCM_DLLS = ["libbitsandbytes_rocm714.dll", "libbitsandbytes_rocm715.dll",
             "libbitsandbytes_rocm72.dll"]  # fmt: skip


@pytest.fixture(scope="module")
def bnb(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    wheel = pypi_wheel(BITSANDBYTES_WIN)
    return wheel, fat_pe_members(wheel, tmp_path_factory.mktemp("bnb"))


def _pe(path: Path | bytes) -> pefile.PE:
    if isinstance(path, bytes):
        return pefile.PE(data=path)
    return pefile.PE(data=path.read_bytes())


def _sections(pe: pefile.PE) -> dict[bytes, pefile.SectionStructure]:
    return {s.Name.rstrip(b"\0"): s for s in pe.sections}


def _wrappers(pe: pefile.PE) -> list[tuple[bytes, int, int, int]]:
    """(magic, version, pointer, reserved1) of every wrapper in ``.hipFatB``."""
    segment = _sections(pe)[b".hipFatB"]
    data = segment.get_data()[: segment.Misc_VirtualSize]
    assert len(data) % 24 == 0
    return [(data[i : i + 4], *struct.unpack_from("<IQQ", data, i + 4))
            for i in range(0, len(data), 24)]  # fmt: skip


def _relocated_rvas(pe: pefile.PE) -> set[int]:
    return {
        entry.rva
        for block in getattr(pe, "DIRECTORY_ENTRY_BASERELOC", [])
        for entry in block.entries
        if entry.type != pefile.RELOCATION_TYPE["IMAGE_REL_BASED_ABSOLUTE"]
    }


def test_the_wheel_carries_rocm_dlls_from_the_hip_toolchain(
    bnb: tuple[Path, list[Path]],
) -> None:
    _, fat = bnb
    assert [p.name for p in fat] == ROCM_DLLS
    for dll in fat:
        pe = _pe(dll)
        assert pe.FILE_HEADER.Machine == pefile.MACHINE_TYPE["IMAGE_FILE_MACHINE_AMD64"]
        wrappers = _wrappers(pe)
        assert len(wrappers) == 2 and all(w[0] == HIPF for w in wrappers)
        # every wrapper pointer is based-relocated and lands in .hip_fat
        base = pe.OPTIONAL_HEADER.ImageBase
        fatbin = _sections(pe)[b".hip_fat"]
        segment = _sections(pe)[b".hipFatB"]
        for i, (_, _, pointer, _) in enumerate(wrappers):
            assert segment.VirtualAddress + 24 * i + 8 in _relocated_rvas(pe)
            assert fatbin.contains_rva(pointer - base)
    targets = {t for dll in fat for t, _ in independent_pe_code_objects(dll)}
    assert {"gfx908", "gfx90a", "gfx1030", "gfx1100", "gfx1151", "gfx1201"} <= targets


def test_extracted_code_objects_match_an_independent_decode(
    bnb: tuple[Path, list[Path]],
) -> None:
    for dll in bnb[1]:
        ours: Digests = collections.Counter(
            (k.target, hashlib.sha256(k.read()).hexdigest()) for k in extract_kernels(dll)
        )
        expected = independent_pe_code_objects(dll)
        assert ours == expected, dll.name
        assert sum(expected.values()) in (14, 44)  # 2 bundles x 7 or 22 ISAs


def test_transformed_dlls_keep_their_image_and_lose_their_device_code(
    bnb: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    for dll in bnb[1]:
        dest = tmp_path / dll.name
        transform_binary(dll, dest, kernel_name="bitsandbytes/" + dll.name,
                         search_paths=["bitsandbytes_@GFXARCH@.kpack"])  # fmt: skip
        before, after = _pe(dll), _pe(dest)
        assert after.get_warnings() == []
        assert after.OPTIONAL_HEADER.CheckSum == after.generate_checksum() != 0
        assert (
            dest.stat().st_size
            <= dll.stat().st_size - len(pe_section(dll.read_bytes(), b".hip_fat")) + 4096
        )
        old, new = _sections(before), _sections(after)
        # the loaded image keeps its layout: every old section at its RVA, same size
        for name, section in old.items():
            assert (new[name].VirtualAddress, new[name].Misc_VirtualSize) == (
                section.VirtualAddress, section.Misc_VirtualSize), name  # fmt: skip
            if name not in (b".hip_fat", b".hipFatB"):  # both checked below
                assert new[name].get_data() == section.get_data(), name
        assert new[b".hip_fat"].SizeOfRawData == 0
        assert not any(new[b".hip_fat"].contains_rva(rva) for rva in _relocated_rvas(after))
        # every wrapper HIPK, pointing (based-relocated) at the one marker, co_index in order
        marker = new[b".kpackrf"]
        wrappers = _wrappers(after)
        base = after.OPTIONAL_HEADER.ImageBase
        assert [(w[0], w[1], w[2] - base, w[3]) for w in wrappers] == [
            (HIPK, 1, marker.VirtualAddress, i) for i in range(len(wrappers))
        ]
        segment = new[b".hipFatB"]
        for i in range(len(wrappers)):
            assert segment.VirtualAddress + 24 * i + 8 in _relocated_rvas(after)
        ref = msgpack.unpackb(marker.get_data()[: marker.Misc_VirtualSize])
        assert ref == {"kpack_search_paths": ["bitsandbytes_@GFXARCH@.kpack"],
                       "kernel_name": "bitsandbytes/" + dll.name}  # fmt: skip
        # what the DLL offers and needs is untouched
        assert [e.name for e in after.DIRECTORY_ENTRY_EXPORT.symbols] == [
            e.name for e in before.DIRECTORY_ENTRY_EXPORT.symbols
        ]
        assert [i.dll for i in after.DIRECTORY_ENTRY_IMPORT] == [
            i.dll for i in before.DIRECTORY_ENTRY_IMPORT
        ]
        proc = subprocess.run(
            ["llvm-readobj-15", "--coff-basereloc", "--sections", "--coff-exports", str(dest)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert proc.returncode == 0 and "warning" not in proc.stderr.lower(), proc.stderr


def _split(wheel: Path, out: Path) -> spw.SplitReport:
    options = spw.SplitOptions(BITSANDBYTES_WIN.overlay_root, "bitsandbytes-device", (), jobs=2)
    return spw.split_wheel(wheel, out, options)


def test_the_real_windows_wheel_splits(bnb: tuple[Path, list[Path]], tmp_path: Path) -> None:
    wheel, fat = bnb
    out = tmp_path / "out"
    _split(wheel, out)
    names = sorted(p.name for p in out.glob("*.whl"))
    assert all(n.endswith("-win_amd64.whl") for n in names)
    assert "bitsandbytes-0.50.2-py3-none-win_amd64.whl" in names
    assert len([n for n in names if n.startswith("bitsandbytes_device_")]) == 22

    # every code object of every ROCm DLL in a device wheel, byte-identical; no ':' names
    expected: Digests = sum((independent_pe_code_objects(d) for d in fat), collections.Counter())
    archived: Digests = collections.Counter()
    tree = tmp_path / "tree"
    for name in names:
        with zipfile.ZipFile(out / name) as zf:
            for member in zf.namelist():
                assert ":" not in member, f"{member}: Windows file systems reject ':'"
            zf.extractall(tree)
    for archive in sorted(p for p in tree.rglob("*.kpack") if p.is_file()):
        _, kernels = read_kpack_by_spec(archive.read_bytes())
        for (_key, target), code in kernels.items():
            archived[(target, hashlib.sha256(code).hexdigest())] += 1
    assert archived == expected

    # the other DLLs (CUDA, CPU, XPU) ship byte-identical; the ROCm ones lost their code
    with zipfile.ZipFile(wheel) as zf:
        original = {n: zf.read(n) for n in zf.namelist() if n.endswith(".dll")}
    for member, data in original.items():
        shipped = (tree / member).read_bytes()
        if Path(member).name in ROCM_DLLS:
            assert _sections(_pe(shipped))[b".hip_fat"].SizeOfRawData == 0
            assert len(shipped) < len(data)
        else:
            assert shipped == data, member

    # each host DLL finds its kernels for the ISAs it was built for, and only those
    for dll in ROCM_DLLS:
        host = tree / "bitsandbytes" / dll
        for arch in ("gfx1100", "gfx1151", "gfx1201"):
            assert not resolve_binary(host, [arch], env={}).missing, (dll, arch)
        missing = resolve_binary(host, ["gfx90a"], env={}).missing
        assert bool(missing) == (dll == "libbitsandbytes_rocm72.dll"), dll

    # a Windows user with a gfx1151 installs the host wheel and its one device wheel
    with zipfile.ZipFile(out / "bitsandbytes-0.50.2-py3-none-win_amd64.whl") as zf:
        meta = zf.read("bitsandbytes-0.50.2.dist-info/METADATA").decode()
    requires = Parser().parsestr(meta).get_all("Requires-Dist") or []
    assert any("bitsandbytes-device-gfx1151" in r and 'extra == "device-gfx1151"' in r
               for r in requires), requires  # fmt: skip
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-index",
         "--find-links", str(out), "--platform", "win_amd64", "--only-binary=:all:",
         "--python-version", "3.12", "--target", str(site), "--no-deps",
         "bitsandbytes==0.50.2", "bitsandbytes-device-gfx1151==0.50.2"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [p.name for p in sorted((site / "bitsandbytes/.kpack").iterdir())] == [
        "bitsandbytes_gfx1151.kpack"
    ]
    for dll in ROCM_DLLS:
        assert not resolve_binary(site / "bitsandbytes" / dll, ["gfx1151"], env={}).missing

    # reproducible: a second split gives the same bytes
    again = tmp_path / "again"
    _split(wheel, again)
    assert {p.name: p.read_bytes() for p in again.iterdir() if p.is_file()} == {
        p.name: p.read_bytes() for p in out.iterdir() if p.is_file()
    }


@pytest.fixture(scope="module")
def wine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WineProbe]:
    probe = WineProbe(tmp_path_factory.mktemp("wine"))
    yield probe
    probe.close()


def test_a_pe_loader_hands_the_hip_runtime_the_marker(
    bnb: tuple[Path, list[Path]], wine: WineProbe, tmp_path: Path
) -> None:
    """Wine loads each real DLL, fat and transformed, at a base other than its preferred
    one; its static constructors register every wrapper with the (stub) HIP runtime. Fat:
    HIPF pointers at the bundles. Transformed: HIPK, co_index in order, every pointer at
    the one marker, rebased like the original, the marker's bytes behind it."""
    for dll in bnb[1]:
        thin = tmp_path / dll.name
        transform_binary(dll, thin, kernel_name="bitsandbytes/" + dll.name,
                         search_paths=["bitsandbytes_@GFXARCH@.kpack"])  # fmt: skip
        for path in (dll, thin):
            data = path.read_bytes()
            pe = _pe(data)
            load = wine.load(data, dll.name)
            assert load.reserved == pe.OPTIONAL_HEADER.ImageBase != load.base > 0, load
            wrappers = _wrappers(pe)
            assert len(load.registrations) == len(wrappers) == 2
            sections = _sections(pe)
            for i, got in enumerate(load.registrations):
                rva = got.binary - load.base
                if path is dll:
                    assert (got.magic, got.reserved1) == (HIPF, 0)
                    assert rva == wrappers[i][2] - pe.OPTIONAL_HEADER.ImageBase
                    assert sections[b".hip_fat"].contains_rva(rva)
                    assert got.head[:4] == b"CCOB"
                else:
                    assert (got.magic, got.reserved1) == (HIPK, i)
                    assert rva == sections[b".kpackrf"].VirtualAddress
                    marker = sections[b".kpackrf"].get_data()
                    assert got.head == marker[:48]
                assert got.head == pe.get_data(rva, 48)


def test_the_kept_runs_of_a_dll_transform_are_exactly_its_unchanged_bytes(
    bnb: tuple[Path, list[Path]],
) -> None:
    """What a split's host wheel may copy from the input's deflate stream: every run is
    source bytes unchanged, and every output byte outside the runs is new or patched."""
    for dll in bnb[1]:
        search = ["bitsandbytes_@GFXARCH@.kpack"]
        plan = plan_pe_transform(dll, kernel_name=f"bitsandbytes/{dll.name}", search_paths=search)
        output, source = b"".join(plan.iter_chunks()), dll.read_bytes()
        runs = plan.kept_runs()
        assert [r[0] for r in runs] == sorted(r[0] for r in runs)
        for at, base, length in runs:
            assert output[at : at + length] == source[base : base + length], dll.name
        outside = len(output) - sum(length for _, _, length in runs)
        patched = {o for off, value in plan.patches for o in range(off, off + len(value))}
        new = sum(len(p.data) for p in plan.pieces if p.data is not None)
        assert outside <= new + len(patched) + 4, dll.name  # 4: the checksum
        assert sum(length for _, _, length in runs) > len(output) // 2, dll.name
