"""Joinable libdeflate chunks (kpack.wheelfile._join): every piece but the last ends open
and byte-aligned, so that the pieces concatenate into one deflate stream. The oracle is
the standard library's inflate of the concatenation."""

from __future__ import annotations

import os
import random
import zlib
from pathlib import Path
from types import SimpleNamespace

import deflate as libdeflate
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kpack.errors import PackagingError
from kpack.wheelfile import _join
from kpack.wheelfile._join import ChunkJoiner, joiner


@pytest.fixture(scope="module")
def join() -> ChunkJoiner:
    found = joiner()
    assert found is not None, "Linux CPython links a shared zlib"
    return found


def _inflate(stream: bytes) -> bytes:
    dec = zlib.decompressobj(-15)
    out = dec.decompress(stream)
    assert dec.eof and not dec.unused_data
    return out


def _real_code() -> bytes:
    """Host code: the first 6 MiB of the largest shared library on this machine."""
    libs = sorted(Path("/usr/lib/x86_64-linux-gnu").glob("*.so*"), key=lambda p: p.stat().st_size)
    return libs[-1].read_bytes()[: 6 << 20]


def test_pieces_of_every_kind_concatenate(join: ChunkJoiner) -> None:
    rng = random.Random(7)
    pieces = [
        _real_code(),  # many dynamic-Huffman blocks
        os.urandom(1 << 20),  # incompressible: stored blocks
        b"a" * 100_000,  # one block, long matches
        b"",
        b"x",
        bytes(rng.getrandbits(8) % 3 for _ in range(1000)),
    ]
    parts = [join.compress(p, 6, final=False) for p in pieces]
    parts.append(join.compress(b"the end", 6, final=True))
    for part in parts[:-1]:
        assert part.endswith(b"\x00\x00\xff\xff")
    assert _inflate(b"".join(parts)) == b"".join(pieces) + b"the end"
    # each open piece is libdeflate's own stream, only re-ended: no larger than 5 bytes more
    for piece, part in zip(pieces, parts, strict=False):
        assert len(part) <= len(libdeflate.deflate_compress(piece, 6)) + 5


def test_a_final_piece_is_libdeflate_untouched(join: ChunkJoiner) -> None:
    data = _real_code()[: 1 << 20]
    assert join.compress(data, 6, final=True) == bytes(libdeflate.deflate_compress(data, 6))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=3000), min_size=1, max_size=6), st.integers(1, 12))
def test_any_pieces_at_any_level_concatenate(pieces: list[bytes], level: int) -> None:
    join = joiner()
    assert join is not None
    parts = [join.compress(p, level, final=i == len(pieces) - 1) for i, p in enumerate(pieces)]
    assert _inflate(b"".join(parts)) == b"".join(pieces)


def test_a_stream_that_does_not_decode_back_is_refused(
    join: ChunkJoiner, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _real_code()[: 1 << 20]
    good = bytes(libdeflate.deflate_compress(data, 6))
    wrong = data[:-1] + bytes([data[-1] ^ 1])
    other = bytes(libdeflate.deflate_compress(wrong, 6))  # valid, other bytes
    wrong_bytes = SimpleNamespace(deflate_compress=lambda d, lv: other)
    monkeypatch.setattr(_join, "libdeflate", lambda: wrong_bytes)
    with pytest.raises(PackagingError, match="did not decode back"):
        join.compress(data, 6, final=False)
    half = SimpleNamespace(deflate_compress=lambda d, lv: good[: len(good) // 2])
    monkeypatch.setattr(_join, "libdeflate", lambda: half)
    with pytest.raises(PackagingError, match=r"does not inflate|did not decode back"):
        join.compress(data, 6, final=False)
