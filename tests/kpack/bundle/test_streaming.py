"""Indexing bundles without keeping decoded bytes, and streaming their code objects.

The eager walk (:func:`iter_bundles`) is the reference: for every input, the streaming
pair (:func:`index_bundles` + :func:`stream_code_objects`) must give the same code
objects, byte for byte, or fail as well.
"""

from __future__ import annotations

import os
import random
import tracemalloc

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kpack.bundle import CodeObjectRef, index_bundles, iter_bundles, stream_code_objects
from kpack.bundle._chunks import _SCAN, ChunkReader
from kpack.errors import BundleError
from tests.kpack.bundle_fixtures import (
    AMDGCN,
    fake_code_object,
    sample_bundle,
    section,
    spec_ccob,
    spec_plain_bundle,
)


def _eager(buf: bytes) -> list[tuple[int, str, str, int, bytes]]:
    return [
        (b.offset, co.triple, co.target, co.size, bytes(co.data))
        for b in iter_bundles(buf, name="t")
        for co in b.code_objects
    ]


def _streamed(buf: bytes) -> list[tuple[int, str, str, int, bytes]]:
    out = []
    for bundle in index_bundles(buf, name="t"):
        got: dict[int, bytearray] = {}

        def sink(ref: CodeObjectRef, got: dict[int, bytearray] = got):
            got[ref.offset] = bytearray()
            return got[ref.offset].extend

        stream_code_objects(buf, bundle, name="t", sink=sink)
        for ref in bundle.code_objects:
            out.append((bundle.offset, ref.triple, ref.target, ref.size, bytes(got[ref.offset])))
    return out


def _big(target: str, size: int, seed: int) -> bytes:
    rng = random.Random(seed)
    head = fake_code_object(target, 512)
    return head + bytes(rng.getrandbits(8) for _ in range(1000)) * (size // 1000)


def _sections() -> dict[str, bytes]:
    plain = sample_bundle(["gfx90a:xnack+", "gfx942", "gfx9-4-generic"])
    big = spec_plain_bundle(
        [(AMDGCN + "gfx1100", _big("gfx1100", 3_000_000, 1)), (AMDGCN + "gfx942", b"")],
        align=4096,
    )
    two = sample_bundle(["gfx908"]) + bytes(64) + sample_bundle(["gfx1030", "gfx906"])
    cases = {"plain": plain}
    for version in (1, 2, 3):
        for method in ("zstd", "zlib"):
            cases[f"v{version}-{method}"] = spec_ccob(plain, version=version, method=method)
    cases["big-crossing-chunks"] = spec_ccob(big, version=3)
    cases["two-plain-in-one-ccob"] = spec_ccob(two, version=2, method="zlib")
    cases["mixed-section"] = section(
        plain, spec_ccob(big, version=3), spec_ccob(two, version=1), align=256
    )[0]
    return cases


SECTIONS = _sections()


@pytest.mark.parametrize("name", sorted(SECTIONS))
def test_streaming_gives_the_eager_code_objects(name: str) -> None:
    buf = SECTIONS[name]
    expected = _eager(buf)
    assert expected  # every case holds device code
    assert _streamed(buf) == expected


def test_indexed_ccob_bundles_keep_no_bytes() -> None:
    (bundle,) = index_bundles(SECTIONS["big-crossing-chunks"], name="t")
    assert bundle.compression == "zstd"
    assert all(ref.data is None for ref in bundle.code_objects)
    (plain,) = index_bundles(SECTIONS["plain"], name="t")
    assert all(ref.data is not None for ref in plain.code_objects)


def test_a_sink_may_skip_code_objects() -> None:
    buf = SECTIONS["v3-zstd"]
    (bundle,) = index_bundles(buf, name="t")
    seen: list[str] = []
    stream_code_objects(
        buf, bundle, name="t", sink=lambda ref: seen.append(ref.target) if False else None
    )
    assert seen == []


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (spec_ccob(sample_bundle(["gfx90a"])), "nested CCOB"),
        (sample_bundle(["gfx90a"]) + b"\x01junk", "neither padding nor a bundle magic"),
        (b"\0" * 64, "holds no bundle"),
        (sample_bundle(["gfx90a"])[:40], "cannot fit"),
        (sample_bundle(["gfx90a"])[:140], "runs past the end|exceeds the buffer"),
    ],
)
def test_bad_payloads_fail_in_both_walks(payload: bytes, message: str) -> None:
    buf = spec_ccob(payload, version=3)
    with pytest.raises(BundleError, match=message):
        _eager(buf)
    with pytest.raises(BundleError, match=message):
        _streamed(buf)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.sampled_from(sorted(SECTIONS)),
    edits=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=4),
)
def test_mutated_inputs_agree(case: str, edits: list[tuple[int, int]]) -> None:
    buf = bytearray(SECTIONS[case])
    for where, value in edits:
        buf[where % len(buf)] = value
    try:
        expected = _eager(bytes(buf))
    except BundleError:
        with pytest.raises(BundleError):
            _streamed(bytes(buf))
        return
    assert _streamed(bytes(buf)) == expected


def test_streaming_memory_follows_the_chunk_not_the_bundle() -> None:
    """64 MiB of decoded device code pass through a counting sink; the decoder never
    holds more than a few chunks (the eager walk holds the whole 64 MiB)."""
    size = 64 << 20
    code = fake_code_object("gfx942", 512) + os.urandom(1 << 16) * (size >> 16)
    buf = spec_ccob(spec_plain_bundle([(AMDGCN + "gfx942", code)]), version=3)
    del code
    total = 0

    def count(data: bytes | memoryview) -> None:
        nonlocal total
        total += len(data)

    tracemalloc.start()
    try:
        (bundle,) = index_bundles(buf, name="t")
        stream_code_objects(buf, bundle, name="t", sink=lambda ref: count)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert total == bundle.code_objects[0].size > size
    assert peak < 8 << 20, peak


def test_one_decompressor_serves_a_whole_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk decodes every zstd CCOB of a section with one decompressor, which keeps
    its window (as large as a decoded payload) from bundle to bundle instead of faulting
    in a new one; frames of other sizes before and after still decode to the eager bytes."""
    big = spec_plain_bundle([(AMDGCN + "gfx1100", _big("gfx1100", 3_000_000, 2))], align=4096)
    small = sample_bundle(["gfx90a:xnack+", "gfx942"])
    buf = section(
        spec_ccob(small, version=3),
        spec_ccob(big, version=2),
        spec_ccob(small, version=1),
        spec_ccob(sample_bundle(["gfx1030"]), version=3),
        align=256,
    )[0]
    expected = _eager(buf)
    made = 0
    real = zstandard.ZstdDecompressor

    def counting(*args: object, **kwargs: object) -> zstandard.ZstdDecompressor:
        nonlocal made
        made += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(zstandard, "ZstdDecompressor", counting)
    bundles = list(index_bundles(buf, name="t"))
    assert made == 1
    assert [b.compression for b in bundles] == ["zstd"] * 4
    assert _streamed(buf) == expected


@pytest.mark.parametrize(
    ("chunks", "skipped", "after"),
    [
        ([b"ab"], 0, b"ab"),
        ([b"\0" * 3, b"", b"\0" * (2 * _SCAN + 5), b"\0\0abc"], 2 * _SCAN + 10, b"abc"),
        ([b"\0" * (_SCAN + 7) + b"x\0y"], _SCAN + 7, b"x\0y"),
        ([b"\0" * (_SCAN - 1), b"\0q"], _SCAN, b"q"),
        ([b"\0" * 5, b"\0" * (_SCAN + 1)], _SCAN + 6, None),
        ([], 0, None),
    ],
    ids=["none", "across-chunks", "past-one-scan", "at-a-boundary", "only-zeros", "empty"],
)
def test_skip_zeros_finds_the_next_byte_across_chunks(
    chunks: list[bytes], skipped: int, after: bytes | None
) -> None:
    reader = ChunkReader(chunks)
    assert reader.skip_zeros() is (after is not None)
    assert reader.pos == skipped
    if after is not None:
        assert reader.read(len(after) + 1) == after
        assert reader.skip_zeros() is False
