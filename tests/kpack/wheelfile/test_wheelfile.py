"""Tests for kpack.wheelfile: round trips, reproducibility, oracles (twine, pip, ...)."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import random
import shutil
import stat
import subprocess
import sys
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kpack.errors import PackagingError, UsageError
from kpack.wheelfile import Member, WheelResult, _engine, wheel_filename, write_wheel
from kpack.wheelfile import _deflate as _archive_deflate
from kpack.wheelfile import _zip as _zipwrite
from kpack.wheelfile._deflate import CHUNK_SIZE, WHOLE_MAX
from kpack.wheelfile._engine import deflate_chunk, deflate_whole
from tests.wheel_checks import CONFIG

TAG = "py3-none-linux_x86_64"
NAME = "rocm-sdk-core"
VERSION = "7.0.0rc1"
DIST_INFO = "rocm_sdk_core-7.0.0rc1.dist-info"


def metadata(name: str = NAME, version: str = VERSION) -> bytes:
    return (
        "Metadata-Version: 2.1\n"
        f"Name: {name}\n"
        f"Version: {version}\n"
        "Summary: Test wheel\n"
        "Description-Content-Type: text/markdown\n"
        "\n"
        "A test wheel.\n"
    ).encode()


def elf_like(size: int, seed: int = 1) -> bytes:
    """Compressible but not trivial bytes: random 'instructions' from a small vocabulary."""
    rng = random.Random(seed)
    vocab = [rng.randbytes(rng.randint(2, 12)) for _ in range(512)]
    out = bytearray(b"\x7fELF\x02\x01\x01")
    while len(out) < size:
        out += b"".join(rng.choices(vocab, k=4096))
        out += rng.randbytes(256)
    return bytes(out[:size])


def build(dest: Path, members: list[Member], **kwargs: object) -> WheelResult:
    options: dict[str, object] = {
        "dist_name": NAME,
        "version": VERSION,
        "tag": TAG,
        "metadata": metadata(),
    }
    options.update(kwargs)
    return write_wheel(dest, members=members, **options)  # type: ignore[arg-type]


def sample_members(tmp_path: Path) -> list[Member]:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    lib = src / "libamdhip64.so.7"
    lib.write_bytes(elf_like(300_000))
    tool = src / "hipcc"
    tool.write_bytes(b"#!/bin/sh\necho hipcc\n")
    return [
        Member("rocm_sdk_core/__init__.py", b"__version__ = '7.0.0rc1'\n"),
        Member("rocm_sdk_core/_cli.py", b"def hipcc() -> None:\n    print('hipcc ok')\n"),
        Member("_rocm_sdk_core/__init__.py", b""),
        Member("_rocm_sdk_core/lib/libamdhip64.so.7", lib),
        Member("_rocm_sdk_core/bin/hipcc", tool, executable=True),
        Member("_rocm_sdk_core/share/empty.txt", b""),
        Member("_rocm_sdk_core/share/kernels.kpack", b"KPAK" + bytes(4000)),
        Member("_rocm_sdk_core/share/gen.dat", lambda: iter([b"abc" * 1000, b"", b"xyz"])),
    ]


def expected_contents(members: list[Member]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for m in members:
        src = m.source
        if isinstance(src, Path):
            out[m.arcname] = src.read_bytes()
        elif isinstance(src, bytes):
            out[m.arcname] = src
        else:
            out[m.arcname] = b"".join(src())
    return out


def record_rows(zf: zipfile.ZipFile) -> list[list[str]]:
    text = zf.read(f"{DIST_INFO}/RECORD").decode()
    return list(csv.reader(io.StringIO(text)))


# --- names --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "version", "expected"),
    [
        ("rocm-sdk-core", "7.0.0rc1", "rocm_sdk_core-7.0.0rc1-py3-none-any.whl"),
        ("Rocm_SDK..Core", "7.0.0-RC1", "rocm_sdk_core-7.0.0rc1-py3-none-any.whl"),
        ("rocm", "7.1.0.dev0+abc", "rocm-7.1.0.dev0+abc-py3-none-any.whl"),
    ],
)
def test_wheel_filename_normalizes(name: str, version: str, expected: str) -> None:
    assert wheel_filename(name, version, "py3-none-any") == expected


@pytest.mark.parametrize(
    ("name", "version", "tag"),
    [
        ("-bad", "1.0", "py3-none-any"),
        ("ok", "not a version", "py3-none-any"),
        ("ok", "1.0", "py3-none"),
        ("ok", "1.0", "py3-none-linux x86"),
    ],
)
def test_wheel_filename_rejects(name: str, version: str, tag: str) -> None:
    with pytest.raises(PackagingError):
        wheel_filename(name, version, tag)


# --- round trip -----------------------------------------------------------------------------


def test_round_trip_contents_modes_and_layout(tmp_path: Path) -> None:
    members = sample_members(tmp_path)
    result = build(tmp_path / "dist", members, entry_points=b"[console_scripts]\nx = a:b\n")
    assert result.path == tmp_path / "dist" / "rocm_sdk_core-7.0.0rc1-py3-none-linux_x86_64.whl"
    assert result.size == result.path.stat().st_size
    assert stat.S_IMODE(result.path.stat().st_mode) == 0o644
    expected = expected_contents(members)
    with zipfile.ZipFile(result.path) as zf:
        assert zf.testzip() is None
        infos = zf.infolist()
        names = [i.filename for i in infos]
        payload = sorted(expected)
        dist_info = [
            f"{DIST_INFO}/METADATA",
            f"{DIST_INFO}/WHEEL",
            f"{DIST_INFO}/entry_points.txt",
            f"{DIST_INFO}/RECORD",
        ]
        assert names == payload + dist_info
        for info in infos:
            assert info.create_system == 3
            assert info.date_time == (1980, 1, 1, 0, 0, 0)
            assert info.flag_bits & 0x08 == 0  # no data descriptors
            mode = info.external_attr >> 16
            want = 0o100755 if info.filename.endswith("/hipcc") else 0o100644
            assert mode == want, info.filename
        for arcname, data in expected.items():
            assert zf.read(arcname) == data
        wheel_text = zf.read(f"{DIST_INFO}/WHEEL").decode()
        assert wheel_text == (
            "Wheel-Version: 1.0\nGenerator: rocm-python-packaging\n"
            "Root-Is-Purelib: false\nTag: py3-none-linux_x86_64\n"
        )
        assert zf.read(f"{DIST_INFO}/METADATA") == metadata()
        assert zf.read(f"{DIST_INFO}/entry_points.txt") == b"[console_scripts]\nx = a:b\n"
    assert result.file_count == len(names)
    assert result.uncompressed_bytes == sum(i.file_size for i in infos)


def test_record_hashes_match_hashlib(tmp_path: Path) -> None:
    result = build(tmp_path / "dist", sample_members(tmp_path))
    with zipfile.ZipFile(result.path) as zf:
        rows = record_rows(zf)
        assert [r[0] for r in rows] == zf.namelist()
        assert rows[-1] == [f"{DIST_INFO}/RECORD", "", ""]
        for path, digest, size in rows[:-1]:
            data = zf.read(path)
            want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            assert digest == "sha256=" + want.decode()
            assert int(size) == len(data)


def test_record_quotes_awkward_names(tmp_path: Path) -> None:
    members = [Member('pkg/a,b "c".txt', b"x"), Member("pkg/ünïcode.txt", b"y")]
    result = build(tmp_path, members)
    with zipfile.ZipFile(result.path) as zf:
        assert [r[0] for r in record_rows(zf)][:2] == ['pkg/a,b "c".txt', "pkg/ünïcode.txt"]
        assert zf.getinfo("pkg/ünïcode.txt").flag_bits & 0x800


# --- reproducibility ------------------------------------------------------------------------


def test_byte_identical_across_runs_and_jobs(tmp_path: Path) -> None:
    members = sample_members(tmp_path)
    big = tmp_path / "src" / "big.bin"
    big.write_bytes(elf_like(2 * CHUNK_SIZE + 12345, seed=7))
    members.append(Member("_rocm_sdk_core/lib/big.so", big))
    outputs = [
        build(tmp_path / f"out{i}", members, jobs=jobs).path.read_bytes()
        for i, jobs in enumerate([1, 2, 2, 3])
    ]
    assert all(out == outputs[0] for out in outputs)
    reordered = build(tmp_path / "rev", list(reversed(members)), jobs=2)
    assert reordered.path.read_bytes() == outputs[0]


def test_source_date_epoch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    epoch = 1_700_000_000
    monkeypatch.setenv("SOURCE_DATE_EPOCH", str(epoch))
    result = build(tmp_path / "env", [Member("a/b.py", b"x")])
    want = (2023, 11, 14, 22, 13, 20)
    with zipfile.ZipFile(result.path) as zf:
        assert {i.date_time for i in zf.infolist()} == {want}
    explicit = build(tmp_path / "explicit", [Member("a/b.py", b"x")], epoch=0)
    with zipfile.ZipFile(explicit.path) as zf:  # clamped to 1980
        assert {i.date_time for i in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    with pytest.raises(UsageError, match=r"SOURCE_DATE_EPOCH=.yesterday. is not an integer"):
        build(tmp_path / "bad", [Member("a/b.py", b"x")])


# --- stored or deflated ---------------------------------------------------------------------

MAGICS = {
    "zstd": b"\x28\xb5\x2f\xfd",
    "xz": b"\xfd7zXZ\x00",
    "gzip": b"\x1f\x8b\x08",
    "zip": b"PK\x03\x04",
    "bzip2": b"BZh9",
}


def _kpack(tmp_path: Path, scheme: str) -> bytes:
    """A real .kpack archive in ``scheme`` (our writer, as the splitters write them)."""
    from kpack.archive import KernelInput, write_kpack

    path = tmp_path / f"{scheme}.kpack"
    code = b"\x7fELF" + b"device code " * 3000
    kernels = [KernelInput(f"lib/x.so#{i}", "gfx942", code) for i in range(3)]
    write_kpack(path, kernels, group_name="x", gfx_arch_family="gfx942", scheme=scheme)  # type: ignore[arg-type]
    return path.read_bytes()


def test_kpack_archives_are_stored_only_when_compressed(tmp_path: Path) -> None:
    """zstd-per-kernel archives are stored; scheme-none ones (rocm-kpack's older splitter)
    are deflated like any other uncompressed member."""
    members = [
        Member("a/zstd.kpack", _kpack(tmp_path, "zstd-per-kernel")),
        Member("a/none.kpack", _kpack(tmp_path, "none")),
    ]
    result = build(tmp_path / "w", members)
    with zipfile.ZipFile(result.path) as zf:
        infos = {i.filename: i for i in zf.infolist()}
    assert infos["a/zstd.kpack"].compress_type == zipfile.ZIP_STORED
    none = infos["a/none.kpack"]
    assert none.compress_type == zipfile.ZIP_DEFLATED
    assert none.compress_size < none.file_size // 5


def test_stored_or_deflated_decisions(tmp_path: Path) -> None:
    text = b"hello world, " * 2000
    members = [Member(f"c/{k}.bin", magic + text) for k, magic in MAGICS.items()]
    members += [
        Member("d/text.txt", text),
        Member("d/forced_stored.txt", text, compress=False),
        Member("d/forced_deflated.bin", MAGICS["xz"] + text, compress=True),
        Member("d/random.bin", random.Random(3).randbytes(50_000)),
        Member("d/empty", b""),
        Member("d/bzh_text.txt", b"BZh is not bzip2 without a level " * 100),
    ]
    result = build(tmp_path, members)
    with zipfile.ZipFile(result.path) as zf:
        method = {i.filename: i.compress_type for i in zf.infolist()}
        for key in MAGICS:
            assert method[f"c/{key}.bin"] == zipfile.ZIP_STORED, key
        assert method["d/text.txt"] == zipfile.ZIP_DEFLATED
        assert method["d/forced_stored.txt"] == zipfile.ZIP_STORED
        assert method["d/forced_deflated.bin"] == zipfile.ZIP_DEFLATED
        assert method["d/random.bin"] == zipfile.ZIP_STORED  # deflate would grow it
        assert method["d/empty"] == zipfile.ZIP_STORED
        assert method["d/bzh_text.txt"] == zipfile.ZIP_DEFLATED
        assert method[f"{DIST_INFO}/RECORD"] == zipfile.ZIP_DEFLATED
        assert zf.testzip() is None


def test_compression_off_stores_everything(tmp_path: Path) -> None:
    members = [Member("a/x.txt", b"abc" * 10_000), Member("a/y.txt", b"q" * 100, compress=True)]
    result = build(tmp_path, members, compression=False)
    with zipfile.ZipFile(result.path) as zf:
        method = {i.filename: i.compress_type for i in zf.infolist()}
        assert method.pop("a/y.txt") == zipfile.ZIP_DEFLATED  # an explicit choice wins
        assert set(method.values()) == {zipfile.ZIP_STORED}
        assert zf.read("a/x.txt") == b"abc" * 10_000


@pytest.mark.parametrize("level", [0, 1, 9])
def test_levels(tmp_path: Path, level: int) -> None:
    data = elf_like(200_000)
    result = build(tmp_path, [Member("a/lib.so", data)], level=level)
    with zipfile.ZipFile(result.path) as zf:
        assert zf.read("a/lib.so") == data


# --- chunking -----------------------------------------------------------------------------


@pytest.mark.parametrize("joined", [True, False], ids=["libdeflate-joined", "zlib"])
def test_chunked_deflate_is_one_valid_stream(monkeypatch: pytest.MonkeyPatch, joined: bool) -> None:
    """Joined libdeflate chunks are not primed with the previous chunk's tail, so they are
    checked at the real chunk size; zlib's primed ones at a small one."""
    step = CHUNK_SIZE if joined else 100_000
    if not joined:
        monkeypatch.setattr(_engine, "joiner", lambda: None)
    data = elf_like(3 * step + 17)
    chunks = [data[i : i + step] for i in range(0, len(data), step)]
    parts = [
        deflate_chunk(c, chunks[i - 1][-32768:] if i else None, i == len(chunks) - 1, 6)
        for i, c in enumerate(chunks)
    ]
    stream = b"".join(parts)
    dec = zlib.decompressobj(-15)
    assert dec.decompress(stream) == data
    assert dec.eof and not dec.unused_data
    whole = zlib.compressobj(6, zlib.DEFLATED, -15)
    single = whole.compress(data) + whole.flush()
    assert len(stream) < len(single) * 1.01  # the engine's ratio holds across chunks


def test_whole_members_are_libdeflate_and_no_larger_than_stdlib_zlib() -> None:
    data = elf_like(2_000_000, seed=3)
    out = deflate_whole(data, 6)
    assert zlib.decompress(out, -15) == data
    comp = zlib.compressobj(6, zlib.DEFLATED, -15)
    assert len(out) <= (len(comp.compress(data)) + len(comp.flush())) * 1.01
    assert deflate_whole(data, 6) == out  # deterministic
    assert zlib.decompress(deflate_whole(data, 0), -15) == data


@pytest.fixture(params=["whole", "streamed", "streamed-zlib"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with the default split (members up to 64 MiB compressed whole), with
    every member over one byte streamed in joined libdeflate chunks, and streamed by the
    standard library's zlib (where no shared zlib can join libdeflate's chunks)."""
    if request.param.startswith("streamed"):
        monkeypatch.setattr(_archive_deflate, "WHOLE_MAX", 1)
    if request.param == "streamed-zlib":
        monkeypatch.setattr(_engine, "joiner", lambda: None)
    return str(request.param)


@pytest.mark.parametrize(
    "size", [0, 1, CHUNK_SIZE - 1, CHUNK_SIZE, CHUNK_SIZE + 1, 2 * CHUNK_SIZE, 2 * CHUNK_SIZE + 5]
)
def test_sizes_around_the_chunk_size(tmp_path: Path, size: int, engine: str) -> None:
    data = elf_like(size, seed=size) if size else b""
    path = tmp_path / "member.bin"
    path.write_bytes(data)
    members = [
        Member("a/file.bin", path),
        Member("a/bytes.bin", data),
        Member("a/gen.bin", lambda: iter([data[i : i + 999_999] for i in range(0, size, 999_999)])),
    ]
    result = build(tmp_path / "dist", members, jobs=2)
    with zipfile.ZipFile(result.path) as zf:
        assert zf.testzip() is None
        for name in ("a/file.bin", "a/bytes.bin", "a/gen.bin"):
            assert zf.read(name) == data
            info = zf.getinfo(name)
            assert info.file_size == size
            want = zipfile.ZIP_STORED if size <= 1 else zipfile.ZIP_DEFLATED  # deflate loses
            assert info.compress_type == want
    with zipfile.ZipFile(result.path) as zf:  # file and bytes sources give the same entry
        a, b = zf.getinfo("a/file.bin"), zf.getinfo("a/bytes.bin")
        assert (a.CRC, a.compress_size) == (b.CRC, b.compress_size)


def test_many_small_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str) -> None:
    monkeypatch.setattr(_archive_deflate, "CHUNK_SIZE", 64 * 1024)
    data = elf_like(1_000_003, seed=5)
    members = [Member("a/lib.so", data), Member("a/small.py", b"x = 1\n" * 50)]
    one = build(tmp_path / "one", members, jobs=1).path.read_bytes()
    two = build(tmp_path / "two", members, jobs=2).path.read_bytes()
    assert one == two
    with zipfile.ZipFile(io.BytesIO(one)) as zf:
        assert zf.read("a/lib.so") == data
        assert zf.testzip() is None


def test_generator_chunking_does_not_change_output(tmp_path: Path, engine: str) -> None:
    data = elf_like(CHUNK_SIZE + 300_000, seed=11)

    def pieces(step: int) -> Iterator[bytes]:
        yield b""
        for i in range(0, len(data), step):
            yield data[i : i + step]

    outs = []
    for i, step in enumerate([1 << 16, 777_777, len(data)]):
        members = [Member("a/gen.bin", lambda step=step: pieces(step))]  # type: ignore[misc]
        outs.append(build(tmp_path / str(i), members).path.read_bytes())
    assert outs[0] == outs[1] == outs[2]
    with zipfile.ZipFile(io.BytesIO(outs[0])) as zf:
        assert zf.read("a/gen.bin") == data


def test_zip64_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the limits lowered, sizes, offsets and counts take the ZIP64 paths."""
    monkeypatch.setattr(_zipwrite, "ZIP64_LIMIT", 5000)
    monkeypatch.setattr(_zipwrite, "ZIP_FILECOUNT_LIMIT", 5)
    members = [Member(f"a/f{i:02d}.bin", elf_like(3000 + 500 * i, seed=i)) for i in range(10)]
    members.append(Member("a/gen.bin", lambda: iter([b"g" * 7000])))
    result = build(tmp_path, members)
    with zipfile.ZipFile(result.path) as zf:
        assert zf.testzip() is None
        assert len(zf.infolist()) == 14
        for m in members:
            assert zf.read(m.arcname) == expected_contents([m])[m.arcname]
    if shutil.which("unzip"):  # Info-ZIP as a second reader
        check = run_tool("unzip", "-tq", str(result.path))
        assert check.returncode == 0, check.stdout + check.stderr


# --- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arcname",
    ["", "/abs/file", "a/../b", "../a", "./a", "a/./b", "a//b", "a/", "a\\b", "a/\x00b", "a/\nb"],
)
def test_bad_arcnames_rejected(arcname: str) -> None:
    with pytest.raises(PackagingError):
        Member(arcname, b"x")


def test_bad_source_rejected() -> None:
    with pytest.raises(PackagingError, match="content source"):
        Member("a/b", "not bytes")  # type: ignore[arg-type]


def test_duplicates_and_conflicts_reported_together(tmp_path: Path) -> None:
    members = [
        Member("a/b.py", b"1"),
        Member("a/b.py", b"2"),
        Member(f"{DIST_INFO}/METADATA", b"x"),
        Member(f"{DIST_INFO}/RECORD", b"x"),
        Member("a/c", b"file"),
        Member("a/c/d", b"under a file"),
        Member("other-1.0.dist-info/METADATA", b"x"),
    ]
    with pytest.raises(PackagingError) as info:
        build(tmp_path, members)
    problems = info.value.problems
    assert any("a/b.py: duplicate" in p for p in problems)
    assert any("METADATA: duplicate" in p for p in problems)
    assert any("RECORD" in p for p in problems)
    assert any("a/c: is also a directory" in p for p in problems)
    assert any("other-1.0.dist-info/: a second .dist-info" in p for p in problems)
    assert list(tmp_path.iterdir()) == []


def test_case_collisions_only_warn(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    result = build(tmp_path, [Member("a/README", b"1"), Member("a/readme", b"2")])
    assert "differ only in case" in caplog.text
    with zipfile.ZipFile(result.path) as zf:
        assert zf.read("a/readme") == b"2"


@pytest.mark.parametrize("tag", ["py3-none-win_amd64", "cp311-cp311-win32", "py3-none-win_arm64"])
def test_case_collisions_are_refused_in_a_windows_wheel(tmp_path: Path, tag: str) -> None:
    """NTFS keeps one file for ``README`` and ``readme`` (or ``A/x`` and ``a/y``'s
    directories): a Windows wheel holding both is refused, nothing written."""
    members = [Member(n, n.encode()) for n in ("a/README", "a/readme", "B/x", "b/y")]
    with pytest.raises(PackagingError, match="invalid wheel members") as info:
        build(tmp_path, members, tag=tag)
    assert info.value.problems == (
        "'a/README' and 'a/readme' differ only in case (one file on Windows)",
        "'B' and 'b' differ only in case (one file on Windows)",
    )
    assert list(tmp_path.iterdir()) == []


def test_metadata_must_agree(tmp_path: Path) -> None:
    with pytest.raises(PackagingError, match="METADATA") as info:
        build(tmp_path, [], metadata=metadata(name="other", version="1.0"))
    assert len(info.value.problems) == 2
    with pytest.raises(PackagingError, match="Metadata-Version"):
        build(tmp_path, [], metadata=b"Name: rocm-sdk-core\nVersion: 7.0.0rc1\n")
    build(tmp_path, [], metadata=metadata(name="ROCm_SDK.Core", version="7.0.0-rc1"))


def test_no_partial_file_on_error(tmp_path: Path) -> None:
    dest = tmp_path / "dist"
    good = build(dest, [Member("a/x.py", b"old")])
    before = good.path.read_bytes()

    def failing() -> Iterator[bytes]:
        yield elf_like(CHUNK_SIZE + 10)
        raise RuntimeError("generator broke")

    with pytest.raises(RuntimeError, match="generator broke"):
        build(dest, [Member("a/x.py", b"new"), Member("a/y.bin", failing)])
    assert sorted(p.name for p in dest.iterdir()) == [good.path.name]
    assert good.path.read_bytes() == before
    with pytest.raises(PackagingError, match="cannot read"):
        build(dest, [Member("a/missing.so", tmp_path / "missing.so")])
    with pytest.raises(PackagingError, match="cannot read"):
        build(dest, [Member("a/dir", tmp_path)])
    with pytest.raises(PackagingError, match="not a regular file"):
        build(dest, [Member("a/null", Path(os.devnull))])
    proc_file = Path("/proc/self/status")  # st_size 0, yet has content
    if proc_file.exists():
        with pytest.raises(PackagingError, match="changed while being read"):
            build(dest, [Member("a/status", proc_file)])
    with pytest.raises(PackagingError, match="yielded str"):
        build(dest, [Member("a/gen", lambda: iter(["text"]))])  # type: ignore[list-item]
    assert sorted(p.name for p in dest.iterdir()) == [good.path.name]


def test_invalid_options(tmp_path: Path) -> None:
    with pytest.raises(PackagingError, match="level"):
        build(tmp_path, [], level=10)
    with pytest.raises(PackagingError, match="jobs"):
        build(tmp_path, [], jobs=-1)
    with pytest.raises(PackagingError, match="generator"):
        build(tmp_path, [], generator="a\nb")
    assert list(tmp_path.iterdir()) == []


# --- oracles -----------------------------------------------------------------------------


def oracle_wheel(tmp_path: Path, *extra: Member) -> Path:
    """A wheel laid out as the builder lays out a runtime wheel: a pure package next to its
    platform package, each shared library once under its SONAME (its aliases, such as
    ``libamdhip64.so``, go to the devel tarball: ``build_tools/layout.py``)."""
    members = [*sample_members(tmp_path), *extra]
    entry_points = b"[console_scripts]\nhipcc = rocm_sdk_core._cli:hipcc\n"
    return build(tmp_path / "dist", members, entry_points=entry_points).path


def run_tool(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def test_twine_check(tmp_path: Path) -> None:
    proc = run_tool("twine", "check", "--strict", str(oracle_wheel(tmp_path)))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def check_wheel_contents(wheel: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """check-wheel-contents with the repository's configuration, as tests/wheel_checks.py
    runs it (``[tool.check-wheel-contents]`` of pyproject.toml: W004 and W010 ignored, each
    with its reason; every other check on)."""
    return run_tool(
        sys.executable, "-m", "check_wheel_contents", "--config", str(CONFIG), *flags, str(wheel)
    )


def test_check_wheel_contents(tmp_path: Path) -> None:
    """The config alone passes: W009 (several top-level entries) skips names that start
    with ``_``, so a pure package next to its ``_``-prefixed platform package is one entry.
    ``--toplevel`` also asserts the exact top-level entries (W201/W202)."""
    wheel = oracle_wheel(tmp_path)
    for flags in ((), ("--toplevel", "rocm_sdk_core,_rocm_sdk_core")):
        proc = check_wheel_contents(wheel, *flags)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "OK" in proc.stdout


def test_check_wheel_contents_is_live_for_duplicate_files(tmp_path: Path) -> None:
    """W002 is not ignored: a library shipped under its alias too (two equal files, as a
    runtime wheel without symlinks would hold them) fails, which is why the builder ships
    each library under its SONAME only."""
    lib = sample_members(tmp_path)[3].source
    wheel = oracle_wheel(tmp_path, Member("_rocm_sdk_core/lib/libamdhip64.so", lib))
    proc = check_wheel_contents(wheel)
    assert proc.returncode != 0 and "W002: Wheel contains duplicate files" in proc.stdout


def test_pip_installs_and_imports(tmp_path: Path) -> None:
    wheel = oracle_wheel(tmp_path)
    venv = tmp_path / "venv"
    made = run_tool(sys.executable, "-m", "venv", str(venv))
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-index", "--no-deps", str(wheel)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    probe = (
        "import rocm_sdk_core, _rocm_sdk_core, pathlib, os;"
        "p = pathlib.Path(_rocm_sdk_core.__file__).parent;"
        "print(rocm_sdk_core.__version__, os.access(p / 'bin' / 'hipcc', os.X_OK),"
        " (p / 'lib' / 'libamdhip64.so.7').stat().st_size)"
    )
    out = run_tool(str(python), "-c", probe)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["7.0.0rc1", "True", "300000"]
    script = run_tool(str(venv / "bin" / "hipcc"))
    assert script.stdout.strip() == "hipcc ok"
    uninstall = run_tool(str(python), "-m", "pip", "uninstall", "-y", NAME)
    assert uninstall.returncode == 0, uninstall.stdout + uninstall.stderr


# --- large (opt-in) ------------------------------------------------------------------------

_LARGE_CHILD = """
import json, sys, time
from pathlib import Path
from kpack.wheelfile import Member, write_wheel
src, dest = Path(sys.argv[1]), Path(sys.argv[2])
meta = b"Metadata-Version: 2.1\\nName: rocm-sdk-libraries\\nVersion: 1.0\\n"
start = time.perf_counter()
result = write_wheel(dest, dist_name="rocm-sdk-libraries", version="1.0",
                     tag="py3-none-linux_x86_64", metadata=meta,
                     members=[Member("_rocm_sdk_libraries/lib/" + src.name, src)])
wall = time.perf_counter() - start
hwm = [l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmHWM")]
print(json.dumps({"path": str(result.path), "wall": wall, "hwm_kb": int(hwm[0].split()[1])}))
"""


@pytest.mark.large
def test_single_1_31_gb_member_stays_under_400_mb(
    tmp_path: Path, debian_package: Callable[[str], Path]
) -> None:
    """The real 1.31 GB librocsparse.so streams through in bounded memory, correctly."""
    if os.environ.get("ROCM_PACKAGING_LARGE") != "1":
        pytest.skip("set ROCM_PACKAGING_LARGE=1 to run (downloads librocsparse0)")
    root = debian_package("librocsparse0")
    src = max(root.rglob("librocsparse.so.*"), key=lambda p: p.stat().st_size)
    assert src.stat().st_size > 1_300_000_000
    repo = Path(__file__).resolve().parents[3]
    proc = subprocess.run(
        [sys.executable, "-c", _LARGE_CHILD, str(src), str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["hwm_kb"] <= 400 * 1024, report
    digest = hashlib.sha256()
    with zipfile.ZipFile(report["path"]) as zf, zf.open(zf.namelist()[0]) as member:
        while block := member.read(8 << 20):  # zipfile checks the CRC at the end
            digest.update(block)
        rows = record_rows_for(zf)
    source_digest = hashlib.sha256()
    with src.open("rb") as handle:
        while block := handle.read(8 << 20):
            source_digest.update(block)
    want = source_digest.digest()
    assert digest.digest() == want
    b64 = base64.urlsafe_b64encode(want).rstrip(b"=").decode()
    assert rows[0][1] == f"sha256={b64}"


def record_rows_for(zf: zipfile.ZipFile) -> list[list[str]]:
    name = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
    return list(csv.reader(io.StringIO(zf.read(name).decode())))


# --- generated content of a known size ---------------------------------------------------


def test_generated_content_of_known_size_is_written_like_a_file(tmp_path: Path) -> None:
    """A large member made on demand with its size declared gives the bytes of the same
    content from a file, and is streamed (its size is planned, not discovered)."""
    from kpack.wheelfile import Generated

    data = elf_like(WHOLE_MAX + 3 * CHUNK_SIZE + 5)
    (tmp_path / "lib.so").write_bytes(data)

    def pieces() -> Iterator[bytes | memoryview]:
        view = memoryview(data)
        for start in range(0, len(data), 999_983):
            yield view[start : start + 999_983]

    from_file = build(tmp_path / "a", [Member("rocm_sdk_core/lib.so", tmp_path / "lib.so")])
    made = build(tmp_path / "b", [Member("rocm_sdk_core/lib.so", Generated(len(data), pieces))])
    assert made.path.read_bytes() == from_file.path.read_bytes()


@pytest.mark.parametrize("delta", [-1, 1])
def test_generated_content_of_another_size_is_refused(tmp_path: Path, delta: int) -> None:
    from kpack.wheelfile import Generated

    data = b"x" * 1000
    member = Member("rocm_sdk_core/x.bin", Generated(len(data) + delta, lambda: iter([data])))
    with pytest.raises(PackagingError, match="declared"):
        build(tmp_path / "out", [member])
    assert not list((tmp_path / "out").glob("*.whl"))
