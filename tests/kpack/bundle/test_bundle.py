"""kpack.bundle: plain and CCOB bundles, real and synthetic, checked against independent oracles.

Oracles: pyelftools (section extent, wrapper relocations), ``clang-offload-bundler-15``
(``--list``/``--unbundle``), the spec-table builders in ``bundle_fixtures`` and the
``zstandard``/``zlib`` decoders applied to the raw CCOB payload.
"""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import struct
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kpack.bundle import (
    Bundle,
    CodeObject,
    iter_bundles,
    make_ccob,
    make_plain_bundle,
    parse_bundle,
    target_of,
)
from kpack.bundle import _ccob as _bundle_ccob
from kpack.errors import BundleError, RocmPackagingError
from tests.conftest import require
from tests.kpack.bundle_fixtures import (
    AMDGCN,
    EM_AMDGPU,
    HOST,
    KERNEL_A,
    KERNEL_B,
    ROCRAND_FLAGS,
    ROCRAND_LIB,
    bundler_list,
    bundler_unbundle,
    compile_hip,
    compress,
    dump_fatbin,
    elf_header,
    fake_code_object,
    fatbin_extent,
    have_bundler,
    sample_bundle,
    section,
    spec_ccob,
    spec_plain_bundle,
    wrapper_targets,
)

VERSIONS = (1, 2, 3)
METHODS = ("zstd", "zlib")
HEADER_SIZE = {1: 20, 2: 24, 3: 32}


def targets(bundle: Bundle) -> list[str]:
    return [c.target for c in bundle.code_objects]


def payloads(bundle: Bundle) -> dict[str, bytes]:
    return {c.target: bytes(c.data) for c in bundle.code_objects}


# --- target ids ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("triple", "target"),
    [
        ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", "gfx90a:xnack+"),
        ("hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-", "gfx942:sramecc+:xnack-"),
        ("hipv4-amdgcn-amd-amdhsa--gfx9-4-generic", "gfx9-4-generic"),
        ("hip-amdgcn-amd-amdhsa-gfx906", "gfx906"),
        ("hip-amdgcn-amd-amdhsa-gfx90a:xnack-", "gfx90a:xnack-"),
        ("openmp-amdgcn-amd-amdhsa--gfx1100", "gfx1100"),
    ],
)
def test_target_of(triple: str, target: str) -> None:
    assert target_of(triple) == target


@pytest.mark.parametrize(
    "triple",
    [
        "hip-amdgcn-amd-amdhsa",
        "hipv4-amdgcn-amd-amdhsa--",
        "x",
        # target ids become file and directory names: nothing path-like is a target id
        "hipv4-amdgcn-amd-amdhsa--../../../../X",
        "hipv4-amdgcn-amd-amdhsa--gfx90a/../../x",
        "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+/x",
        "hipv4-amdgcn-amd-amdhsa--gfx90a\\x",
        "hip-amdgcn-amd-amdhsa-gfx906/..",
        "hipv4-amdgcn-amd-amdhsa--gfx" + "0" * 200,
        "hipv4-amdgcn-amd-amdhsa--GFX90A",
    ],
)
def test_target_of_rejects_triples_without_valid_target(triple: str) -> None:
    with pytest.raises(BundleError, match="no valid target id"):
        target_of(triple)


def test_legacy_single_dash_triples_are_kept() -> None:
    raw = spec_plain_bundle(
        [("hip-amdgcn-amd-amdhsa-gfx906", b"legacy"), (AMDGCN + "gfx900", b"x")]
    )
    bundle = parse_bundle(raw)
    assert targets(bundle) == ["gfx906", "gfx900"]
    assert payloads(bundle)["gfx906"] == b"legacy"


# --- plain bundles ------------------------------------------------------------------------


@pytest.mark.parametrize("align", [1, 16, 4096])
@pytest.mark.parametrize("host", [HOST, "host-x86_64-unknown-linux--", None])
def test_plain_writer_matches_spec_layout(align: int, host: str | None) -> None:
    entries = [
        (AMDGCN + t, fake_code_object(t, 100 + 7 * i)) for i, t in enumerate(["gfx900", "gfx1030"])
    ]
    ours = make_plain_bundle(entries, align=align, host_triple=host)
    assert ours == spec_plain_bundle(entries, align=align, host=host)
    bundle = parse_bundle(ours)
    assert (bundle.offset, bundle.end, bundle.compression, bundle.ccob_version) == (
        0,
        len(ours),
        None,
        None,
    )
    assert [c.triple for c in bundle.code_objects] == [t for t, _ in entries]
    for obj, (_, data) in zip(bundle.code_objects, entries, strict=True):
        assert obj.offset % align == 0 and obj.size == len(data)
        assert bytes(obj.data) == data == ours[obj.offset : obj.offset + obj.size]


def test_plain_data_is_a_view_into_the_buffer() -> None:
    raw = bytearray(sample_bundle(["gfx900"]))
    obj = parse_bundle(raw).code_objects[0]
    assert isinstance(obj.data, memoryview)
    raw[obj.offset] ^= 0xFF
    assert obj.data[0] == raw[obj.offset]


def test_bundle_at_an_offset_reports_relative_payload_offsets() -> None:
    raw = sample_bundle(["gfx900", "gfx1030"])
    buf = bytes(100) + raw + bytes(50)
    bundle = parse_bundle(buf, 100, name="x")
    assert (bundle.offset, bundle.end) == (100, 100 + len(raw))
    assert [c.offset for c in bundle.code_objects] == [
        c.offset for c in parse_bundle(raw).code_objects
    ]


def test_clang_offload_bundler_reads_our_plain_bundle(tmp_path: Path) -> None:
    require(
        have_bundler(), "clang-offload-bundler-15 is not installed (apt-get install clang-tools-15)"
    )
    entries = [(AMDGCN + t, fake_code_object(t, 1000)) for t in ("gfx900", "gfx90a:xnack+")]
    path = tmp_path / "ours.bundle"
    path.write_bytes(make_plain_bundle(entries))
    assert sorted(bundler_list(path)) == sorted([HOST] + [t for t, _ in entries])
    for triple, data in entries:
        assert bundler_unbundle(path, triple, tmp_path / "x.co") == data


# --- CCOB ---------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("method", METHODS)
def test_ccob_from_spec_tables_parses(version: int, method: str) -> None:
    plain = sample_bundle(["gfx900", "gfx90a:xnack-", "gfx1030"], size=5000)
    raw = spec_ccob(plain, version=version, method=method)
    bundle = parse_bundle(raw + bytes(3), name="c.bin")
    assert (bundle.offset, bundle.end) == (0, len(raw))
    assert (bundle.compression, bundle.ccob_version) == (method, version)
    assert payloads(bundle) == payloads(parse_bundle(plain))
    assert [c.offset for c in bundle.code_objects] == [
        c.offset for c in parse_bundle(plain).code_objects
    ]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("method", METHODS)
def test_ccob_writer_fields_follow_the_spec(version: int, method: str) -> None:
    plain = sample_bundle(["gfx900", "gfx1030"], size=3000)
    raw = make_ccob(plain, version=version, method=method, level=3)
    assert raw == spec_ccob(plain, version=version, method=method)
    start = HEADER_SIZE[version]
    assert raw[:4] == b"CCOB"
    assert struct.unpack_from("<HH", raw, 4) == (version, {"zlib": 0, "zstd": 1}[method])
    size_fmt = {1: "<I", 2: "<I", 3: "<Q"}[version]
    if version > 1:
        assert struct.unpack_from(size_fmt, raw, 8)[0] == len(raw)
    uncompressed_at = {1: 8, 2: 12, 3: 16}[version]
    assert struct.unpack_from(size_fmt, raw, uncompressed_at)[0] == len(plain)
    (digest,) = struct.unpack_from("<Q", raw, start - 8)
    assert digest.to_bytes(8, "little") == hashlib.md5(plain).digest()[:8]
    if method == "zstd":
        decoded = zstandard.ZstdDecompressor().decompress(raw[start:])
        assert zstandard.get_frame_parameters(raw[start:]).content_size == len(plain)
    else:
        decoded = zlib.decompress(raw[start:])
    assert decoded == plain


def test_ccob_writer_rejects_bad_arguments() -> None:
    for kwargs in (
        {"version": 4},
        {"method": "lz4"},
        {"level": 0},
        {"method": "zlib", "level": 10},
    ):
        with pytest.raises(ValueError):
            make_ccob(b"x", **kwargs)


@pytest.mark.parametrize("gap", [0, 7])
def test_ccob_payload_with_two_plain_bundles(gap: int) -> None:
    first = sample_bundle(["gfx900", "gfx1030"])
    second = sample_bundle(["gfx90a:xnack+"], size=700)
    plain = first + bytes(gap) + second
    bundle = parse_bundle(make_ccob(plain, version=3))
    assert targets(bundle) == ["gfx900", "gfx1030", "gfx90a:xnack+"]
    for obj in bundle.code_objects:
        assert bytes(obj.data) == plain[obj.offset : obj.offset + obj.size]
    assert bundle.code_objects[2].offset > len(first) + gap


def test_many_bundles_with_padding_in_one_section() -> None:
    bundles = [sample_bundle(["gfx900", "gfx1030"])]
    expected = [["gfx900", "gfx1030"]]
    for i, (version, method) in enumerate((v, m) for v in VERSIONS for m in METHODS):
        arch = f"gfx90{i}"
        bundles.append(
            make_ccob(sample_bundle([arch], size=1000 + i), version=version, method=method)
        )
        expected.append([arch])
    bundles.append(sample_bundle(["gfx942"]))
    expected.append(["gfx942"])
    raw, starts = section(*bundles, align=4096)
    raw += bytes(4096)
    walked = list(iter_bundles(raw, name="fatbin"))
    assert [b.offset for b in walked] == starts
    assert [targets(b) for b in walked] == expected
    assert [b.end - b.offset for b in walked] == [len(b) for b in bundles]
    assert [b.compression for b in walked] == [None, *(m for _ in VERSIONS for m in METHODS), None]


def test_back_to_back_ccobs_and_leading_padding() -> None:
    one = make_ccob(sample_bundle(["gfx900"]), version=1, method="zstd")
    two = make_ccob(sample_bundle(["gfx1030"]), version=1, method="zlib")
    walked = list(iter_bundles(bytes(10) + one + two, name="s"))
    assert [(b.offset, b.end) for b in walked] == [
        (10, 10 + len(one)),
        (10 + len(one), 10 + len(one) + len(two)),
    ]


@pytest.mark.parametrize(("chunk", "size"), [(7, 20_000), (1 << 20, 3 << 20)])
@pytest.mark.parametrize("method", METHODS)
def test_v1_end_is_found_by_decoding(
    monkeypatch: pytest.MonkeyPatch, chunk: int, size: int, method: str
) -> None:
    """v1 has no total_size: the walk must stop exactly where the compressed stream ends."""
    monkeypatch.setattr(_bundle_ccob, "_ZLIB_CHUNK", chunk)
    first = spec_ccob(sample_bundle(["gfx900"], size=size), version=1, method=method)
    second = spec_ccob(sample_bundle(["gfx1030"]), version=1, method=method)
    walked = list(iter_bundles(first + second + bytes(3) + first, name="v1"))
    assert [(b.offset, b.end) for b in walked] == [
        (0, len(first)),
        (len(first), len(first) + len(second)),
        (len(first) + len(second) + 3, 2 * len(first) + len(second) + 3),
    ]
    assert [targets(b) for b in walked] == [["gfx900"], ["gfx1030"], ["gfx900"]]
    assert walked[0].code_objects[0].size == size


def test_empty_and_all_zero_sections_have_no_bundles() -> None:
    assert list(iter_bundles(b"", name="s")) == []
    assert list(iter_bundles(bytes(8192), name="s")) == []


def test_walk_is_zero_copy_on_a_large_section() -> None:
    big = [(AMDGCN + t, bytes([i + 1]) * (16 << 20)) for i, t in enumerate(("gfx900", "gfx1030"))]
    raw, _ = section(make_plain_bundle(big), bytes(3 << 20), make_plain_bundle(big), align=4096)
    buf = bytearray(raw)
    tracemalloc.start()
    try:
        walked = list(iter_bundles(memoryview(buf), name="big"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [len(b.code_objects) for b in walked] == [2, 2]
    assert peak < 256 << 10, f"walking a {len(buf) >> 20} MiB section allocated {peak} bytes"


def test_decompression_is_bounded_by_the_declared_size() -> None:
    bomb = sample_bundle(["gfx900"]) + bytes(64 << 20)
    payload = zstandard.ZstdCompressor(level=3, write_content_size=False).compress(bomb)
    raw = spec_ccob(bomb, payload=payload, uncompressed=4096)
    tracemalloc.start()
    try:
        with pytest.raises(BundleError, match="more than uncompressed_size 4096"):
            parse_bundle(raw, name="bomb")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20


# --- real inputs --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rocrand(debian_package: Callable[[str], Path]) -> Path:
    return debian_package("librocrand1") / ROCRAND_LIB


@pytest.fixture
def mapped() -> Iterator[Callable[[Path], memoryview]]:
    """Map a file's ``.hip_fatbin`` (extent from pyelftools) as a read-only memoryview."""
    opened: list[tuple[mmap.mmap, memoryview]] = []

    def open_section(path: Path) -> memoryview:
        offset, size, _ = fatbin_extent(path)
        with path.open("rb") as f:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        view = memoryview(mm)[offset : offset + size]
        opened.append((mm, view))
        return view

    yield open_section
    for mm, view in opened:
        view.release()
        with contextlib.suppress(BufferError):  # a failed test may still hold views
            mm.close()


def check_against_bundler(bundle: Bundle, bundle_file: Path, tmp_path: Path) -> None:
    require(have_bundler(), "clang-offload-bundler-15 / objcopy are not installed")
    listed = bundler_list(bundle_file)
    assert sorted(t for t in listed if not t.startswith("host")) == sorted(
        c.triple for c in bundle.code_objects
    )
    for obj in bundle.code_objects:
        expected = bundler_unbundle(bundle_file, obj.triple, tmp_path / "x.co")
        assert bytes(obj.data) == expected, obj.triple


@pytest.mark.real
def test_rocrand_has_one_bundle_with_seven_code_objects(
    rocrand: Path, mapped: Callable[[Path], memoryview]
) -> None:
    view = mapped(rocrand)
    walked = list(iter_bundles(view, name=str(rocrand)))
    assert len(walked) == 1
    (bundle,) = walked
    assert bundle.offset == 0 and bundle.compression is None
    assert sorted(targets(bundle)) == sorted(ROCRAND_FLAGS)
    assert all(c.triple == AMDGCN + c.target for c in bundle.code_objects)
    assert bytes(view[bundle.end :]).strip(b"\0") == b""
    for obj in bundle.code_objects:
        osabi, abi_version, machine, flags = elf_header(bytes(obj.data[:64]))
        assert (osabi, abi_version, machine) == (64, 2, EM_AMDGPU), obj.target
        assert flags == ROCRAND_FLAGS[obj.target], obj.target
        assert obj.offset % 4096 == 0


@pytest.mark.real
def test_rocrand_code_objects_match_clang_offload_bundler(
    rocrand: Path, mapped: Callable[[Path], memoryview], tmp_path: Path
) -> None:
    require(have_bundler(), "clang-offload-bundler-15 / objcopy are not installed")
    dump = dump_fatbin(rocrand, tmp_path / "fatbin.bin")
    (bundle,) = iter_bundles(mapped(rocrand), name=str(rocrand))
    assert len(bundle.code_objects) == 7
    check_against_bundler(bundle, dump, tmp_path)


@pytest.fixture(scope="module")
def libk(hipcc: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    archs = ["gfx900", "gfx90a:xnack+", "gfx90a:xnack-", "gfx1030"]
    work = tmp_path_factory.mktemp("libk")
    return compile_hip(hipcc, work, {"k.hip": KERNEL_A}, archs, "libk.so")


@pytest.fixture(scope="module")
def libab(hipcc: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("libab")
    sources = {"a.hip": KERNEL_A, "b.hip": KERNEL_B}
    return compile_hip(hipcc, work, sources, ["gfx900", "gfx1030"], "libab.so")


@pytest.mark.compile
def test_hipcc_multi_arch_library(
    libk: Path, mapped: Callable[[Path], memoryview], tmp_path: Path
) -> None:
    view = mapped(libk)
    (bundle,) = iter_bundles(view, name=str(libk))
    assert sorted(targets(bundle)) == ["gfx1030", "gfx900", "gfx90a:xnack+", "gfx90a:xnack-"]
    assert wrapper_targets(libk) == [0]
    for obj in bundle.code_objects:
        assert elf_header(bytes(obj.data[:64]))[2] == EM_AMDGPU
    check_against_bundler(bundle, dump_fatbin(libk, tmp_path / "fatbin.bin"), tmp_path)


@pytest.mark.compile
def test_hipcc_two_translation_units_give_two_padded_bundles(
    libab: Path, mapped: Callable[[Path], memoryview], tmp_path: Path
) -> None:
    view = mapped(libab)
    walked = list(iter_bundles(view, name=str(libab)))
    assert [b.offset for b in walked] == wrapper_targets(libab)
    assert len(walked) == 2
    first, second = walked
    assert second.offset > first.end, "expected zero padding between the two bundles"
    assert bytes(view[first.end : second.offset]).strip(b"\0") == b""
    for bundle in walked:
        assert sorted(targets(bundle)) == ["gfx1030", "gfx900"]
        # the bundler reads only the first bundle of a file, so give it each one on its own
        part = tmp_path / f"bundle-{bundle.offset}.bin"
        part.write_bytes(bytes(view[bundle.offset : bundle.end]))
        check_against_bundler(bundle, part, tmp_path)
    assert payloads(first) != payloads(second)


@pytest.mark.compile
def test_hipcc_bundle_recompressed_as_ccob_round_trips(
    libk: Path, mapped: Callable[[Path], memoryview]
) -> None:
    view = mapped(libk)
    (plain,) = iter_bundles(view, name="libk")
    raw_plain = bytes(view[plain.offset : plain.end])
    for version in VERSIONS:
        for method in METHODS:
            (ccob,) = iter_bundles(make_ccob(raw_plain, version=version, method=method), name="c")
            assert payloads(ccob) == payloads(plain)
            assert [c.triple for c in ccob.code_objects] == [c.triple for c in plain.code_objects]


def test_code_object_is_frozen() -> None:
    obj = CodeObject("t", "gfx900", 0, 0, b"")
    with pytest.raises(AttributeError):
        obj.size = 3  # type: ignore[misc]


# --- bad input: every case is a BundleError naming the buffer, offset and field -----------

PLAIN = sample_bundle(["gfx900", "gfx1030"], size=200)


def patched(raw: bytes, offset: int, fmt: str, *values: int) -> bytes:
    out = bytearray(raw)
    struct.pack_into(fmt, out, offset, *values)
    return bytes(out)


def entry_field(raw: bytes, index: int) -> int:
    """Offset of entry ``index``'s record in a plain bundle (host entry is index 0)."""
    pos = 32
    for _ in range(index):
        (triple_len,) = struct.unpack_from("<Q", raw, pos + 16)
        pos += 24 + triple_len
    return pos


def bad(name: str, raw: bytes) -> tuple[str, bytes]:
    return name, raw


BAD_BUNDLES = [
    ("truncated header", PLAIN[:30], "truncated header"),
    ("entry table cut short", PLAIN[:40], "num_entries 3 cannot fit"),
    ("truncated entry table", PLAIN[:104], "runs past the end of the buffer"),
    ("truncated payload", PLAIN[:-1], "runs past the end"),
    ("num_entries absurd", patched(PLAIN, 24, "<Q", 1 << 60), "num_entries"),
    ("num_entries one too many", patched(PLAIN, 24, "<Q", 4), "entry[3]"),
    ("offset beyond section", patched(PLAIN, entry_field(PLAIN, 1), "<Q", 1 << 40), "entry[1]"),
    ("size beyond section", patched(PLAIN, entry_field(PLAIN, 2) + 8, "<Q", 1 << 63), "entry[2]"),
    ("triple_len absurd", patched(PLAIN, entry_field(PLAIN, 1) + 16, "<Q", 1 << 62), "triple_len"),
    (
        "overlapping entries",
        patched(
            PLAIN,
            entry_field(PLAIN, 2),
            "<Q",
            struct.unpack_from("<Q", PLAIN, entry_field(PLAIN, 1))[0] + 8,
        ),
        "overlaps",
    ),
    (
        "payload inside header",
        patched(PLAIN, entry_field(PLAIN, 1), "<Q", 8),
        "inside the bundle header",
    ),
    ("non-ascii triple", PLAIN.replace(b"gfx900", b"gfx9\xff0"), "not ASCII"),
    ("no magic", b"__CLANG_OFFLOAD_BUNDLX__" + PLAIN[24:], "no bundle magic"),
    ("ccob version 4", spec_ccob(PLAIN, version=4), "CCOB version 4 is not supported"),
    ("ccob version 0", spec_ccob(PLAIN, version=0), "CCOB version 0"),
    ("ccob method 7", spec_ccob(PLAIN, method_id=7), "CCOB method 7 is unknown"),
    ("ccob truncated header", spec_ccob(PLAIN, version=3)[:20], "truncated CCOB v3 header"),
    ("ccob total beyond buffer", spec_ccob(PLAIN, total=1 << 31), "total_size"),
    ("ccob total inside header", spec_ccob(PLAIN, version=3, total=16), "total_size"),
    (
        "ccob declared too small",
        spec_ccob(PLAIN, uncompressed=len(PLAIN) - 1),
        "more than uncompressed_size",
    ),
    (
        "ccob declared too large",
        spec_ccob(PLAIN, uncompressed=len(PLAIN) + 1),
        "not uncompressed_size",
    ),
    (
        "zlib declared too small",
        spec_ccob(PLAIN, method="zlib", uncompressed=10),
        "more than uncompressed_size",
    ),
    (
        "zlib declared too large",
        spec_ccob(PLAIN, method="zlib", uncompressed=len(PLAIN) + 9),
        "not uncompressed_size",
    ),
    ("ccob absurd declared size", spec_ccob(PLAIN, version=3, uncompressed=1 << 40), "exceeds"),
    ("ccob impossible ratio", spec_ccob(PLAIN, version=3, uncompressed=2 << 30), "impossible"),
    ("zstd frame truncated", spec_ccob(PLAIN)[:-5], "total_size"),
    ("zstd frame cut, total adjusted", spec_ccob(PLAIN, payload=spec_ccob(PLAIN)[24:-5]), "zstd"),
    ("zstd frame corrupt", spec_ccob(PLAIN, payload=b"\x28\xb5\x2f\xfd" + bytes(40)), "zstd"),
    ("zstd trailing bytes", spec_ccob(PLAIN, payload=spec_ccob(PLAIN)[24:] + b"junk!junk"), "zstd"),
    (
        "zlib trailing bytes",
        spec_ccob(PLAIN, method="zlib", payload=zlib.compress(PLAIN) + b"xx"),
        "follow the zlib stream",
    ),
    ("zlib corrupt", spec_ccob(PLAIN, method="zlib", payload=b"\x78\x9c" + bytes(30)), "zlib"),
    (
        "zlib v1 truncated",
        spec_ccob(PLAIN, version=1, method="zlib")[:-4],
        "zlib payload is truncated",
    ),
    ("v1 zstd truncated", spec_ccob(PLAIN, version=1)[:-4], "runs past the compressed data"),
    ("nested ccob", spec_ccob(spec_ccob(PLAIN)), "nested CCOB"),
    ("ccob of garbage", spec_ccob(b"not a bundle" * 4), "decoded payload: non-zero byte 0x6e"),
    ("ccob of zeros", spec_ccob(bytes(64)), "holds no bundle"),
    ("ccob of bundle + garbage", spec_ccob(PLAIN + b"\x01"), "decoded payload: non-zero byte"),
    (
        "host-less target-less triple",
        spec_plain_bundle([("hipv4-amdgcn-amd-amdhsa--", b"x")]),
        "no valid target id",
    ),
]


@pytest.mark.parametrize(
    ("raw", "needle"), [(r, n) for _, r, n in BAD_BUNDLES], ids=[i for i, _, _ in BAD_BUNDLES]
)
def test_bad_bundles_raise_bundle_error(raw: bytes, needle: str) -> None:
    buf = bytes(0x1000) + raw
    with pytest.raises(BundleError) as info:
        parse_bundle(buf, 0x1000, name="bad.bin")
    text = str(info.value)
    assert needle in text
    assert text.startswith("bad.bin: ") and "0x1000" in text
    with pytest.raises(BundleError):
        list(iter_bundles(buf, name="bad.bin"))


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        (PLAIN + bytes(5) + b"\x01" + bytes(10) + PLAIN, "non-zero byte 0x01 at 0x"),
        (PLAIN + b"CCO", "non-zero byte 0x43"),
        (PLAIN + bytes(100) + b"\xff", "non-zero byte 0xff"),
        (b"garbage" + PLAIN, "non-zero byte 0x67 at 0x0"),
    ],
)
def test_garbage_between_bundles(raw: bytes, needle: str) -> None:
    with pytest.raises(BundleError, match=needle) as info:
        list(iter_bundles(raw, name="sec"))
    assert str(info.value).startswith("sec: ")


def test_offset_outside_buffer() -> None:
    with pytest.raises(BundleError, match="outside the buffer"):
        parse_bundle(PLAIN, len(PLAIN))


# --- property: mutated and trimmed inputs raise nothing but our own errors -----------------

INTERESTING = (
    0,
    1,
    23,
    24,
    0x7F,
    0xFF,
    0xFFFF,
    0xFFFFFFFF,
    1 << 31,
    1 << 32,
    1 << 63,
    (1 << 64) - 1,
)
FIELD_FORMATS = ("<B", "<H", "<I", "<Q")


def synthetic_seeds() -> list[bytes]:
    plain = sample_bundle(["gfx900", "gfx1030"], size=120)
    seeds = [plain, section(plain, plain, align=64)[0]]
    for version in VERSIONS:
        for method in METHODS:
            seeds.append(make_ccob(plain + bytes(5) + plain, version=version, method=method))
    seeds.append(section(seeds[2], plain, seeds[-1], align=32)[0])
    return seeds


SEEDS = synthetic_seeds()


@st.composite
def mutations(draw: st.DrawFn, seed: bytes, window: int | None = None) -> bytes:
    """``seed`` with a few bytes or integer fields overwritten, optionally trimmed."""
    buf = bytearray(seed)
    limit = len(buf) if window is None else min(window, len(buf))
    for _ in range(draw(st.integers(0, 4))):
        fmt = draw(st.sampled_from(FIELD_FORMATS))
        width = struct.calcsize(fmt)
        pos = draw(st.integers(0, max(0, limit - width)))
        value = draw(st.sampled_from(INTERESTING) | st.integers(0, 1 << 16))
        struct.pack_into(fmt, buf, pos, value & ((1 << (8 * width)) - 1))
    if draw(st.booleans()):
        del buf[draw(st.integers(0, len(buf))) :]
    return bytes(buf)


def exercise(buf: bytes | memoryview) -> None:
    """Parse and walk ``buf``; anything but RocmPackagingError escapes and fails the test."""
    try:
        bundle = parse_bundle(buf, 0, name="fuzz")
        assert 0 < bundle.end <= len(buf)
    except RocmPackagingError:
        pass
    try:
        for bundle in iter_bundles(buf, name="fuzz"):
            assert bundle.offset < bundle.end <= len(buf)
            for obj in bundle.code_objects:
                assert len(obj.data) == obj.size
    except RocmPackagingError:
        pass


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(SEEDS).flatmap(mutations))
def test_property_synthetic_bundles(buf: bytes) -> None:
    exercise(buf)


@pytest.mark.real
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_property_real_rocrand_bundle(rocrand_fatbin: bytes, data: st.DataObject) -> None:
    exercise(data.draw(mutations(rocrand_fatbin, window=600)))


@pytest.fixture(scope="module")
def rocrand_fatbin(rocrand: Path) -> bytes:
    offset, size, _ = fatbin_extent(rocrand)
    with rocrand.open("rb") as f:
        f.seek(offset)
        return f.read(size)


@pytest.mark.parametrize("method", METHODS)
def test_a_lying_uncompressed_size_allocates_nothing(method: str) -> None:
    """The declared size passes every plausibility check but is a lie: decoding streams,
    so memory follows the bytes that really decode, never the claim."""
    body = compress(PLAIN, method)
    ratio = 1 << 16 if method == "zstd" else 1 << 11
    declared = len(body) * ratio - 1
    assert declared > 64 * len(PLAIN)
    data = spec_ccob(PLAIN, version=3, method=method, uncompressed=declared)
    tracemalloc.start()
    try:
        with pytest.raises(BundleError, match=r"decodes to .*uncompressed_size"):
            list(iter_bundles(data, name="liar"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < declared // 4, f"peak {peak} bytes for a {declared}-byte claim"
