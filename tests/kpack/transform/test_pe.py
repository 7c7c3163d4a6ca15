"""PE/COFF (Windows x86-64) HIP fat binaries: reading, extracting and the transform.

Inputs are DLLs and EXEs linked here by clang + lld-link the way the Windows toolchain
lays them out, holding real ROCm 7 offload bundles (compressed CCOB v3, generic targets)
from a PyPI wheel. Oracles: ``pefile`` (headers, warnings, checksum, section bytes),
``llvm-readobj --coff-basereloc`` and a bundle decoder written from the spec.
"""

from __future__ import annotations

import collections
import hashlib
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pefile
import pytest

from kpack.archive import KernelInput, KpackArchive, write_kpack
from kpack.errors import PeError, TransformError
from kpack.transform import (
    AlreadyTransformed,
    extract_pe_kernels,
    read_pe_fat,
    read_pe_kpack_ref,
    transform_pe,
)
from tests.kpack.pe_fixtures import build_pe
from tests.pypi_inputs import Digests, independent_section_objects, pe_section, rocm7_bundles

pytestmark = pytest.mark.real

SEARCH = ["../.kpack/blas_lib_@GFXARCH@.kpack"]


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """Three ROCm 7 bundles (CCOB v3, generic targets) from a PyPI wheel."""
    return rocm7_bundles(tmp_path_factory.mktemp("jax"))


@pytest.fixture(scope="module", params=["dll", "exe"])
def image(request: pytest.FixtureRequest, bundles: list[bytes],
          tmp_path_factory: pytest.TempPathFactory) -> Path:  # fmt: skip
    dest = tmp_path_factory.mktemp("pe") / f"libfat.{request.param}"
    return build_pe(dest, bundles, exe=request.param == "exe")


def _pefile_section(path: Path, name: str) -> bytes:
    return pe_section(path.read_bytes(), name.encode())


def test_every_code_object_matches_an_independent_decode(image: Path) -> None:
    kernels = extract_pe_kernels(image)
    ours: Digests = collections.Counter(
        (k.target, hashlib.sha256(k.read()).hexdigest()) for k in kernels
    )
    assert ours == independent_section_objects(_pefile_section(image, ".hip_fat"))
    assert {k.index for k in kernels} == {0, 1, 2}
    assert "gfx9-4-generic" in {k.target for k in kernels}


def _readobj_relocs(path: Path) -> list[int]:
    proc = subprocess.run(["llvm-readobj", "--coff-basereloc", str(path)],
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert "warning" not in proc.stderr.lower(), proc.stderr
    lines = proc.stdout.splitlines()
    return [int(lines[i + 1].split(":")[1], 16) for i, line in enumerate(lines)
            if line.strip() == "Type: DIR64"]  # fmt: skip


def test_the_transform_keeps_the_image_valid_and_drops_the_device_code(
    image: Path, tmp_path: Path
) -> None:
    out = tmp_path / image.name
    plan = transform_pe(image, out, kernel_name="bin/libfat.dll", search_paths=SEARCH)
    before, after = pefile.PE(str(image)), pefile.PE(str(out))
    assert after.get_warnings() == []
    assert after.OPTIONAL_HEADER.CheckSum == after.generate_checksum() != 0
    fat_before = next(s for s in before.sections if s.Name.startswith(b".hip_fat"))
    assert out.stat().st_size == image.stat().st_size - fat_before.SizeOfRawData + 512
    assert plan.removed_bytes == fat_before.SizeOfRawData
    names = [s.Name.rstrip(b"\0") for s in after.sections]
    assert names == [s.Name.rstrip(b"\0") for s in before.sections] + [b".kpackrf"]
    sections = {s.Name.rstrip(b"\0"): s for s in after.sections}
    fat, marker = sections[b".hip_fat"], sections[b".kpackrf"]
    assert fat.SizeOfRawData == 0 and fat.Misc_VirtualSize == fat_before.Misc_VirtualSize
    assert after.OPTIONAL_HEADER.SizeOfImage >= marker.VirtualAddress + marker.Misc_VirtualSize
    # every other section keeps its bytes and its address
    for old in before.sections:
        name = old.Name.rstrip(b"\0")
        if name in (b".hip_fat", b".hipFatB"):
            continue
        new = sections[name]
        assert (new.VirtualAddress, new.get_data()) == (old.VirtualAddress, old.get_data())
    # wrappers: HIPK, pointing at the marker, co_index = index; their relocations stay
    segment = _pefile_section(out, ".hipFatB")
    base = after.OPTIONAL_HEADER.ImageBase
    for i in range(len(segment) // 24):
        magic, version, pointer, reserved = struct.unpack_from("<IIQQ", segment, 24 * i)
        assert (magic, version, pointer, reserved) == (
            0x4B504948, 1, base + marker.VirtualAddress, i)  # fmt: skip
    assert _readobj_relocs(out) == _readobj_relocs(image)
    ref = read_pe_kpack_ref(out)
    assert ref is not None and ref.kernel_name == "bin/libfat.dll"
    assert ref.search_paths == tuple(SEARCH) and ref.co_indices == (0, 1, 2)
    with pytest.raises(AlreadyTransformed):
        transform_pe(out, tmp_path / "again.dll", kernel_name="x", search_paths=SEARCH)
    assert not (tmp_path / "again.dll").exists()


def test_archives_hold_every_code_object_byte_identical(image: Path, tmp_path: Path) -> None:
    plan = transform_pe(image, tmp_path / image.name, kernel_name="k", search_paths=SEARCH)
    by_target: dict[str, list[KernelInput]] = {}
    for kernel in plan.kernels:
        by_target.setdefault(kernel.target, []).append(
            KernelInput(f"k#{kernel.index}", kernel.target, kernel.read())
        )
    archived: Digests = collections.Counter()
    for target, items in by_target.items():
        path = tmp_path / f"blas_lib_{target}.kpack"
        write_kpack(path, items, group_name="blas_lib", gfx_arch_family=target)
        with KpackArchive.open(path) as archive:
            for key, t in archive:
                archived[(t, hashlib.sha256(archive.read(key, t)).hexdigest())] += 1
    assert archived == independent_section_objects(_pefile_section(image, ".hip_fat"))


def test_kpack_cli_inspects_and_extracts_pe_files(image: Path, tmp_path: Path) -> None:
    from kpack.cli import main

    assert main(["inspect", str(image)]) == 0
    assert main(["extract", str(image), "-o", str(tmp_path / "co")]) == 0
    extracted = {p.name: p.read_bytes() for p in (tmp_path / "co").glob("*.co")}
    digests: Digests = collections.Counter(
        (n.split(".", 2)[2].removesuffix(".co"), hashlib.sha256(d).hexdigest())
        for n, d in extracted.items()
    )
    assert digests == independent_section_objects(_pefile_section(image, ".hip_fat"))


# --- bad input: one clear error naming the file, nothing written ----------------------


def _refused(src: Path, tmp_path: Path, error: type[Exception], match: str) -> None:
    dest = tmp_path / "out.dll"
    with pytest.raises(error, match=match) as info:
        transform_pe(src, dest, kernel_name="k", search_paths=SEARCH)
    assert str(src) in str(info.value)
    assert not dest.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


def test_a_32_bit_image_is_refused(bundles: list[bytes], tmp_path: Path) -> None:
    src = build_pe(tmp_path / "x86.dll", bundles[:1], target="i686-pc-windows-msvc",
                   machine="x86")  # fmt: skip
    _refused(src, tmp_path, PeError, "i386")


def test_an_arm64_image_is_refused(bundles: list[bytes], tmp_path: Path) -> None:
    src = build_pe(tmp_path / "arm.dll", bundles[:1], target="aarch64-pc-windows-msvc",
                   machine="arm64")  # fmt: skip
    _refused(src, tmp_path, PeError, "ARM64 image")


def test_device_code_without_wrappers_is_refused(bundles: list[bytes], tmp_path: Path) -> None:
    src = build_pe(tmp_path / "nowrap.dll", bundles[:1], wrappers=False)
    _refused(src, tmp_path, TransformError, ".hip_fat without .hipFatB")


def _patched(image: Path, tmp_path: Path, edit: object) -> Path:
    data = bytearray(image.read_bytes())
    pe = pefile.PE(data=bytes(data))
    assert callable(edit)
    edit(data, pe)
    out = tmp_path / "patched.dll"
    out.write_bytes(data)
    return out


def test_a_wrapper_pointer_without_a_base_relocation_is_refused(
    bundles: list[bytes], tmp_path: Path
) -> None:
    src = build_pe(tmp_path / "ok.dll", bundles[:2])

    def drop_relocs(data: bytearray, pe: pefile.PE) -> None:
        for block in pe.DIRECTORY_ENTRY_BASERELOC:
            for entry in block.entries:
                offset = entry.struct.get_file_offset()
                struct.pack_into("<H", data, offset, entry.rva & 0xFFF)  # type ABSOLUTE

    _refused(_patched(src, tmp_path, drop_relocs), tmp_path, TransformError,
             "has no DIR64 base relocation")  # fmt: skip


def test_overlapping_sections_are_refused(bundles: list[bytes], tmp_path: Path) -> None:
    src = build_pe(tmp_path / "ok.dll", bundles[:1])

    def overlap(data: bytearray, pe: pefile.PE) -> None:
        second = pe.sections[1]
        struct.pack_into("<I", data, second.get_file_offset() + 12, pe.sections[0].VirtualAddress)

    _refused(_patched(src, tmp_path, overlap), tmp_path, PeError, "malformed section table")


def test_a_truncated_section_table_is_refused(bundles: list[bytes], tmp_path: Path) -> None:
    src = build_pe(tmp_path / "ok.dll", bundles[:1])

    def many(data: bytearray, pe: pefile.PE) -> None:
        struct.pack_into("<H", data, pe.FILE_HEADER.get_file_offset() + 2, 0x2000)

    _refused(_patched(src, tmp_path, many), tmp_path, PeError, "truncated section table")


def test_a_pointer_off_a_bundle_start_is_refused(bundles: list[bytes], tmp_path: Path) -> None:
    src = build_pe(tmp_path / "ok.dll", bundles[:1])

    def shift(data: bytearray, pe: pefile.PE) -> None:
        segment = next(s for s in pe.sections if s.Name.startswith(b".hipFatB"))
        at = segment.PointerToRawData + 8
        (value,) = struct.unpack_from("<Q", data, at)
        struct.pack_into("<Q", data, at, value + 16)

    _refused(_patched(src, tmp_path, shift), tmp_path, TransformError, "not the start of a bundle")


def test_host_only_images_have_no_device_code(tmp_path: Path) -> None:
    src = build_pe(tmp_path / "host.dll", [])
    assert read_pe_fat(src) is None or not read_pe_fat(src).wrappers  # type: ignore[union-attr]
    assert shutil.which("llvm-readobj") is not None


# --- the splitter, verify and resolve on PE artifacts ---------------------------------


def test_split_artifacts_verify_and_resolve_a_pe_artifact(image: Path, tmp_path: Path) -> None:
    """A Windows-style artifact (DLL in bin/) splits like an ELF one; the host DLL verifies
    against its archives and every wrapper resolves for a gfx942 agent (its generic target)
    once the archives sit where the marker says."""
    from kpack.resolve import resolve_binary
    from kpack.split import split_artifact
    from kpack.verify import verify_binary

    art = tmp_path / "blas_lib_generic"
    (art / "blas/stage/bin").mkdir(parents=True)
    (art / "artifact_manifest.txt").write_text("blas/stage\n")
    shutil.copy2(image, art / "blas/stage/bin/rocblas.dll")
    out = tmp_path / "out"
    split_artifact(art, out, prefix="blas_lib")
    outputs = sorted(p.name for p in out.iterdir())
    assert "blas_lib_gfx9-4-generic" in outputs and "blas_lib_gfx90a" in outputs
    dll = out / "blas_lib_generic/blas/stage/bin/rocblas.dll"
    assert pefile.PE(str(dll)).get_warnings() == []
    report = verify_binary(dll, search_root=out)
    assert report.kernels_checked == len(extract_pe_kernels(image))
    # install: the archives next to the host binaries, as the device wheels lay them out
    stage = out / "blas_lib_generic/blas/stage"
    for archive in out.rglob("*.kpack"):
        if archive.is_file() and "blas_lib_generic" not in archive.parts:
            (stage / ".kpack").mkdir(exist_ok=True)
            shutil.copy2(archive, stage / ".kpack" / archive.name)
    resolved = resolve_binary(dll, ["gfx942:sramecc+:xnack-"], env={})
    assert not resolved.missing and {lk.target for lk in resolved.lookups} == {"gfx9-4-generic"}
    assert resolve_binary(dll, ["gfx1201"], env={}).missing == ()  # gfx12-generic
    assert resolve_binary(dll, ["gfx1101"], env={}, with_generic=False).missing


def test_a_planned_image_that_fails_its_check_is_never_written(
    image: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The planned output is read back before anything is written: a plan that forgets
    to redirect the wrappers is refused."""
    import dataclasses

    import kpack.transform._pe as pe_transform

    real = pe_transform._plan

    def forgetful(*args: object, **kwargs: object) -> pe_transform.PeTransformPlan:
        plan = real(*args, **kwargs)  # type: ignore[arg-type]
        fat = read_pe_fat(plan.source)
        assert fat is not None and fat.segment is not None
        lo, hi = fat.segment.raw_offset, fat.segment.raw_offset + fat.segment.raw_size
        kept = tuple(p for p in plan.patches if not lo <= p[0] < hi)
        return dataclasses.replace(plan, patches=kept)

    monkeypatch.setattr(pe_transform, "_plan", forgetful)
    dest = tmp_path / "out.dll"
    with pytest.raises(TransformError, match="fails its check") as info:
        transform_pe(image, dest, kernel_name="k", search_paths=SEARCH)
    assert "is not redirected" in str(info.value)
    assert list(tmp_path.iterdir()) == []


# --- the wheel splitter on win_amd64 wheels ---------------------------------------------


def test_a_win_amd64_wheel_splits_including_its_data_platlib_members(
    bundles: list[bytes], tmp_path: Path
) -> None:
    """A Windows framework wheel: one fat DLL in ``torch/lib/``, another installed from
    ``torch-2.9.0.data/platlib/torch/bin/``, a Tensile database in ``.data/purelib``. Every
    code object lands in a device wheel; the host DLLs carry none; each device wheel's
    files install where the host's would; ``pip install --platform win_amd64`` accepts
    the set, and every installed wrapper resolves for a gfx942 agent."""
    from kpack import wheelsplit as spw
    from kpack.resolve import resolve_binary
    from kpack.wheelfile import Member, write_wheel

    first = build_pe(tmp_path / "pe" / "torch_hip.dll", bundles[:2])
    second = build_pe(tmp_path / "pe" / "c10_hip.dll", bundles[2:])
    data = "torch-2.9.0.data"
    members = [
        Member("torch/__init__.py", b""),
        Member("torch/lib/torch_hip.dll", first),
        Member(f"{data}/platlib/torch/bin/c10_hip.dll", second),
        Member(
            f"{data}/purelib/torch/lib/rocblas/library/TensileLibrary_lazy_gfx90a.dat",
            b"gfx90a database",
        ),
    ]
    wheel = write_wheel(
        tmp_path / "in", dist_name="torch", version="2.9.0", tag="cp311-cp311-win_amd64",
        members=members, metadata=b"Metadata-Version: 2.1\nName: torch\nVersion: 2.9.0\n",
    ).path  # fmt: skip
    out = tmp_path / "out"
    report = spw.split_wheel(wheel, out, spw.SplitOptions("torch/", "amd-torch-device", None))
    host = out / report.host_wheel
    assert host.name.endswith("-cp311-cp311-win_amd64.whl")
    with zipfile.ZipFile(host) as zf:
        for name in ("torch/lib/torch_hip.dll", f"{data}/platlib/torch/bin/c10_hip.dll"):
            pe = pefile.PE(data=zf.read(name))
            assert pe.get_warnings() == []
            fat = next(s for s in pe.sections if s.Name.startswith(b".hip_fat"))
            assert fat.SizeOfRawData == 0
        assert not [n for n in zf.namelist() if "TensileLibrary_lazy" in n]
    expected: Digests = collections.Counter()
    for dll in (first, second):
        expected += independent_section_objects(_pefile_section(dll, ".hip_fat"))
    archived: Digests = collections.Counter()
    devices = sorted(out.glob("amd_torch_device_*.whl"))
    for device in devices:
        with zipfile.ZipFile(device) as zf:
            for name in zf.namelist():
                assert not name.startswith(data), name  # installs at its own paths
                if name.endswith(".kpack"):
                    assert name.startswith("torch/.kpack/")
                    with KpackArchive.open(_written(tmp_path, zf.read(name))) as archive:
                        for key, target in archive:
                            code = archive.read(key, target)
                            archived[(target, hashlib.sha256(code).hexdigest())] += 1
    assert archived == expected
    gfx90a = next(d for d in devices if "gfx90a-" in d.name)
    with zipfile.ZipFile(gfx90a) as zf:
        assert "torch/lib/rocblas/library/TensileLibrary_lazy_gfx90a.dat" in zf.namelist()
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-index",
         "--no-deps", "--platform", "win_amd64", "--only-binary=:all:", "--target", str(site),
         str(host), *map(str, devices)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for installed in (site / "torch/lib/torch_hip.dll", site / "torch/bin/c10_hip.dll"):
        resolved = resolve_binary(installed, ["gfx942:sramecc+:xnack-"], env={})
        assert not resolved.missing, (installed, resolved.missing[:1])


def _written(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / f"archive-{hashlib.sha256(data).hexdigest()[:12]}.kpack"
    path.write_bytes(data)
    return path


def _symbols(path: Path) -> list[str]:
    proc = subprocess.run(["llvm-readobj", "--symbols", str(path)], capture_output=True,
                          text=True, check=True)  # fmt: skip
    assert "warning" not in proc.stderr.lower(), proc.stderr
    return [line.split(":", 1)[1].strip() for line in proc.stdout.splitlines()
            if line.strip().startswith("Name:")]  # fmt: skip


def test_an_image_with_a_coff_symbol_table_keeps_it(bundles: list[bytes], tmp_path: Path) -> None:
    """``lld-link /debug:dwarf`` keeps the COFF symbol table (and its string table) after
    the sections: it moves with them and still reads back."""
    src = build_pe(tmp_path / "dbg.dll", bundles[:2], debug=True, link_flags=("/debug:dwarf",))
    assert pefile.PE(str(src)).FILE_HEADER.PointerToSymbolTable
    out = tmp_path / "out.dll"
    transform_pe(src, out, kernel_name="k", search_paths=SEARCH)
    pe = pefile.PE(str(out))
    assert pe.get_warnings() == [] and pe.OPTIONAL_HEADER.CheckSum == pe.generate_checksum()
    assert _symbols(out) == _symbols(src) and "fat0" in _symbols(src)


def test_a_fixed_image_without_base_relocations(bundles: list[bytes], tmp_path: Path) -> None:
    """``/fixed``: relocations stripped, pointers absolute; the wrappers are redirected to
    the marker's absolute address."""
    src = build_pe(tmp_path / "fixed.dll", bundles[:2], link_flags=("/fixed",))
    assert pefile.PE(str(src)).FILE_HEADER.Characteristics & 0x0001  # RELOCS_STRIPPED
    out = tmp_path / "out.dll"
    plan = transform_pe(src, out, kernel_name="k", search_paths=SEARCH)
    pe = pefile.PE(str(out))
    assert pe.get_warnings() == []
    base = pe.OPTIONAL_HEADER.ImageBase
    segment = _pefile_section(out, ".hipFatB")
    pointers = {struct.unpack_from("<Q", segment, 24 * i + 8)[0] for i in range(2)}
    assert pointers == {base + plan.marker_rva}


def test_a_signed_image_is_refused(bundles: list[bytes], tmp_path: Path) -> None:
    src = build_pe(tmp_path / "ok.dll", bundles[:1])

    def sign(data: bytearray, pe: pefile.PE) -> None:  # a certificate table entry
        entry = pe.OPTIONAL_HEADER.DATA_DIRECTORY[4]
        struct.pack_into("<II", data, entry.get_file_offset(), len(data), 8)
        data.extend(b"\0" * 8)

    _refused(_patched(src, tmp_path, sign), tmp_path, TransformError, "transform it before signing")


def test_no_room_for_the_marker_header_is_refused(bundles: list[bytes], tmp_path: Path) -> None:
    src = build_pe(tmp_path / "ok.dll", bundles[:1])

    def full(data: bytearray, pe: pefile.PE) -> None:  # SizeOfHeaders = end of the table
        end = pe.sections[-1].get_file_offset() + 40
        struct.pack_into("<I", data, pe.OPTIONAL_HEADER.get_file_offset() + 60, end)

    _refused(_patched(src, tmp_path, full), tmp_path, TransformError, "no room for one more")


def test_a_section_past_size_of_image_is_refused(bundles: list[bytes], tmp_path: Path) -> None:
    """Fuzzer finding: a section at RVA 0xffffffff made the marker's address overflow 32
    bits (``struct.error``); such an image is malformed and refused when it is read."""
    src = build_pe(tmp_path / "ok.dll", bundles[:1])

    def far(data: bytearray, pe: pefile.PE) -> None:
        last = pe.sections[-1]
        struct.pack_into("<I", data, last.get_file_offset() + 12, 0xFFFFFFFF)

    _refused(_patched(src, tmp_path, far), tmp_path, PeError, "extends past SizeOfImage")


def test_fuzzer_findings_on_alignments_are_refused(bundles: list[bytes], tmp_path: Path) -> None:
    """Fuzzer findings: FileAlignment 1 GiB made the marker's padding a 1 GiB allocation;
    a huge SectionAlignment overflowed SizeOfImage (``struct.error``)."""
    src = build_pe(tmp_path / "ok.dll", bundles[:1])
    opt = pefile.PE(str(src)).OPTIONAL_HEADER.get_file_offset()

    def file_alignment(data: bytearray, pe: pefile.PE) -> None:
        struct.pack_into("<I", data, opt + 36, 0x40000000)

    _refused(_patched(src, tmp_path, file_alignment), tmp_path, PeError, "FileAlignment")

    def section_alignment(data: bytearray, pe: pefile.PE) -> None:
        struct.pack_into("<I", data, opt + 32, 0x80000000)

    _refused(_patched(src, tmp_path, section_alignment), tmp_path, TransformError,
             "no 32-bit address")  # fmt: skip


def test_split_artifacts_refuses_windows_names_it_cannot_create(tmp_path: Path) -> None:
    """A PE binary with gfx90a:xnack+ code would need ``P_gfx90a:xnack+`` directories and
    archives: one error naming the binary and target, nothing published."""
    from kpack.errors import ArtifactError
    from kpack.split import split_artifact
    from tests.kpack.bundle_fixtures import sample_bundle

    dll = build_pe(tmp_path / "pe" / "x.dll", [sample_bundle(["gfx90a:xnack+", "gfx1100"])])
    art = tmp_path / "x_lib_generic"
    (art / "x/stage/bin").mkdir(parents=True)
    (art / "artifact_manifest.txt").write_text("x/stage\n")
    shutil.copy2(dll, art / "x/stage/bin/x.dll")
    out = tmp_path / "out"
    with pytest.raises(ArtifactError, match="Windows file systems reject") as info:
        split_artifact(art, out, prefix="x_lib")
    assert "x/stage/bin/x.dll: gfx90a:xnack+" in str(info.value)
    assert not out.exists() or not any(out.iterdir())


def test_a_win_amd64_wheel_with_feature_qualified_code_is_refused(tmp_path: Path) -> None:
    from kpack import wheelsplit as spw
    from kpack.errors import PackagingError
    from kpack.wheelfile import Member, write_wheel
    from tests.kpack.bundle_fixtures import sample_bundle

    dll = build_pe(tmp_path / "pe" / "x.dll", [sample_bundle(["gfx90a:xnack+", "gfx1100"])])
    wheel = write_wheel(
        tmp_path / "in", dist_name="torch", version="2.9.0", tag="cp311-cp311-win_amd64",
        members=[Member("torch/lib/x.dll", dll)],
        metadata=b"Metadata-Version: 2.1\nName: torch\nVersion: 2.9.0\n",
    ).path  # fmt: skip
    out = tmp_path / "out"
    with pytest.raises(PackagingError, match="Windows file systems reject") as info:
        spw.split_wheel(wheel, out, spw.SplitOptions("torch/", "amd-torch-device", None))
    assert "torch/.kpack/torch_gfx90a:xnack+.kpack" in str(info.value)
    assert not out.exists()


def test_split_outputs_for_windows_whose_names_differ_only_in_case_are_refused(
    tmp_path: Path,
) -> None:
    """The input's ``torch/.KPACK/`` and the device wheels' ``torch/.kpack/`` would be one
    directory on NTFS: one error naming both, nothing written."""
    from kpack import wheelsplit as spw
    from kpack.errors import PackagingError
    from kpack.wheelfile import Member, write_wheel
    from tests.kpack.bundle_fixtures import sample_bundle

    dll = build_pe(tmp_path / "pe" / "x.dll", [sample_bundle(["gfx1100"])])
    wheel = write_wheel(
        tmp_path / "in",
        dist_name="torch",
        version="2.9.0",
        tag="cp311-cp311-win_amd64",
        members=[Member("torch/lib/x.dll", dll), Member("torch/.KPACK/notes.txt", b"notes")],
        metadata=b"Metadata-Version: 2.1\nName: torch\nVersion: 2.9.0\n",
    ).path
    out = tmp_path / "out"
    with pytest.raises(PackagingError) as info:
        spw.split_wheel(wheel, out, spw.SplitOptions("torch/", "amd-torch-device", None))
    assert str(info.value) == (
        f"{wheel}: the split wheels would install names that differ only in case (one file on "
        "Windows)\n  - 'torch/.KPACK' and 'torch/.kpack'"
    )
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "pe"]


# --- file offsets the transform moves: they must lie in the file -------------------------


def _debug_entry_offset(pe: pefile.PE) -> int:
    return int(pe.DIRECTORY_ENTRY_DEBUG[0].struct.get_file_offset())


@pytest.mark.parametrize(
    ("pointer", "size", "problem"),
    [
        (lambda n: n + 0x1000, None, "ends past the end of the file"),
        (lambda n: n - 8, None, "ends past the end of the file"),
        (lambda n: 0xFFFFFFF0, 0x100, "ends past the end of the file"),
        # with bytes after the sections: data across their end would be torn apart
        (lambda n: n - 0x10, 0x100, "crosses the end of the sections"),
    ],
)
def test_debug_data_past_the_end_of_the_file_is_refused(
    bundles: list[bytes], tmp_path: Path, pointer: object, size: int | None, problem: str
) -> None:
    """Today's transform moved such a PointerToRawData and shipped it; it is one error
    naming the file, the entry and the field, and nothing is written."""
    src = build_pe(tmp_path / "dbg.dll", bundles[:1], link_flags=("/debug",))
    length = src.stat().st_size
    assert callable(pointer)

    def far(data: bytearray, pe: pefile.PE) -> None:
        at = _debug_entry_offset(pe)
        struct.pack_into("<I", data, at + 24, pointer(length))
        if size is not None:
            struct.pack_into("<I", data, at + 16, size)
        if problem.startswith("crosses"):
            data.extend(b"\0" * 0x200)

    patched = _patched(src, tmp_path, far)
    _refused(patched, tmp_path, PeError, "malformed debug directory")
    with pytest.raises(PeError) as info:
        transform_pe(patched, tmp_path / "out.dll", kernel_name="k", search_paths=SEARCH)
    assert f"entry 0: PointerToRawData {pointer(length):#x} + SizeOfData" in str(info.value)
    assert problem in str(info.value)


@pytest.mark.parametrize("field", ["pointer", "count", "strings"])
def test_a_coff_symbol_table_past_the_end_of_the_file_is_refused(
    bundles: list[bytes], tmp_path: Path, field: str
) -> None:
    src = build_pe(tmp_path / "dbg.dll", bundles[:1], debug=True, link_flags=("/debug:dwarf",))
    length = src.stat().st_size

    def far(data: bytearray, pe: pefile.PE) -> None:
        coff = pe.FILE_HEADER.get_file_offset()
        table, count = pe.FILE_HEADER.PointerToSymbolTable, pe.FILE_HEADER.NumberOfSymbols
        if field == "pointer":
            struct.pack_into("<I", data, coff + 8, length + 0x100)
        elif field == "count":
            struct.pack_into("<I", data, coff + 12, 0x10000000)
        else:  # the string table's size field
            struct.pack_into("<I", data, table + 18 * count, 0x7FFFFFFF)

    message = (
        r"COFF header: PointerToSymbolTable 0x[0-9a-f]+ with NumberOfSymbols \d+ and a "
        rf"\d+-byte string table ends past the end of the file \({length:#x}\)"
    )
    _refused(_patched(src, tmp_path, far), tmp_path, PeError, message)


def test_kpack_split_artifacts_of_a_pe_with_debug_data_past_its_end(
    bundles: list[bytes], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kpack.cli import main

    src = build_pe(tmp_path / "dbg.dll", bundles[:1], link_flags=("/debug",))

    def far(data: bytearray, pe: pefile.PE) -> None:
        struct.pack_into("<I", data, _debug_entry_offset(pe) + 24, len(data) + 0x1000)

    art = tmp_path / "blas_lib_generic"
    (art / "blas/stage/bin").mkdir(parents=True)
    (art / "artifact_manifest.txt").write_text("blas/stage\n")
    shutil.copy2(_patched(src, tmp_path, far), art / "blas/stage/bin/rocblas.dll")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    rc = main(["split-artifacts", "--artifact-dir", str(art), "--output-dir", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1 and err.startswith("error: "), err
    assert "rocblas.dll: malformed debug directory; entry 0: PointerToRawData" in err
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before
