"""kpack.wheelfile._member.open_source: generated content is cut into fixed chunks whatever
the generator yields, full chunks pass without a copy, and a reused buffer is copied."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator

import pytest

from kpack.errors import PackagingError
from kpack.wheelfile import Generated, Member, open_source

CHUNK = 1000


def _chunks(source: Generated | bytes) -> list[tuple[bytes, bool]]:
    with open_source(Member("a/b.bin", source), CHUNK) as stream:
        return list(stream.chunks)


def _expected(data: bytes) -> list[tuple[bytes, bool]]:
    starts = range(0, len(data), CHUNK)
    return [(data[i : i + CHUNK], i + CHUNK >= len(data)) for i in starts] or [(b"", True)]


@pytest.mark.parametrize("seed", range(8))
def test_any_pieces_give_the_content_cut_in_fixed_chunks(seed: int) -> None:
    rng = random.Random(seed)
    data = rng.randbytes(rng.randint(0, 7 * CHUNK))
    cuts = sorted(rng.sample(range(len(data) + 1), min(len(data) + 1, rng.randint(0, 12))))
    bounds = [0, *cuts, len(data)]
    kinds = (bytes, bytearray, memoryview)
    pieces = [rng.choice(kinds)(data[a:b]) for a, b in itertools.pairwise(bounds)]
    got = _chunks(Generated(len(data), lambda: iter(pieces)))
    assert got == _expected(data)
    assert all(type(chunk) is bytes for chunk, _ in got)


def test_a_full_chunk_of_bytes_passes_without_a_copy() -> None:
    first, second = bytes(range(256)) * 4, b"x" * CHUNK
    full = first[:CHUNK]
    got = _chunks(Generated(2 * CHUNK, lambda: iter([full, second])))
    assert got[0][0] is full and got[1][0] is second


def test_a_buffer_filled_again_after_each_piece_is_copied() -> None:
    def refilled() -> Iterator[bytes | memoryview]:
        buf = bytearray(300)
        for value in range(10):
            buf[:] = bytes([value]) * 300
            yield memoryview(buf)

    data = b"".join(bytes([v]) * 300 for v in range(10))
    assert _chunks(Generated(len(data), refilled)) == _expected(data)


def test_a_piece_that_is_not_bytes_is_refused() -> None:
    with pytest.raises(PackagingError, match="yielded str, not bytes"):
        _chunks(Generated(3, lambda: iter(["abc"])))  # type: ignore[list-item]
