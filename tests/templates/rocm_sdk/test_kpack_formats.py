"""rocm_sdk._msgpack and rocm_sdk._zstd_frame against the msgpack and zstandard packages."""

from __future__ import annotations

import contextlib
import importlib.util
import math
import random
import re
import sys
from types import ModuleType

import msgpack
import pytest
import zstandard
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.templates.tpl_rendering import TEMPLATES

RUNTIME = TEMPLATES / "rocm" / "src" / "rocm_sdk"


def _load(name: str) -> ModuleType:
    """A self-contained runtime module, loaded from templates/ without writing bytecode."""
    spec = importlib.util.spec_from_file_location(f"tpl_rocm_sdk_{name}", RUNTIME / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = saved
    return module


mp = _load("_msgpack")
zf = _load("_zstd_frame")

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def same(a: object, b: object) -> bool:
    """Equality that also holds for NaN and keeps bool/int/float and str/bytes apart."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


# --- MessagePack ---------------------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.floats(allow_nan=False, width=32)
    | st.text(max_size=70)
    | st.binary(max_size=300)
)
keys = (
    st.text(max_size=20)
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.binary(max_size=8)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=20) | st.dictionaries(keys, inner, max_size=20),
    max_leaves=60,
)


@FAST
@given(values, st.booleans())
def test_round_trip_matches_msgpack(value: object, single_float: bool) -> None:
    try:
        data = msgpack.packb(value, use_bin_type=True, use_single_float=single_float)
    except OverflowError:  # a double beyond float32's range
        assume(not single_float)
        raise
    ours = mp.unpackb(data)
    theirs = msgpack.unpackb(data, raw=False, strict_map_key=False)
    assert same(ours, theirs)
    if not single_float:
        assert same(ours, value)


@settings(max_examples=80, deadline=None)
@given(values)
def test_every_prefix_is_truncated(value: object) -> None:
    data = msgpack.packb(value, use_bin_type=True)
    for end in sorted({0, len(data) // 2, len(data) - 1, *range(max(0, len(data) - 8), len(data))}):
        if end < len(data):
            with pytest.raises(mp.MsgpackError):
                mp.unpackb(data[:end])


@settings(max_examples=600, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_our_error(data: bytes) -> None:
    try:
        ours = mp.unpackb(data)
    except mp.MsgpackError:
        return
    # whatever we accept, msgpack decodes to the same value
    assert same(ours, msgpack.unpackb(data, raw=False, strict_map_key=False))


@settings(max_examples=150, deadline=None)
@given(values, st.integers(min_value=0), st.integers(min_value=0, max_value=255))
def test_mutated_encodings_raise_only_our_error(value: object, where: int, byte: int) -> None:
    data = bytearray(msgpack.packb(value, use_bin_type=True))
    data[where % len(data)] = byte
    with contextlib.suppress(mp.MsgpackError):
        mp.unpack_one(bytes(data))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\xc1", "unsupported type byte 0xc1"),
        (b"\xd4\x01\x00", "unsupported type byte 0xd4"),  # fixext1
        (b"\xc7\x01\x01\x00", "unsupported type byte 0xc7"),  # ext8
        (b"\xdd\xff\xff\xff\xff", "truncated: array of 4294967295"),
        (b"\xdf\x00\x00\x00\x02\x01", "truncated: map of 2"),
        (b"\xdb\xff\xff\xff\xff", "truncated: str payload"),
        (b"\xc6\x00\x00\x00\x05abc", "truncated: bin payload"),
        (b"\xa2\xc3\x28", "not valid UTF-8"),
        (b"\x82\x01\x02\x01\x03", "duplicate map key 1"),
        (b"\x81\x90\x01", "map key at offset 1 is a list"),
        (b"\x91" * 40 + b"\xc0", "nesting deeper than 32"),
        (b"\xcf\x00\x00", "truncated"),
        (b"", "truncated: type byte"),
        (b"\xc0\xc0", "1 byte(s) after the value"),
    ],
)
def test_rejects(data: bytes, message: str) -> None:
    with pytest.raises(mp.MsgpackError, match=re.escape(message)):
        mp.unpackb(data)


def test_all_supported_types() -> None:
    value = {
        "fix": [0, 127, -1, -32],
        "u": [128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**64 - 1],
        "i": [-33, -128, -129, -32768, -32769, -(2**31), -(2**31) - 1, -(2**63)],
        "s": ["", "x" * 31, "y" * 32, "z" * 256, "w" * 65536],
        "b": [b"", b"q" * 256, b"r" * 65536],
        "c": [list(range(16)), {str(i): i for i in range(16)}, {}, [], None, True, False],
        "f": 1.5,
    }
    assert mp.unpackb(msgpack.packb(value, use_bin_type=True)) == value
    assert mp.unpackb(msgpack.packb(0.25, use_single_float=True)) == 0.25
    assert mp.unpack_one(b"\x01rest") == (1, 1)


def test_marker_example_from_the_spec() -> None:
    path = "../.kpack/blas_lib_@GFXARCH@.kpack"
    data = msgpack.packb({"kpack_search_paths": [path], "kernel_name": "k"}, use_bin_type=True)
    assert data.startswith(b"\x82\xb2kpack_search_paths\x91\xd9\x22" + path.encode())
    assert mp.unpackb(data) == {"kpack_search_paths": [path], "kernel_name": "k"}


# --- zstd frames -----------------------------------------------------------------------------


def sample(kind: str, size: int, seed: int) -> bytes:
    rng = random.Random(seed)
    if kind == "random":
        return rng.randbytes(size)
    if kind == "zeros":
        return bytes(size)
    words = [rng.randbytes(rng.randint(1, 12)) for _ in range(64)]
    out = bytearray()
    while len(out) < size:
        out += rng.choice(words)
    return bytes(out[:size])


frames = st.builds(
    lambda kind, size, seed, level, checksum: (
        data := sample(kind, size, seed),
        zstandard.ZstdCompressor(
            level=level, write_content_size=True, write_checksum=checksum
        ).compress(data),
    ),
    st.sampled_from(["random", "zeros", "text"]),
    st.integers(min_value=0, max_value=400_000) | st.integers(min_value=0, max_value=300),
    st.integers(min_value=0, max_value=2**32),
    st.sampled_from([-5, 1, 3, 9, 19]),
    st.booleans(),
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames, st.data())
def test_walk_accepts_real_frames_and_rejects_their_prefixes(
    pair: tuple[bytes, bytes], data: st.DataObject
) -> None:
    content, frame = pair
    info = zf.walk_frame(frame)
    assert info.content_size == len(content)
    assert info.frame_size == len(frame)
    assert info.min_content <= len(content) <= info.max_content
    cuts = {len(frame) - 1, len(frame) - 3, info.header.header_size, 3}
    cuts |= set(data.draw(st.lists(st.integers(0, len(frame) - 1), max_size=10)))
    for cut in sorted(c for c in cuts if 0 <= c < len(frame)):
        with pytest.raises(zf.ZstdFrameError):
            zf.walk_frame(frame[:cut])
    with pytest.raises(zf.ZstdFrameError, match="ends at offset"):
        zf.walk_frame(frame + b"\0")


@pytest.mark.parametrize("kind", ["random", "zeros", "text"])
@pytest.mark.parametrize("level", [-5, 1, 3, 19])
def test_walk_multi_block_frames(kind: str, level: int) -> None:
    content = sample(kind, 700_000, level)
    frame = zstandard.ZstdCompressor(level=level, write_content_size=True).compress(content)
    info = zf.walk_frame(frame)
    assert info.content_size == len(content) and info.block_count >= 6
    for cut in random.Random(level).sample(range(len(frame)), min(40, len(frame))):
        with pytest.raises(zf.ZstdFrameError):
            zf.walk_frame(frame[:cut])


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300))
def test_walk_random_bytes_raise_only_our_error(data: bytes) -> None:
    for candidate in (data, b"\x28\xb5\x2f\xfd" + data):
        with contextlib.suppress(zf.ZstdFrameError):
            zf.walk_frame(candidate)


@settings(max_examples=200, deadline=None)
@given(frames, st.integers(min_value=0), st.integers(min_value=0, max_value=255))
def test_walk_mutated_frames_raise_only_our_error(
    pair: tuple[bytes, bytes], where: int, byte: int
) -> None:
    frame = bytearray(pair[1])
    frame[where % len(frame)] = byte
    with contextlib.suppress(zf.ZstdFrameError):
        zf.walk_frame(bytes(frame))


def test_header_fields() -> None:
    data = sample("text", 300_000, 1)
    frame = zstandard.ZstdCompressor(level=3, write_content_size=False).compress(data)
    header = zf.parse_frame_header(frame)
    assert header.content_size is None and not header.single_segment
    assert header.window_size >= 1 << 10
    assert zf.walk_frame(frame).block_count >= 3
    checked = zstandard.ZstdCompressor(write_checksum=True).compress(b"abc")
    head = zf.parse_frame_header(checked)
    assert head.has_checksum and head.single_segment and head.content_size == 3


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (b"\x50\x2a\x4d\x18\x00\x00\x00\x00", "skippable frame"),
        (b"\x00\x00\x00\x00\x00", "bad magic"),
        (b"\x28\xb5\x2f\xfd\x28", "reserved bit"),
        (b"\x28\xb5\x2f\xfd\x00\xff", "window log 41 exceeds 31"),
        (b"\x28\xb5\x2f\xfd\x21\x03", "truncated: Frame_Content_Size"),
        (b"\x28\xb5\x2f\xfd\x20\x03\x07\x00\x00", "reserved block type"),
        (b"\x28\xb5\x2f\xfd\x20\x03\x19\x00\x00ab", "block 0 at offset 6: block content"),
        (b"\x28\xb5\x2f\xfd\x20\x03\x18\x00\x00abc", "block 1 at offset 12: block header"),
        (b"\x28\xb5\x2f\xfd\x20\x03\x19\x00\x00abcX", "ends at offset 12"),
        (b"\x28\xb5\x2f\xfd\x20\x02\x19\x00\x00abc", "Block_Size 3 exceeds the block maximum 2"),
        (b"\x28\xb5\x2f\xfd\x20\x04\x19\x00\x00abc", "Frame_Content_Size 4 is impossible"),
        (b"\x28\xb5\x2f\xfd\x21\x03\x03\x19\x00\x00abc", "needs dictionary 3"),
        (b"\x28\xb5\x2f\xfd\x20\x03\x19\x00\x00abc", None),
    ],
)
def test_walk_rejects(frame: bytes, message: str | None) -> None:
    if message is None:  # the well-formed frame the others break
        assert zf.walk_frame(frame).content_size == 3
        assert zstandard.ZstdDecompressor().decompress(frame) == b"abc"
        return
    with pytest.raises(zf.ZstdFrameError, match=message):
        zf.walk_frame(frame)
