"""The deflate-index fuzz reader's seeds are good inputs that reach every path: each one
inflates to zlib's bytes with its index checked, and the flood of empty blocks gives its
index up; damage to a seed is refused or inflated as zlib does, never anything else."""

from __future__ import annotations

from pathlib import Path

import pytest

from kpack.errors import PackagingError
from kpack.wheelfile._zstream import zlib_library

from .deflate_reader import _deflate_seeds, _run_deflate_index

pytestmark = pytest.mark.skipif(zlib_library() is None, reason="needs a shared zlib (Z_BLOCK)")


@pytest.mark.parametrize("index", range(5))
def test_seeds_inflate_with_every_piece_and_buffer_size(tmp_path: Path, index: int) -> None:
    seed = _deflate_seeds()[index]
    for choice in range(0, 256, 5 if index < 4 else 51):
        _run_deflate_index(bytes([choice]) + seed[1:], tmp_path)


def test_a_seed_cut_short_is_refused(tmp_path: Path) -> None:
    for seed in _deflate_seeds():
        for cut in (1, 2, len(seed) // 2):
            with pytest.raises(PackagingError, match=r"ends before its end block|does not decode"):
                _run_deflate_index(seed[:-cut], tmp_path)


def test_the_flood_seed_gives_its_index_up() -> None:
    lib = zlib_library()
    assert lib is not None
    inflater = lib.inflater()
    raw = _deflate_seeds()[4][1:]
    assert b"".join(inflater.run([raw], 1 << 16, block_crcs=True, bounded=True))
    assert not inflater.indexed and inflater.blocks == [] and inflater.consumed == len(raw)
