"""Each code object stored once per archive: identical code objects share one ordinal and
one frame, and every reader loads such an archive (the reader study is in
kpack/archive/_pack.py's docstring): ours, HRX's rules (tests/kpack/hrx_reader.py), the
``rocm_kpack`` face's reader, and ``kpack verify`` on split output whose wrappers point at
one bundle (the real framework wheel's librccl has 7 such wrappers)."""

from __future__ import annotations

import collections
import hashlib
import shutil
import struct
import zipfile
from pathlib import Path

import msgpack
import pytest

from kpack.archive import KernelInput, KpackArchive, write_kpack
from kpack.bundle import make_plain_bundle
from kpack.cli import main
from kpack.wheelfile import Member, write_wheel
from tests.conftest import require
from tests.kpack.bundle_fixtures import fake_code_object
from tests.kpack.hrx_reader import hrx_read
from tests.kpack.split.test_split import manifest, put
from tests.kpack.transform.test_synthetic import GFX, pad
from tests.kpack.transform_fixtures import synthetic
from tests.kpack.wheel_fixtures import TAG, VERSION, metadata


def _toc(path: Path) -> dict[str, object]:
    raw = path.read_bytes()
    (offset,) = struct.unpack_from("<Q", raw, 8)
    toc: dict[str, object] = msgpack.unpackb(raw[offset:], raw=False)
    return toc


def _num_kernels(path: Path) -> int:
    toc = _toc(path)
    (count,) = struct.unpack_from("<I", path.read_bytes(), int(toc["zstd_offset"]))  # type: ignore[call-overload]
    return int(count)


@pytest.mark.parametrize("scheme", ["zstd-per-kernel", "none"])
def test_identical_code_objects_share_an_ordinal(tmp_path: Path, scheme: str) -> None:
    same = fake_code_object("gfx942", 4000)
    other = fake_code_object("gfx942", 3000, e_flags=0x31)
    kernels = [
        KernelInput(f"lib/librccl.so#{i}", "gfx942", same if i != 3 else other) for i in range(7)
    ]
    kernels.append(KernelInput("lib/libother.so#0", "gfx942", same))
    path = tmp_path / "a.kpack"
    summary = write_kpack(
        path,
        kernels,
        group_name="g",
        gfx_arch_family="gfx942",
        scheme=scheme,  # type: ignore[arg-type]
    )
    assert summary.kernel_count == 8
    toc = _toc(path)
    entries = toc["toc"]
    assert isinstance(entries, dict)
    ordinals = {(k, t): e["ordinal"] for k, ts in entries.items() for t, e in ts.items()}
    # sorted (key, target) order; the first of identical ones gives its ordinal
    assert ordinals[("lib/librccl.so#0", "gfx942")] == 0
    assert ordinals[("lib/librccl.so#3", "gfx942")] == 1
    assert {o for (k, _), o in ordinals.items() if k != "lib/librccl.so#3"} == {0}
    if scheme == "none":
        assert len(toc["blobs"]) == 2  # type: ignore[arg-type]
    else:
        assert _num_kernels(path) == 2
    want = {(k.binary_key, k.target): bytes(k.data) for k in kernels}  # type: ignore[arg-type]
    assert hrx_read(path) == want
    with KpackArchive.open(path) as archive:
        assert {key: archive.read(*key) for key in archive} == want
    from rocm_kpack.kpack import PackedKernelArchive

    face = PackedKernelArchive.read(path)
    assert {key: face.get_kernel(*key) for key in want} == want
    # the same kernels without sharing: every copy stored
    separate = tmp_path / "b.kpack"
    distinct = [
        KernelInput(k.binary_key, k.target, want[(k.binary_key, k.target)] + bytes([i]))
        for i, k in enumerate(kernels)
    ]
    write_kpack(separate, distinct, group_name="g", gfx_arch_family="gfx942", scheme=scheme)  # type: ignore[arg-type]
    assert path.stat().st_size < separate.stat().st_size


def test_bytes_do_not_depend_on_input_order(tmp_path: Path) -> None:
    same = fake_code_object("gfx942", 2000)
    kernels = [KernelInput(f"lib/a.so#{i}", "gfx942", same) for i in range(4)]
    one, two = tmp_path / "1.kpack", tmp_path / "2.kpack"
    write_kpack(one, kernels, group_name="g", gfx_arch_family="gfx942")
    write_kpack(two, kernels[::-1], group_name="g", gfx_arch_family="gfx942")
    assert one.read_bytes() == two.read_bytes()


def test_split_of_wrappers_pointing_at_one_bundle(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Three wrappers, two of them at the same bundle: each target's archive stores two
    frames for three entries, and ``kpack verify`` and the HRX rules read every key."""
    require(shutil.which("gcc") is not None, "needs gcc")
    targets = ("gfx900", "gfx1030")
    bundles = [
        make_plain_bundle(
            [(GFX + t, fake_code_object(t, 9000, e_flags=0x30 + i)) for t in targets], align=8
        )
        for i in range(2)
    ]
    first = pad(bundles[0])
    data = first + pad(bundles[1])
    lib = synthetic(tmp_path / "build", "lib", data, [0, len(first), 0], kind="so")
    art = tmp_path / "artifacts" / "demo_lib_gfx90X-dcgpu"
    put(art, "s/stage", "lib/libdemo.so", lib)
    manifest(art, "s/stage")
    out = tmp_path / "out"
    argv = ["split-artifacts", "--artifact-dir", str(art), "--output-dir", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    archives = sorted(p for p in out.rglob("*.kpack") if p.is_file())
    assert len(archives) == 2
    for path in archives:
        assert _num_kernels(path) == 2
        read = hrx_read(path)
        assert len(read) == 3
        assert read[("s/stage/lib/libdemo.so#0", next(t for _, t in read))] == next(
            v for (k, _), v in read.items() if k.endswith("#2")
        )
    binary = next(out.glob("*_generic/s/stage/lib/libdemo.so"))
    assert main(["verify", str(binary), "--search-root", str(out)]) == 0, capsys.readouterr().err
    assert "3 wrappers, 6 kernels in 2 archives" in capsys.readouterr().out


def _wheel_archives(out: Path) -> dict[str, bytes]:
    found = {}
    for built in sorted(out.glob("*.whl")):
        with zipfile.ZipFile(built) as z:
            found.update({n: z.read(n) for n in z.namelist() if n.endswith(".kpack")})
    return found


def _frames(raw: bytes) -> tuple[int, int]:
    """(TOC entries, stored blobs) of an archive's bytes."""
    (offset,) = struct.unpack_from("<Q", raw, 8)
    toc = msgpack.unpackb(raw[offset:], raw=False)
    entries = sum(len(targets) for targets in toc["toc"].values())
    if toc["compression_scheme"] == "none":
        return entries, len(toc["blobs"])
    return entries, struct.unpack_from("<I", raw, toc["zstd_offset"])[0]


def test_a_library_shipped_twice_is_stored_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The real gafime-rocm library (one compressed CCOB v3 bundle, 13 ISAs) twice in a
    wheel, under two names, and split: each target's archive holds its two entries in one
    frame, both read back (HRX's rules, ours) as the code object the spec decoder finds."""
    from tests.pypi_inputs import GAFIME, fat_members, independent_code_objects, pypi_wheel

    (lib,) = fat_members(pypi_wheel(GAFIME), tmp_path / "gafime")
    expected = independent_code_objects(lib)
    members = [
        Member("demo/__init__.py", b""),
        Member("demo/lib/libgafime_rocm.so", lib, executable=True),
        Member("demo/lib64/libgafime_rocm.so", lib, executable=True),
    ]
    wheel = write_wheel(
        tmp_path / "in", dist_name="demo", version=VERSION, tag=TAG, members=members,
        metadata=metadata("demo"),
    ).path  # fmt: skip
    out = tmp_path / "out"
    argv = ["split-wheel", "--input", str(wheel), "--output-dir", str(out)]
    argv += ["--overlay-root", "demo/", "--device-package-prefix", "amd-demo"]
    assert main(argv) == 0, capsys.readouterr().err
    archives = _wheel_archives(out)
    assert len(archives) == len(expected) == 13
    found: collections.Counter[tuple[str, str]] = collections.Counter()
    for name, raw in archives.items():
        assert _frames(raw) == (2, 1), name
        path = tmp_path / "archives" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)
        read = hrx_read(path)
        with KpackArchive.open(path) as archive:
            assert {key: archive.read(*key) for key in archive} == read
        (first, second) = sorted(read)
        assert first[0] == "lib/libgafime_rocm.so#0" and second[0] == "lib64/libgafime_rocm.so#0"
        assert read[first] == read[second]
        found[(first[1], hashlib.sha256(read[first]).hexdigest())] += 1
    assert found == expected


@pytest.mark.parametrize("compression", ["zstd", "none"])
def test_split_artifacts_shares_equal_code_objects_of_two_binaries(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, compression: str
) -> None:
    """Two libraries of one artifact embedding the same bundle (and a third, different one):
    each target's archive stores two blobs for three entries, whatever the scheme."""
    require(shutil.which("gcc") is not None, "needs gcc")
    targets = ("gfx900", "gfx1030")
    bundles = [
        make_plain_bundle(
            [(GFX + t, fake_code_object(t, 9000, e_flags=0x30 + i)) for t in targets], align=8
        )
        for i in range(2)
    ]
    art = tmp_path / "artifacts" / "demo_lib_gfx90X-dcgpu"
    for name, bundle in (("liba.so", bundles[0]), ("libb.so", bundles[0]), ("libc.so", bundles[1])):
        lib = synthetic(tmp_path / "build" / name, "lib", pad(bundle), [0], kind="so")
        put(art, "s/stage", f"lib/{name}", lib)
    manifest(art, "s/stage")
    out = tmp_path / "out"
    argv = ["split-artifacts", "--artifact-dir", str(art), "--output-dir", str(out)]
    assert main([*argv, "--compression", compression]) == 0, capsys.readouterr().err
    archives = sorted(p for p in out.rglob("*.kpack") if p.is_file())
    assert len(archives) == 2
    for path in archives:
        assert _frames(path.read_bytes()) == (3, 2)
        read = hrx_read(path) if compression == "zstd" else None
        with KpackArchive.open(path) as archive:
            got = {key[0]: archive.read(*key) for key in archive}
        assert got["s/stage/lib/liba.so#0"] == got["s/stage/lib/libb.so#0"]
        assert got["s/stage/lib/liba.so#0"] != got["s/stage/lib/libc.so#0"]
        assert read is None or {k[0]: v for k, v in read.items()} == got
    for name in ("liba.so", "libb.so", "libc.so"):
        binary = next(out.glob(f"*_generic/s/stage/lib/{name}"))
        rc = main(["verify", str(binary), "--search-root", str(out)])
        assert rc == 0, capsys.readouterr().err
