"""kpack.archive: ``.kpack`` v1 writer and reader, checked against a reader written from the spec.

The oracle (``bundle_fixtures.read_kpack_by_spec``) parses header, blob area and TOC with
``struct``/``msgpack``/``zstandard`` directly; ``spec_kpack`` builds archives the way
rocm-kpack's writers lay them out (insertion-order ordinals, optional ``compression_scheme``).
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import re
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import msgpack
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kpack import archive
from kpack.archive import (
    MAX_ARCHIVE_BYTES,
    KernelInput,
    KpackArchive,
    StoredKernel,
    lay_out_kpack,
    stored_bound,
    write_kpack,
)
from kpack.archive import _write as _archive_write
from kpack.archive._write import FrameWriter, compress_frame, compressor
from kpack.bundle import iter_bundles
from kpack.errors import ArchiveError
from tests.kpack.bundle_fixtures import (
    ROCRAND_LIB,
    compress,
    fatbin_extent,
    read_kpack_by_spec,
    spec_kpack,
)
from tests.kpack.hrx_reader import hrx_read

Scheme = Literal["none", "zstd-per-kernel"]
SCHEMES: tuple[Scheme, ...] = ("none", "zstd-per-kernel")
TOC_KEYS = [
    "format_version",
    "group_name",
    "gfx_arch_family",
    "gfx_arches",
    "toc",
    "compression_scheme",
]


def kernel_bytes(seed: int, size: int) -> bytes:
    """Half random, half repetitive: compresses, but not to nothing."""
    rng = random.Random(seed)
    head = rng.randbytes(size // 2)
    return head + (b"s_load_dwordx4 " * (size // 30 + 1))[: size - len(head)]


def sample_kernels() -> list[KernelInput]:
    kernels = []
    for n, path in enumerate(["lib/librocblas.so.5#0", "lib/librocblas.so.5#1", "bin/app#0"]):
        for m, target in enumerate(["gfx942", "gfx942:xnack+", "gfx90a:xnack-"]):
            meta = {"target": f"hipv4-amdgcn-amd-amdhsa--{target}", "source_prefix": "stage"}
            data = kernel_bytes(10 * n + m, 1000 + 777 * n + 13 * m)
            kernels.append(KernelInput(path, target, data, meta if m else None))
    kernels.append(KernelInput("lib/tiny.so#0", "gfx942", b"\x7fELF"))
    return kernels


def write(tmp_path: Path, kernels: list[KernelInput], name: str = "a.kpack", **kw: Any) -> Path:
    path = tmp_path / name
    write_kpack(path, kernels, group_name="blas_lib", gfx_arch_family="gfx942", **kw)
    return path


# --- round trip ---------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", SCHEMES)
def test_round_trip(tmp_path: Path, scheme: Scheme) -> None:
    kernels = sample_kernels()
    path = tmp_path / "blas_lib_gfx942.kpack"
    summary = write_kpack(
        path, kernels, group_name="blas_lib", gfx_arch_family="gfx942", scheme=scheme
    )
    assert summary.path == path and summary.size == path.stat().st_size
    assert summary.kernel_count == len(kernels)
    assert summary.original_bytes == sum(len(k.data) for k in kernels)
    assert summary.gfx_arches == ("gfx90a:xnack-", "gfx942", "gfx942:xnack+")
    with KpackArchive.open(path) as kp:
        assert (kp.group_name, kp.gfx_arch_family, kp.scheme) == ("blas_lib", "gfx942", scheme)
        assert kp.gfx_arches == summary.gfx_arches
        assert kp.keys() == sorted((k.binary_key, k.target) for k in kernels)
        assert list(kp) == kp.keys() and len(kp) == len(kernels)
        for kernel in kernels:
            entry = kp.entry(kernel.binary_key, kernel.target)
            assert entry.original_size == len(kernel.data)
            assert entry.metadata == kernel.metadata
            assert kp.read(kernel.binary_key, kernel.target) == kernel.data
        kp.verify()
    # the independent reader agrees, byte for byte
    toc, stored = read_kpack_by_spec(path.read_bytes())
    assert stored == {(k.binary_key, k.target): bytes(k.data) for k in kernels}
    expected_keys = TOC_KEYS + (["blobs"] if scheme == "none" else ["zstd_offset", "zstd_size"])
    assert list(toc) == expected_keys
    assert toc["compression_scheme"] == scheme
    for kernel in kernels:
        assert toc["toc"][kernel.binary_key][kernel.target]["original_size"] == len(kernel.data)
        assert toc["toc"][kernel.binary_key][kernel.target]["type"] == "hsaco"


def test_ordinals_follow_sorted_keys_then_targets(tmp_path: Path) -> None:
    path = write(tmp_path, sample_kernels())
    toc, _ = read_kpack_by_spec(path.read_bytes())
    flat = sorted(
        (entry["ordinal"], key, target)
        for key, targets in toc["toc"].items()
        for target, entry in targets.items()
    )
    assert [o for o, _, _ in flat] == list(range(len(flat)))
    assert [(k, t) for _, k, t in flat] == sorted((k, t) for _, k, t in flat)


def test_reference_example_shape_none_scheme(tmp_path: Path) -> None:
    """kpack.md §1.2: blobs (64,119) (183,219) (402,168), toc_offset 570."""
    kernels = [
        KernelInput("bin/testapp#0", "gfx900", kernel_bytes(1, 119)),
        KernelInput("lib/libtest.so#0", "gfx900", kernel_bytes(2, 219)),
        KernelInput("lib/libtest.so#0", "gfx906", kernel_bytes(3, 168)),
    ]
    path = write(tmp_path, kernels[::-1], scheme="none")
    raw = path.read_bytes()
    magic, version, toc_offset = struct.unpack_from("<4sIQ", raw)
    assert (magic, version, toc_offset) == (b"KPAK", 1, 570)
    assert raw[16:64] == bytes(48)
    toc = msgpack.unpackb(raw[570:], raw=False)
    assert [(b["offset"], b["size"]) for b in toc["blobs"]] == [(64, 119), (183, 219), (402, 168)]
    assert toc["toc"] == {
        "bin/testapp#0": {"gfx900": {"type": "hsaco", "ordinal": 0, "original_size": 119}},
        "lib/libtest.so#0": {
            "gfx900": {"type": "hsaco", "ordinal": 1, "original_size": 219},
            "gfx906": {"type": "hsaco", "ordinal": 2, "original_size": 168},
        },
    }
    assert toc["gfx_arches"] == ["gfx900", "gfx906"]


def test_zstd_blob_layout(tmp_path: Path) -> None:
    kernels = sample_kernels()
    path = write(tmp_path, kernels, level=5)
    raw = path.read_bytes()
    (toc_offset,) = struct.unpack_from("<Q", raw, 8)
    toc = msgpack.unpackb(raw[toc_offset:], raw=False)
    assert toc["zstd_offset"] == 64 and toc["zstd_offset"] + toc["zstd_size"] == toc_offset
    assert struct.unpack_from("<I", raw, 64) == (len(kernels),)
    (first,) = struct.unpack_from("<I", raw, 68)
    ordered = sorted(kernels, key=lambda k: (k.binary_key, k.target))
    expected = zstandard.ZstdCompressor(level=5, write_content_size=True, write_checksum=False)
    assert raw[72 : 72 + first] == expected.compress(ordered[0].data)


def test_older_release_archive_without_scheme_or_suffix(tmp_path: Path) -> None:
    """rocm-kpack's older release: scheme 'none', no compression_scheme key, no '#N' keys."""
    kernels = [
        ("lib/libtest.so", "gfx900", kernel_bytes(2, 219)),
        ("lib/libtest.so", "gfx906", kernel_bytes(3, 168)),
        ("bin/testapp", "gfx900", kernel_bytes(1, 119)),
    ]
    path = tmp_path / "old.kpack"
    path.write_bytes(spec_kpack(kernels, scheme=None))
    with KpackArchive.open(path) as kp:
        assert kp.scheme == "none"
        assert kp.entry("lib/libtest.so", "gfx900").ordinal == 0
        assert kp.entry("bin/testapp", "gfx900").ordinal == 2
        assert kp.entry("bin/testapp", "gfx900").offset == 64 + 219 + 168
        for key, target, data in kernels:
            assert kp.read(key, target) == data
        kp.verify()


def test_rocm_kpack_style_zstd_archive_reads(tmp_path: Path) -> None:
    kernels = [
        (f"lib/x.so#{i}", t, kernel_bytes(i, 500 + i))
        for i in range(3)
        for t in ("gfx942", "gfx90a")
    ]
    path = tmp_path / "z.kpack"
    path.write_bytes(spec_kpack(kernels[::-1], scheme="zstd-per-kernel"))
    with KpackArchive.open(path) as kp:
        assert kp.scheme == "zstd-per-kernel"
        for key, target, data in kernels:
            assert kp.read(key, target) == data


# --- determinism --------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", SCHEMES)
def test_output_is_independent_of_input_order_and_jobs(tmp_path: Path, scheme: str) -> None:
    kernels = sample_kernels()
    shuffled = kernels[:]
    random.Random(7).shuffle(shuffled)
    one = write(tmp_path, kernels, "one.kpack", scheme=scheme, jobs=1)
    two = write(tmp_path, shuffled, "two.kpack", scheme=scheme, jobs=2)
    three = write(tmp_path, kernels[::-1], "three.kpack", scheme=scheme, jobs=3)
    assert one.read_bytes() == two.read_bytes() == three.read_bytes()


def test_memoryview_inputs_are_accepted(tmp_path: Path) -> None:
    backing = kernel_bytes(5, 10000)
    view = memoryview(backing)
    kernels = [
        KernelInput("lib/a.so#0", "gfx942", view[:4000]),
        KernelInput("lib/a.so#1", "gfx942", view[4000:]),
    ]
    for scheme in SCHEMES:
        path = write(tmp_path, kernels, f"{scheme}.kpack", scheme=scheme)
        with KpackArchive.open(path) as kp:
            assert kp.read("lib/a.so#0", "gfx942") + kp.read("lib/a.so#1", "gfx942") == backing


def test_existing_archive_is_replaced_atomically(tmp_path: Path) -> None:
    path = tmp_path / "a.kpack"
    path.write_bytes(b"old")
    link = tmp_path / "hardlink"
    os.link(path, link)
    write(tmp_path, sample_kernels())
    assert link.read_bytes() == b"old"
    assert path.read_bytes()[:4] == b"KPAK"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.kpack", "hardlink"]


# --- refusals -----------------------------------------------------------------------------


def test_limits_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kernels = sample_kernels()
    monkeypatch.setattr(_archive_write, "MAX_KERNELS", len(kernels) - 1)
    with pytest.raises(ArchiveError, match=f"exceed the C runtime's limit of {len(kernels) - 1}"):
        write(tmp_path, kernels)
    monkeypatch.setattr(_archive_write, "MAX_KERNELS", len(kernels))
    write(tmp_path, kernels)
    monkeypatch.setattr(_archive_write, "MAX_ZSTD_BLOB", 2000)
    with pytest.raises(ArchiveError, match="zstd blob would exceed 2000 bytes"):
        write(tmp_path, kernels, "big.kpack")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.kpack"]  # no temp file left


def test_reader_enforces_the_c_limits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, sample_kernels())
    monkeypatch.setattr(_archive_write, "MAX_KERNELS", 3)
    with pytest.raises(ArchiveError, match="num_kernels 10"):
        KpackArchive.open(path)
    monkeypatch.setattr(_archive_write, "MAX_KERNELS", 100)
    monkeypatch.setattr(_archive_write, "MAX_ZSTD_BLOB", 100)
    with pytest.raises(ArchiveError, match="exceeds 100"):
        KpackArchive.open(path)


@pytest.mark.parametrize(
    ("kernels", "needle"),
    [
        (
            [KernelInput("lib/a.so#0", "gfx942", b"x")] * 2,
            "duplicate kernel ('lib/a.so#0', 'gfx942')",
        ),
        ([KernelInput("lib/a.so", "gfx942", b"x")], "binary_key must be"),
        ([KernelInput("lib/a.so#", "gfx942", b"x")], "binary_key must be"),
        ([KernelInput("lib/a.so#01", "gfx942", b"x")], "binary_key must be"),
        ([KernelInput("lib\\a.so#0", "gfx942", b"x")], "binary_key must be"),
        ([KernelInput("#0", "gfx942", b"x")], "binary_key must be"),
        ([KernelInput("lib/a.so#0", "", b"x")], "target is not a target id"),
        ([KernelInput("lib/a.so#0", "hipv4-amdgcn-amd-amdhsa--gfx942", b"x")], "target is not"),
        ([KernelInput("lib/a.so#0", "gfx942", "text")], "data must be bytes"),  # type: ignore[arg-type]
        ([KernelInput("lib/a.so#0", "gfx942", b"x", {"a": 1})], "metadata must map str"),  # type: ignore[dict-item]
        # an empty code object: no ELF, and HRX refuses a whole archive with original_size 0
        ([KernelInput("lib/a.so#0", "gfx942", b"")], "the code object is empty"),
        ([KernelInput("lib/a.so#0", "gfx942", memoryview(b""))], "original_size must be > 0"),
    ],
)
def test_invalid_kernels_are_refused(
    tmp_path: Path, kernels: list[KernelInput], needle: str
) -> None:
    with pytest.raises(ArchiveError) as info:
        write(tmp_path, kernels)
    assert needle in str(info.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"scheme": "zstd"}, "unknown compression scheme"),
        ({"level": 0}, "zstd level"),
        ({"level": 23}, "zstd level"),
        ({"jobs": 0}, "jobs"),
    ],
)
def test_invalid_options_are_refused(tmp_path: Path, kwargs: dict[str, Any], needle: str) -> None:
    with pytest.raises(ArchiveError, match=needle):
        write(tmp_path, sample_kernels(), **kwargs)


def test_unwritable_destination(tmp_path: Path) -> None:
    with pytest.raises(ArchiveError, match="cannot create a temporary file"):
        write_kpack(
            tmp_path / "missing" / "a.kpack",
            sample_kernels(),
            group_name="g",
            gfx_arch_family="gfx942",
        )


# --- corrupt archives ---------------------------------------------------------------------


def corrupt(raw: bytes, offset: int, fmt: str, value: int | bytes) -> bytes:
    out = bytearray(raw)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def toc_replaced(raw: bytes, **changes: Any) -> bytes:
    (toc_offset,) = struct.unpack_from("<Q", raw, 8)
    toc = msgpack.unpackb(raw[toc_offset:], raw=False)
    toc.update(changes)
    packed: bytes = msgpack.packb(toc, use_bin_type=True)
    return raw[:toc_offset] + packed


def entry_replaced(raw: bytes, **changes: Any) -> bytes:
    (toc_offset,) = struct.unpack_from("<Q", raw, 8)
    toc = msgpack.unpackb(raw[toc_offset:], raw=False)
    toc["toc"]["lib/a.so#0"]["gfx942"].update(changes)
    packed: bytes = msgpack.packb(toc, use_bin_type=True)
    return raw[:toc_offset] + packed


SMALL = [
    ("lib/a.so#0", "gfx942", kernel_bytes(1, 3000)),
    ("lib/a.so#0", "gfx90a", kernel_bytes(2, 2000)),
]
ZSTD = spec_kpack(SMALL, scheme="zstd-per-kernel")
NONE = spec_kpack(SMALL, scheme="none")


def zstd_archive(frames: list[bytes], sizes: list[int]) -> bytes:
    """A zstd-per-kernel archive of raw ``frames`` for ``lib/a.so#0`` gfx942, gfx90a, ..."""
    blob = struct.pack("<I", len(frames)) + b"".join(struct.pack("<I", len(f)) + f for f in frames)
    targets = ["gfx942", "gfx90a", "gfx1100"][: len(frames)]
    toc = {
        "format_version": 1, "group_name": "g", "gfx_arch_family": "gfx942", "gfx_arches": targets,
        "toc": {"lib/a.so#0": {
            t: {"type": "hsaco", "ordinal": i, "original_size": n}
            for i, (t, n) in enumerate(zip(targets, sizes, strict=True))
        }},
        "compression_scheme": "zstd-per-kernel", "zstd_offset": 64, "zstd_size": len(blob),
    }  # fmt: skip
    head = b"KPAK" + struct.pack("<IQ", 1, 64 + len(blob)) + bytes(48)
    packed: bytes = msgpack.packb(toc, use_bin_type=True)
    return head + blob + packed


CUT_FRAME = zstd_archive(
    [compress(SMALL[0][2], "zstd")[:-6], compress(SMALL[1][2], "zstd")], [3000, 2000]
)

CORRUPT = [
    ("empty file", b"", "too small"),
    ("bad magic", b"KPAX" + ZSTD[4:], "bad magic b'KPAX'"),
    ("version 2", corrupt(ZSTD, 4, "<I", 2), "unsupported format version 2"),
    ("version 0", corrupt(NONE, 4, "<I", 0), "unsupported format version 0"),
    ("toc_offset beyond EOF", corrupt(ZSTD, 8, "<Q", 1 << 40), "toc_offset"),
    ("toc_offset inside header", corrupt(ZSTD, 8, "<Q", 16), "toc_offset"),
    (
        "toc_offset off by one",
        corrupt(NONE, 8, "<Q", struct.unpack_from("<Q", NONE, 8)[0] + 1),
        "TOC",
    ),
    ("truncated TOC", ZSTD[:-3], "not one valid MessagePack map"),
    ("trailing bytes after TOC", ZSTD + b"\x00", "not one valid MessagePack map"),
    (
        "TOC is a list",
        NONE[: struct.unpack_from("<Q", NONE, 8)[0]] + msgpack.packb([1]),
        "must be dict",
    ),
    ("gfx_arches not a list", toc_replaced(ZSTD, gfx_arches="gfx942"), "'gfx_arches' must be list"),
    ("gfx_arches holds ints", toc_replaced(ZSTD, gfx_arches=[942]), "gfx_arches[0] must be str"),
    ("group_name missing", toc_replaced(ZSTD, group_name=None), "'group_name' must be str"),
    ("toc not a map", toc_replaced(ZSTD, toc=[]), "'toc' must be dict"),
    ("format_version 2", toc_replaced(ZSTD, format_version=2), "format_version 2 is not 1"),
    (
        "unknown scheme",
        toc_replaced(ZSTD, compression_scheme="lz4"),
        "unknown compression_scheme 'lz4'",
    ),
    (
        "scheme not a str",
        toc_replaced(ZSTD, compression_scheme=1),
        "'compression_scheme' must be str",
    ),
    ("zstd_offset missing", toc_replaced(ZSTD, zstd_offset=None), "'zstd_offset' must be int"),
    ("zstd_size is a bool", toc_replaced(ZSTD, zstd_size=True), "'zstd_size' must be int"),
    ("zstd blob past TOC", toc_replaced(ZSTD, zstd_size=1 << 20), "outside the blob area"),
    ("zstd blob short", toc_replaced(ZSTD, zstd_size=20), "runs past the zstd blob"),
    (
        "zstd blob with slack",
        toc_replaced(ZSTD, zstd_offset=64, zstd_size=len(ZSTD)),
        "outside the blob area",
    ),
    ("num_kernels absurd", corrupt(ZSTD, 64, "<I", 0xFFFFFFFF), "num_kernels 4294967295"),
    ("frame size absurd", corrupt(ZSTD, 68, "<I", 0xFFFFFF), "frame 0: size 16777215"),
    ("blobs past TOC", toc_replaced(NONE, blobs=[{"offset": 64, "size": 1 << 30}]), "blobs[0]"),
    ("blobs in header", toc_replaced(NONE, blobs=[{"offset": 0, "size": 3}]), "blobs[0]"),
    (
        "blob size a string",
        toc_replaced(NONE, blobs=[{"offset": 64, "size": "3"}]),
        "'size' must be int",
    ),
    ("blobs missing", toc_replaced(NONE, blobs=None), "'blobs' must be list"),
    ("ordinal a string", entry_replaced(ZSTD, ordinal="0"), "'ordinal' must be int"),
    ("ordinal negative", entry_replaced(ZSTD, ordinal=-1), "out of range"),
    ("ordinal beyond", entry_replaced(ZSTD, ordinal=7), "ordinal 7 has no stored kernel"),
    ("ordinal shared, sizes differ", entry_replaced(ZSTD, ordinal=1), "ordinal 1 is shared by"),
    (
        "original_size missing",
        entry_replaced(ZSTD, original_size=None),
        "'original_size' must be int",
    ),
    ("entry type", entry_replaced(ZSTD, type="elf"), "entry type 'elf'"),
    ("metadata not a map", entry_replaced(ZSTD, metadata=[1]), "metadata must be dict"),
    ("metadata value", entry_replaced(ZSTD, metadata={"a": 1}), "metadata['a'] must be str"),
]


@pytest.mark.parametrize(
    ("raw", "needle"), [(r, n) for _, r, n in CORRUPT], ids=[i for i, _, _ in CORRUPT]
)
def test_corrupt_archives_fail_to_open(tmp_path: Path, raw: bytes, needle: str) -> None:
    path = tmp_path / "bad.kpack"
    path.write_bytes(raw)
    with pytest.raises(ArchiveError) as info:
        KpackArchive.open(path)
    assert needle in str(info.value)
    assert str(info.value).startswith(f"{path}: ")


DECODE = [
    ("truncated zstd frame", CUT_FRAME, "does not decode"),
    ("frame header garbage", corrupt(ZSTD, 72, "<4s", b"junk"), "zstd frame"),
    ("original_size too big", entry_replaced(ZSTD, original_size=3001), "declares 3000 bytes"),
    ("original_size absurd", entry_replaced(ZSTD, original_size=1 << 60), "impossible"),
    (
        "none original_size",
        entry_replaced(NONE, original_size=2999),
        "3000 bytes stored, original_size is 2999",
    ),
]


@pytest.mark.parametrize(
    ("raw", "needle"), [(r, n) for _, r, n in DECODE], ids=[i for i, _, _ in DECODE]
)
def test_corrupt_kernels_fail_to_read_and_verify(tmp_path: Path, raw: bytes, needle: str) -> None:
    path = tmp_path / "bad.kpack"
    path.write_bytes(raw)
    with KpackArchive.open(path) as kp:
        with pytest.raises(ArchiveError, match=re.escape("toc['lib/a.so#0']['gfx942']")) as info:
            kp.read("lib/a.so#0", "gfx942")
        assert needle in str(info.value)
        assert kp.read("lib/a.so#0", "gfx90a") == SMALL[1][2]
        with pytest.raises(ArchiveError, match="failed verification") as info:
            kp.verify()
        assert len(info.value.problems) == 1 and needle in info.value.problems[0]


def test_frame_without_content_size_is_bounded(tmp_path: Path) -> None:
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(bytes(1 << 20))
    path = tmp_path / "nocs.kpack"
    path.write_bytes(zstd_archive([frame], [100]))
    with KpackArchive.open(path) as kp, pytest.raises(ArchiveError, match="does not decode"):
        kp.read("lib/a.so#0", "gfx942")
    path.write_bytes(zstd_archive([frame], [1 << 20]))
    with KpackArchive.open(path) as kp:
        assert kp.read("lib/a.so#0", "gfx942") == bytes(1 << 20)


def test_verify_reports_targets_missing_from_gfx_arches(tmp_path: Path) -> None:
    path = tmp_path / "arches.kpack"
    path.write_bytes(toc_replaced(ZSTD, gfx_arches=["gfx942"]))
    with KpackArchive.open(path) as kp:
        with pytest.raises(ArchiveError) as info:
            kp.verify()
        assert info.value.problems == ("target 'gfx90a' of 'lib/a.so#0' is not in gfx_arches",)


def test_missing_entry_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "ok.kpack"
    path.write_bytes(ZSTD)
    with KpackArchive.open(path) as kp:
        assert ("lib/a.so#0", "gfx942") in kp
        with pytest.raises(ArchiveError, match=re.escape("no kernel 'lib/a.so#0' for 'gfx1100'")):
            kp.read("lib/a.so#0", "gfx1100")
    with pytest.raises(ArchiveError, match="cannot open"):
        KpackArchive.open(tmp_path / "nope.kpack")
    with pytest.raises(ArchiveError, match="cannot open"):
        KpackArchive.open(tmp_path)


# --- property: mutated and trimmed archives raise nothing but ArchiveError ----------------

ARCHIVE_SEEDS = [
    ZSTD,
    NONE,
    spec_kpack(SMALL, scheme=None),
    spec_kpack([], scheme="zstd-per-kernel"),
]


@st.composite
def mutated_archives(draw: st.DrawFn) -> bytes:
    buf = bytearray(draw(st.sampled_from(ARCHIVE_SEEDS)))
    (toc_offset,) = struct.unpack_from("<Q", buf, 8)
    for _ in range(draw(st.integers(0, 4))):
        fmt = draw(st.sampled_from(("<B", "<H", "<I", "<Q")))
        width = struct.calcsize(fmt)
        near = draw(st.sampled_from((0, 64, toc_offset)))
        pos = min(len(buf) - width, near + draw(st.integers(0, 120)))
        value = draw(
            st.sampled_from((0, 1, 0x7F, 0xFF, 0xFFFFFFFF, 1 << 63)) | st.integers(0, 1 << 16)
        )
        struct.pack_into(fmt, buf, pos, value & ((1 << (8 * width)) - 1))
    if draw(st.booleans()):
        del buf[draw(st.integers(0, len(buf))) :]
    return bytes(buf)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=mutated_archives())
def test_property_archive_reader(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "fuzz.kpack"
    path.write_bytes(raw)
    try:
        with KpackArchive.open(path) as kp:
            for key, target in kp:
                with contextlib.suppress(ArchiveError):
                    kp.read(key, target)
            kp.verify()
    except ArchiveError:
        pass


# --- real input ---------------------------------------------------------------------------


@pytest.mark.real
def test_rocrand_code_objects_round_trip(
    debian_package: Callable[[str], Path], tmp_path: Path
) -> None:
    lib = debian_package("librocrand1") / ROCRAND_LIB
    offset, size, _ = fatbin_extent(lib)
    with lib.open("rb") as f:
        f.seek(offset)
        fatbin = f.read(size)
    objects = [c for b in iter_bundles(fatbin, name=str(lib)) for c in b.code_objects]
    kernels = [
        KernelInput("lib/librocrand.so.1.1#0", c.target, c.data, {"target": c.triple})
        for c in objects
    ]
    assert len(kernels) == 7
    for scheme in SCHEMES:
        path = tmp_path / f"rand_lib_{scheme}.kpack"
        summary = write_kpack(
            path, kernels, group_name="rand_lib", gfx_arch_family="gfx90a", scheme=scheme
        )
        assert summary.original_bytes == sum(c.size for c in objects)
        with KpackArchive.open(path) as kp:
            kp.verify()
            for c in objects:
                assert kp.read("lib/librocrand.so.1.1#0", c.target) == bytes(c.data)
        _, stored = read_kpack_by_spec(path.read_bytes())
        assert stored == {("lib/librocrand.so.1.1#0", c.target): bytes(c.data) for c in objects}


@pytest.fixture(scope="module")
def rocrand_archive(
    debian_package: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory
) -> bytes:
    """A zstd-per-kernel archive of two real rocRAND code objects."""
    lib = debian_package("librocrand1") / ROCRAND_LIB
    offset, size, _ = fatbin_extent(lib)
    with lib.open("rb") as f:
        f.seek(offset)
        fatbin = f.read(size)
    kernels = [
        KernelInput("lib/librocrand.so.1.1#0", c.target, bytes(c.data))
        for b in iter_bundles(fatbin, name=str(lib))
        for c in b.code_objects
        if c.target in ("gfx1030", "gfx90a:xnack+")
    ]
    path = tmp_path_factory.mktemp("real-kpack") / "rand_lib.kpack"
    write_kpack(path, kernels, group_name="rand_lib", gfx_arch_family="gfx90a:xnack+")
    return path.read_bytes()


@pytest.mark.real
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_property_real_archive_reader(
    tmp_path: Path, rocrand_archive: bytes, data: st.DataObject
) -> None:
    buf = bytearray(rocrand_archive)
    (toc_offset,) = struct.unpack_from("<Q", buf, 8)
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.sampled_from((0, 64, 72, toc_offset))) + data.draw(st.integers(0, 90))
        buf[min(pos, len(buf) - 1)] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        del buf[data.draw(st.integers(0, len(buf))) :]
    path = tmp_path / "fuzz.kpack"
    path.write_bytes(buf)
    try:
        with KpackArchive.open(path) as kp:
            kp.verify()
    except ArchiveError:
        pass


# --- kernels compressed before the archive is written (the splitter's spool) ----------------


def _frame_in_pieces(data: bytes, level: int, piece: int) -> archive.ZstdFrame:
    """``data`` compressed as the splitter's spool does it: fed piece by piece."""
    out = io.BytesIO()
    writer = FrameWriter(compressor(level), out, len(data))
    for start in range(0, len(data), piece):
        writer.write(data[start : start + piece])
    assert writer.done
    return archive.ZstdFrame(out.getvalue(), len(data), level)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("frame_level", [3, 9])
def test_precompressed_kernels_give_the_same_archive(
    tmp_path: Path, scheme: Scheme, frame_level: int
) -> None:
    """A frame made piece by piece is stored as it is at its level and recompressed (or, for
    ``none``, decoded) otherwise: the archive's bytes are those of the plain kernels."""
    plain = sample_kernels()
    framed = [
        KernelInput(k.binary_key, k.target, _frame_in_pieces(bytes(k.data), frame_level, 4099),
                    k.metadata)
        for k in plain
    ]  # fmt: skip
    a, b = tmp_path / "plain.kpack", tmp_path / "framed.kpack"
    write_kpack(a, plain, group_name="g", gfx_arch_family="gfx942", scheme=scheme, level=3)
    write_kpack(b, framed, group_name="g", gfx_arch_family="gfx942", scheme=scheme, level=3)
    assert a.read_bytes() == b.read_bytes()
    _, kernels = read_kpack_by_spec(b.read_bytes())
    assert sorted(kernels.values()) == sorted(bytes(k.data) for k in plain)
    if scheme == "zstd-per-kernel" and frame_level == 3:  # stored as made, not recompressed
        blob = b.read_bytes()
        assert all(f.frame in blob for f in (k.data for k in framed))  # type: ignore[union-attr]


def test_frames_are_independent_of_how_the_code_object_arrives() -> None:
    data = kernel_bytes(7, 3 << 20)
    frames = {
        _frame_in_pieces(data, 3, piece).frame for piece in (1, 4096, 65537, 1 << 20, len(data))
    }
    assert len(frames) == 1
    assert zstandard.ZstdDecompressor().decompress(frames.pop()) == data
    assert _frame_in_pieces(b"", 3, 1).frame == _frame_in_pieces(b"", 3, 7).frame


def test_precompressed_frame_that_lies_about_its_size_is_refused(tmp_path: Path) -> None:
    good = _frame_in_pieces(b"\x7fELF" + bytes(300), 3, 50)
    wrong = archive.ZstdFrame(good.frame, good.size + 1, 3)
    with pytest.raises(ArchiveError, match="declares 304 bytes, not 305"):
        write_kpack(tmp_path / "x.kpack", [KernelInput("a#0", "gfx942", wrong)],
                    group_name="g", gfx_arch_family="gfx942")  # fmt: skip
    assert not list(tmp_path.iterdir())


# --- archives laid out before they are written, streamed (into a wheel or a file) -----------


def _stored(scheme: Scheme) -> tuple[list[archive.StoredKernel], list[bytes]]:
    """The sample kernels as a streamed archive stores them, and their blobs."""
    kernels, blobs = [], []
    for k in sample_kernels():
        data = bytes(k.data)  # type: ignore[arg-type]
        blob = data if scheme == "none" else compress_frame(compressor(archive.DEFAULT_LEVEL), data)
        kernels.append(
            archive.StoredKernel(k.binary_key, k.target, len(blob), len(data), k.metadata)
        )
        blobs.append(blob)
    return kernels, blobs


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_laid_out_archive_streams_the_bytes_write_kpack_writes(
    tmp_path: Path, scheme: Scheme
) -> None:
    kernels, blobs = _stored(scheme)
    layout = archive.lay_out_kpack(
        kernels, path=tmp_path / "x.kpack", group_name="blas_lib", gfx_arch_family="gfx942",
        scheme=scheme,
    )  # fmt: skip
    streamed = b"".join(layout.chunks(blobs[i] for i in layout.order))
    written = write(tmp_path, sample_kernels(), "w.kpack", scheme=scheme)
    assert streamed == written.read_bytes()
    assert layout.size == len(streamed)
    _, by_spec = read_kpack_by_spec(streamed)
    assert sorted(by_spec.values()) == sorted(bytes(k.data) for k in sample_kernels())  # type: ignore[arg-type]


def test_a_laid_out_archive_refuses_blobs_that_do_not_match(tmp_path: Path) -> None:
    kernels, blobs = _stored("zstd-per-kernel")
    layout = archive.lay_out_kpack(
        kernels, path=tmp_path / "x.kpack", group_name="g", gfx_arch_family="gfx942"
    )
    ordered = [blobs[i] for i in layout.order]
    with pytest.raises(ArchiveError, match="blob 0 holds"):
        b"".join(layout.chunks([ordered[0] + b"x", *ordered[1:]]))
    with pytest.raises(ArchiveError, match="blobs given for"):
        b"".join(layout.chunks(ordered[:-1]))
    twice = [kernels[0], kernels[0]]
    with pytest.raises(ArchiveError, match="duplicate kernel"):
        archive.lay_out_kpack(twice, path=tmp_path / "y", group_name="g", gfx_arch_family="f")
    bad = [archive.StoredKernel("no-index", "gfx942", 1, 1)]
    with pytest.raises(ArchiveError, match="binary_key must be"):
        archive.lay_out_kpack(bad, path=tmp_path / "z", group_name="g", gfx_arch_family="f")


# --- every reader loads what we write: HRX's rules, the 2 GiB limit, original_size > 0 --------


@pytest.mark.parametrize("scheme", SCHEMES)
def test_hrx_rules_read_our_archives(tmp_path: Path, scheme: Scheme) -> None:
    kernels = sample_kernels()
    path = write(tmp_path, kernels, scheme=scheme)
    assert hrx_read(path) == {(k.binary_key, k.target): bytes(k.data) for k in kernels}


def test_an_archive_over_the_limit_is_refused(tmp_path: Path) -> None:
    kernels = sample_kernels()
    size = write(tmp_path, kernels).stat().st_size
    with pytest.raises(ArchiveError, match=f"would exceed {size - 1} bytes"):
        write(tmp_path, kernels, "big.kpack", max_size=size - 1)
    write(tmp_path, kernels, "fits.kpack", max_size=size)
    stored = [StoredKernel(k.binary_key, k.target, len(k.data), len(k.data)) for k in kernels]
    layout = lay_out_kpack(
        stored, path=tmp_path / "x.kpack", group_name="g", gfx_arch_family="gfx942", scheme="none"
    )
    with pytest.raises(ArchiveError, match="more than every reader loads"):
        lay_out_kpack(
            stored, path=tmp_path / "x.kpack", group_name="g", gfx_arch_family="gfx942",
            scheme="none", max_size=layout.size - 1,
        )  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.kpack", "fits.kpack"]
    assert MAX_ARCHIVE_BYTES == (1 << 31) - 1


def test_a_stored_empty_code_object_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ArchiveError, match="original_size must be > 0"):
        lay_out_kpack(
            [StoredKernel("lib/a.so#0", "gfx942", 9, 0)],
            path=tmp_path / "x.kpack", group_name="g", gfx_arch_family="gfx942",
        )  # fmt: skip


@pytest.mark.parametrize("size", [1, 100, 4096, 131_071, 131_072, 1 << 20])
def test_the_stored_bound_holds_for_incompressible_code(size: int) -> None:
    data = random.Random(size).randbytes(size)
    for level in (1, 3, 9, 19):
        frame = zstandard.ZstdCompressor(level=level, write_content_size=True).compress(data)
        assert len(frame) <= stored_bound(size, "zstd-per-kernel")
    assert stored_bound(size, "none") == size
