"""Copies of input members reuse the input's deflate stream (kpack.wheelfile._reuse).

The input is a wheel made by Python's ``zipfile`` (zlib's blocks, as most wheels on PyPI)
holding Debian's real librocrand. Edits like the splitter's (patches, a cut range, zeros,
appended bytes, an edit planned on another) are written through the wheel writer with the
input's stream to reuse; zlib and ISA-L, two independent decoders, must give back exactly
the edited bytes, and the output must hold long stretches of the input's compressed bytes
(the evidence that blocks were copied, not compressed anew).
"""

from __future__ import annotations

import base64
import bisect
import hashlib
import random
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from isal import isal_zlib

from kpack.elf import ElfEdit
from kpack.errors import PackagingError
from kpack.wheelfile import InputWheel, Member, Reuse, open_wheel, write_wheel
from kpack.wheelfile._reuse import WHOLE, plan_reuse
from kpack.wheelfile._zstream import zlib_library
from tests.kpack.wheel_fixtures import ROCRAND_LIB, TAG, VERSION, metadata, raw_member

pytestmark = pytest.mark.real

LIB = "torch/lib/librocrand.so.1"
DIST_INFO = f"torch-{VERSION}.dist-info"
WHEEL = b"Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: false\n"


def _zipfile_wheel(path: Path, members: dict[str, bytes], *, level: int) -> Path:
    """A wheel written by ``zipfile`` itself, with its RECORD."""
    record = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=level) as z:
        for name, data in members.items():
            z.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{name},sha256={digest.decode()},{len(data)}")
        record.append(f"{DIST_INFO}/RECORD,,")
        z.writestr(f"{DIST_INFO}/RECORD", "\n".join(record) + "\n")
    return path


@pytest.fixture(scope="module")
def library(debian_package: Callable[[str], Path]) -> bytes:
    return (debian_package("librocrand1") / ROCRAND_LIB).read_bytes()


@pytest.fixture(scope="module")
def source(library: bytes, tmp_path_factory: pytest.TempPathFactory) -> InputWheel:
    work = tmp_path_factory.mktemp("reuse")
    members = {
        "torch/__init__.py": b"",
        LIB: library,
        "torch/lib/data.bin": library[: 1 << 20],
        f"{DIST_INFO}/METADATA": metadata(),
        f"{DIST_INFO}/WHEEL": WHEEL,
    }
    path = _zipfile_wheel(work / f"torch-{VERSION}-{TAG}.whl", members, level=6)
    return open_wheel(path, work / "x", index=True)


def _entry(wheel: InputWheel, name: str):  # type: ignore[no-untyped-def]
    return next(e for e in wheel.entries if e.arcname == name)


def _write(dest: Path, members: list[Member], jobs: int = 2) -> Path:
    written = write_wheel(
        dest,
        dist_name="torch",
        version=VERSION,
        tag=TAG,
        members=members,
        metadata=metadata(),
        jobs=jobs,
    )
    return written.path


def _random_edit(rng: random.Random, source: Path | ElfEdit, size: int) -> ElfEdit:
    """Patches anywhere (the first bytes often: ELF and program headers), maybe a range cut
    out, zeros and appended bytes, as the transforms plan them."""
    removed = None
    if rng.random() < 0.7:
        lo = rng.randrange(0, size - 1)
        removed = (lo, min(size, lo + rng.randrange(1, size // 4)))
    patches: list[tuple[int, bytes]] = []
    pos = rng.choice((0, 0x40, rng.randrange(size // 2)))
    while pos < size and len(patches) < 3:
        length = rng.randrange(1, 64)
        if pos + length > size:
            break
        if removed is None or not (pos < removed[1] and removed[0] < pos + length):
            patches.append((pos, rng.randbytes(length)))
        pos += length + rng.randrange(1, size // 3)
    appended = rng.randbytes(rng.randrange(0, 5000))
    return ElfEdit(
        source, size, tuple(patches), appended, removed=removed, zero_fill=rng.randrange(0, 70000)
    )


@pytest.mark.skipif(zlib_library() is None, reason="needs a shared zlib (Z_BLOCK)")
@pytest.mark.parametrize("seed", range(12))
def test_an_edited_copy_reuses_the_input_blocks(
    source: InputWheel, tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    entry = _entry(source, LIB)
    assert entry.stream is not None and len(entry.stream.starts) > 100  # indexed: a large ELF
    extracted = source.root / LIB
    edit = _random_edit(rng, extracted, entry.size)
    if seed % 3 == 0:  # an edit planned on another (an RPATH edit on a transform's result)
        edit = _random_edit(rng, edit, edit.size)
    expected = b"".join(edit.iter_chunks())
    reuse = Reuse(entry.stream, edit.kept_runs())
    assert plan_reuse(reuse, edit.size), "the edit keeps most bytes: it must be spliced"
    member = Member(LIB, _source_of(edit), executable=True, reuse=reuse)
    out = _write(tmp_path, [Member("torch/__init__.py", b""), member], jobs=1 + seed % 2)

    with zipfile.ZipFile(out) as z:
        assert z.testzip() is None
        assert z.read(LIB) == expected
    raw = raw_member(out, LIB)
    assert zlib.decompress(raw, -15) == expected
    inflater = isal_zlib.decompressobj(-15)
    assert inflater.decompress(raw) == expected and inflater.eof and not inflater.unused_data
    # copied, not compressed anew: the input's compressed bytes of a block in the middle of
    # the longest kept run are there (blocks keep their bit offset in a byte when copied)
    original = raw_member(source.path, LIB)
    _, base, length = max(edit.kept_runs(), key=lambda r: r[2])
    starts, bits = entry.stream.starts, entry.stream.bits
    block = bisect.bisect_right(starts, base + length // 2)
    inside = original[bits[block] // 8 + 1 : bits[block + 1] // 8]
    assert len(inside) > 1000 and inside in raw


def _source_of(edit: ElfEdit):  # type: ignore[no-untyped-def]
    from kpack.wheelfile import Generated

    return Generated(edit.size, edit.iter_chunks)


def test_an_unchanged_member_is_copied_as_it_is(source: InputWheel, tmp_path: Path) -> None:
    entry = _entry(source, LIB)
    assert entry.stream is not None
    member = Member(LIB, source.root / LIB, reuse=Reuse.unchanged(entry.stream))
    out = _write(tmp_path, [member])
    assert raw_member(out, LIB) == raw_member(source.path, LIB)
    with zipfile.ZipFile(out) as z:
        assert z.testzip() is None


def test_what_does_not_pay_is_compressed_anew(source: InputWheel, tmp_path: Path) -> None:
    entry = _entry(source, LIB)
    assert entry.stream is not None
    small = _entry(source, "torch/__init__.py")
    assert small.stream is not None and plan_reuse(Reuse.unchanged(small.stream), 0) is None
    # an edit that appends a third as many new bytes: more than an eighth is new
    new = bytes(range(256)) * (entry.size // 768)
    edit = ElfEdit(source.root / LIB, entry.size, (), new)
    assert plan_reuse(Reuse(entry.stream, edit.kept_runs()), edit.size) is None
    member = Member(LIB, _source_of(edit), reuse=Reuse(entry.stream, edit.kept_runs()))
    out = _write(tmp_path, [member])
    with zipfile.ZipFile(out) as z:
        assert z.read(LIB) == b"".join(edit.iter_chunks())
    # a member under 16 MiB is not indexed, so an edit of it cannot be spliced
    data = _entry(source, "torch/lib/data.bin")
    assert data.stream is not None and data.stream.starts == ()


def test_an_input_changed_after_it_was_verified_is_an_error(library: bytes, tmp_path: Path) -> None:
    members = {LIB: library, f"{DIST_INFO}/METADATA": metadata(), f"{DIST_INFO}/WHEEL": WHEEL}
    path = _zipfile_wheel(tmp_path / f"torch-{VERSION}-{TAG}.whl", members, level=6)
    wheel = open_wheel(path, tmp_path / "x", index=True)
    entry = _entry(wheel, LIB)
    assert entry.stream is not None
    with open(path, "r+b") as f:  # one compressed byte changes behind the splitter's back
        f.seek(entry.stream.offset + entry.stream.size // 2)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 0x10]))
    member = Member(LIB, wheel.root / LIB, reuse=Reuse.unchanged(entry.stream))
    with pytest.raises(PackagingError, match="changed since it was verified") as info:
        _write(tmp_path / "out", [member])
    assert str(path) in str(info.value)
    assert not list((tmp_path / "out").glob("*.whl"))  # nothing half-written is left


@pytest.mark.skipif(zlib_library() is None, reason="needs a shared zlib (Z_BLOCK)")
def test_block_starts_are_where_zlib_put_them(library: bytes) -> None:
    """Full flushes end a block on a byte boundary at known offsets: the index has them."""
    comp = zlib.compressobj(6, zlib.DEFLATED, -15)
    raw, flushed = b"", []
    for start in range(0, 4 << 20, 1 << 20):
        raw += comp.compress(library[start : start + (1 << 20)])
        raw += comp.flush(zlib.Z_FULL_FLUSH)
        flushed.append((start + (1 << 20), 8 * len(raw)))
    raw += comp.flush()
    lib = zlib_library()
    assert lib is not None
    inflater = lib.inflater()
    out = b"".join(inflater.run([raw[i : i + 4096] for i in range(0, len(raw), 4096)], 1 << 16))
    assert out == library[: 4 << 20]
    assert inflater.consumed == len(raw) and inflater.end <= 8 * len(raw)
    starts = dict(inflater.blocks)
    for offset, bit in flushed[:-1]:
        assert starts.get(offset) == bit
    assert [b for _, b in inflater.blocks] == sorted({b for _, b in inflater.blocks})


def test_a_split_splices_a_large_pe_dll(
    library: bytes, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A Windows wheel's DLL of 20 MB (real ROCm 7 bundles from PyPI, real host bytes
    around them), split: the DLL in the host wheel is the input's deflate stream spliced,
    and decodes, by two decoders, to the transformed image."""
    from kpack import wheelsplit
    from tests.kpack.pe_fixtures import build_pe
    from tests.pypi_inputs import rocm7_bundles

    bundles = rocm7_bundles(tmp_path_factory.mktemp("jax"))
    dll = build_pe(tmp_path / "pe" / "fat.dll", bundles, host_data=library[: 20 << 20])
    members = {"torch/__init__.py": b"", "torch/lib/fat.dll": dll.read_bytes()}
    members |= {f"{DIST_INFO}/METADATA": metadata(), f"{DIST_INFO}/WHEEL": WHEEL}
    path = _zipfile_wheel(tmp_path / f"torch-{VERSION}-py3-none-win_amd64.whl", members, level=6)
    out = tmp_path / "out"
    wheelsplit.split_wheel(path, out, wheelsplit.SplitOptions("torch/", "amd-device", ()))
    host = next(out.glob("torch-*.whl"))
    raw = raw_member(host, "torch/lib/fat.dll")
    with zipfile.ZipFile(host) as z:
        content = z.read("torch/lib/fat.dll")
    assert len(content) > 20 << 20 and content != dll.read_bytes()  # transformed
    assert zlib.decompress(raw, -15) == content
    inflater = isal_zlib.decompressobj(-15)
    assert inflater.decompress(raw) == content and inflater.eof and not inflater.unused_data
    original = raw_member(path, "torch/lib/fat.dll")
    samples = [original[i : i + 512] for i in range(1 << 20, 4 << 20, 16384)]
    assert sum(sample in raw for sample in samples) >= len(samples) // 2


def test_blocks_are_indexed_only_when_asked(source: InputWheel, tmp_path: Path) -> None:
    """Other readers of a wheel (shard assembly) do not pay for zlib's slower inflate."""
    plain = open_wheel(source.path, tmp_path / "plain")
    entry = _entry(plain, LIB)
    assert entry.stream is not None and entry.stream.starts == ()
    assert entry.stream.raw_digest == _entry(source, LIB).stream.raw_digest  # type: ignore[union-attr]


def test_runs_that_go_back_or_overlap_are_refused(source: InputWheel) -> None:
    stream = _entry(source, LIB).stream
    assert stream is not None
    half = stream.length // 2
    for runs in (
        ((0, half, half), (half, 0, half)),  # the stream read backwards
        ((0, 0, half), (half - 1, half, 10)),  # overlapping in the member
        ((0, 0, stream.length + 1),),  # past the input member's end
        ((0, 0, 0),),
    ):
        with pytest.raises(PackagingError, match="internal error"):
            Reuse(stream, runs)


def test_runs_that_misname_the_bytes_are_an_error_not_a_corrupt_entry(
    source: InputWheel, tmp_path: Path
) -> None:
    """A transform whose kept runs were wrong (a byte changed that a run claims kept): the
    copied block would decode to the input's byte, so the write stops, naming the member."""
    entry = _entry(source, LIB)
    assert entry.stream is not None
    edit = ElfEdit(source.root / LIB, entry.size, ((entry.size // 2, b"\x5a"),), b"new")
    claimed = Reuse(entry.stream, ((0, 0, entry.size),))  # misses the patch
    assert plan_reuse(claimed, edit.size) not in (None, WHOLE)
    member = Member(LIB, _source_of(edit), reuse=claimed)
    with pytest.raises(PackagingError, match="differ from the input's block"):
        _write(tmp_path / "out", [member])
    assert not list((tmp_path / "out").glob("*.whl"))
