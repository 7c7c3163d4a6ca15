"""The block index of a large input member (kpack.wheelfile._zstream, ._inflate), on streams
made by hand: the same bytes and index wherever the reader's pieces end; a stream whose last
input bytes zlib still holds output for is read to its end block; and an index that grows
with the member's output, not with its block count (floods of empty or tiny blocks).

The oracle is the standard library's inflate, and the encoder's own record of where each
block starts (:mod:`deflate_fixtures`).
"""

from __future__ import annotations

import itertools
import random
import tracemalloc
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from kpack import cli
from kpack.elf import ElfEdit
from kpack.wheelfile._inflate import member_chunks
from kpack.wheelfile._reuse import DeflateStream, Reuse, plan_reuse, write_reused
from kpack.wheelfile._zip import ZipWriter
from kpack.wheelfile._zstream import BlockInflater, zlib_library
from tests.kpack.wheel_fixtures import ROCRAND_LIB, make_fat_wheel, raw_member
from tests.kpack.wheelfile.deflate_fixtures import Encoder

pytestmark = pytest.mark.skipif(zlib_library() is None, reason="needs a shared zlib (Z_BLOCK)")

CHUNK = 1 << 20  # what the wheel reader asks member_chunks for
NAME = "torch/lib/lib.so"


def _entries_allowed(output: int) -> int:
    """The index's bound: 4096 entries, and one more per 4 KiB of output (plus the first
    and the final block's)."""
    return 4096 + output // 4096 + 2


def _pieces(raw: bytes, size: int) -> list[bytes]:
    return [raw[i : i + size] for i in range(0, len(raw), size)]


def _inflater() -> BlockInflater:
    lib = zlib_library()
    assert lib is not None
    return lib.inflater()


def _run(raw: bytes, piece: int, out_size: int, **bounded: bool) -> tuple[bytes, BlockInflater]:
    """Inflate ``raw`` in pieces of ``piece`` bytes (``bounded=True``: as the wheel reader
    does; else as the chunk joiner does)."""
    inflater = _inflater()
    out = b"".join(inflater.run(_pieces(raw, piece), out_size, block_crcs=True, **bounded))
    return out, inflater


def _index(inflater: BlockInflater) -> tuple[object, ...]:
    blocks, crcs = tuple(inflater.blocks), tuple(inflater.crcs)
    return (inflater.indexed, blocks, crcs, inflater.last, inflater.end)


class _Given:
    """A ``zipfile`` compressor that writes a raw deflate stream made elsewhere."""

    def __init__(self, raw: bytes) -> None:
        self._raw: bytes | None = raw

    def compress(self, data: bytes) -> bytes:
        return b""

    def flush(self, *mode: int) -> bytes:
        raw, self._raw = self._raw or b"", None
        return raw


def _zip(
    monkeypatch: pytest.MonkeyPatch, path: Path, members: dict[str, tuple[bytes, bytes]]
) -> Path:
    """A zip whose members are ``name: (content, its raw deflate stream)``."""
    with zipfile.ZipFile(path, "w") as z:
        for name, (content, raw) in members.items():
            info = zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            with monkeypatch.context() as m:
                m.setattr(zipfile, "_get_compressor", lambda *a, **k: _Given(raw))  # noqa: B023
                with z.open(info, "w") as w:
                    w.write(content)
    return path


def _indexed(path: Path, name: str = NAME) -> tuple[bytes, DeflateStream]:
    streams: list[DeflateStream] = []
    with zipfile.ZipFile(path) as z:
        out = b"".join(member_chunks(z, z.getinfo(name), CHUNK, streams=streams, blocks=True))
    (stream,) = streams
    return out, stream


def _check_entries(stream: DeflateStream, content: bytes, starts: list[tuple[int, int]]) -> None:
    """Every entry is a block the encoder began, in order; its CRC-32 is its output's."""
    assert stream.starts[0] == 0 and stream.bits[0] == 0
    real = set(starts)
    ends = [*stream.starts[1:], len(content)]
    for start, bit, end, crc in zip(stream.starts, stream.bits, ends, stream.crcs, strict=True):
        assert (start, bit) in real
        assert zlib.crc32(content[start:end]) == crc
    assert list(stream.bits) == sorted(set(stream.bits))


# -- streams ------------------------------------------------------------------------------


def _handmade(seed: int) -> Encoder:
    """Every kind of block, empty ones in runs, at every bit offset in a byte."""
    rng = random.Random(seed)
    enc = Encoder()
    enc.literals(rng.randbytes(3000))
    for _ in range(40):
        roll = rng.randrange(7)
        if roll == 0:
            enc.empty_fixed(rng.randrange(1, 9))
        elif roll == 1:
            enc.empty_stored(rng.randrange(1, 4))
        elif roll == 2:
            enc.stored(rng.randbytes(rng.randrange(1, 2000)))
        elif roll == 3:
            enc.literals(rng.randbytes(rng.randrange(1, 500)))
        else:
            enc.repeat(rng.choice((0, 3, 4, 257, 258, 259, 5000, 40000)), rng.randrange(256))
    enc.repeat(30_000, 0, final=True)  # zeros to the end: zlib holds output at the end
    return enc


def _zlib(data: bytes, level: int, mem: int = 8) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, -15, mem)
    return c.compress(data) + c.flush()


def _mixed(seed: int) -> bytes:
    rng = random.Random(seed)
    return rng.randbytes(20_000) + bytes(100_000) + b"abc" * 5000 + bytes(50_000)


def _stream(name: str) -> tuple[bytes, bytes]:
    """(raw stream, its bytes)"""
    if name == "handmade":
        enc = _handmade(1)
        return enc.finish(), bytes(enc.out)
    data = bytes(300_000) if name == "zlib-9-zeros" else _mixed(len(name))
    level, mem = {"zlib-6": (6, 8), "zlib-1-memlevel-1": (1, 1), "zlib-9-zeros": (9, 8)}[name]
    return _zlib(data, level, mem), data


STREAMS = ("handmade", "zlib-6", "zlib-1-memlevel-1", "zlib-9-zeros")


# -- the reader's pieces end anywhere -----------------------------------------------------


@pytest.mark.parametrize("name", STREAMS)
def test_every_piece_size_gives_the_same_bytes_and_index(name: str) -> None:
    """Pieces of 1 to 33 bytes and more: the stream's end, every block boundary and every
    Huffman code fall at every position in a piece, and on its edges; output buffers fill
    at as many places."""
    raw, content = _stream(name)
    assert zlib.decompress(raw, -15) == content
    whole, reference = _run(raw, len(raw), 1 << 20, bounded=True)
    assert whole == content and reference.consumed == len(raw)
    assert reference.end > reference.last >= reference.blocks[-1][1]
    for piece in [*range(1, 34), 255, 256, 257, 4096, len(raw) - 1, len(raw)]:
        for out_size in (97, 4096, 1 << 16):
            out, inflater = _run(raw, piece, out_size, bounded=True)
            assert out == content, (piece, out_size)
            assert inflater.consumed == len(raw)
            assert _index(inflater) == _index(reference), (piece, out_size)


def test_the_index_of_a_handmade_stream_is_exact() -> None:
    enc = _handmade(5)
    raw = enc.finish()
    out, inflater = _run(raw, 1000, 1 << 16, bounded=True)
    assert out == enc.out
    assert inflater.blocks == enc.starts
    assert inflater.last == enc.starts[-1][1] and inflater.end <= 8 * len(raw)


# -- output zlib still holds when the input has run out -----------------------------------


HEADS: dict[str, Callable[[], Encoder]] = {
    "literals": lambda: Encoder().literals(b"head"),
    "zlib-blocks": lambda: Encoder().zlib(random.Random(9).randbytes(1500)),
    "stored-and-empty": lambda: Encoder().stored(b"x" * 700).empty_fixed(5),
}


@pytest.mark.parametrize("head", list(HEADS))
def test_output_held_at_the_end_of_the_input_is_drained(head: str) -> None:
    """A final block of zeros, 13 bits a match of 258 bytes, ends with its last match's code
    anywhere in the stream's last byte (8 lengths). When the output buffer fills r bytes
    before the end (every r within the last match), zlib has read every input byte and
    still holds those r bytes: the stream is whole, not short for want of input."""
    for matches in range(300, 308):
        enc = HEADS[head]().empty_stored().repeat(258 * matches, 0, final=True)
        raw, content = enc.finish(), bytes(enc.out)
        for piece in (1, len(raw)):
            for r in range(1, 259, 1 if piece == len(raw) else 17):
                out, inflater = _run(raw, piece, len(content) - r)
                assert out == content, (matches, piece, r)
                assert inflater.consumed == len(raw) and inflater.end > 0


@pytest.mark.parametrize("level", [1, 9])
@pytest.mark.parametrize("prefix", [b"", b"abc"])
def test_zeros_deflated_by_zlib_with_the_buffer_full_anywhere(level: int, prefix: bytes) -> None:
    """zlib's own streams of zeros, read into small buffers that fill at every offset."""
    for size in (100_000, 300_000):
        data = prefix + bytes(size)
        raw = _zlib(data, level)
        for out_size in range(60, 90):
            out, _ = _run(raw, len(raw), out_size)
            assert out == data, (size, out_size)


def _tail(enc: Encoder, zeros: int, matches: int) -> Encoder:
    """A final block of ``zeros`` zeros: literals, then ``matches`` matches of 258."""
    return enc.repeat(258 * matches, 0, literals=zeros - 258 * matches, final=True)


def _tail_size(prefix: int, at_least: int) -> tuple[int, int]:
    """(zeros, matches) for :func:`_tail` after ``prefix`` bytes of output: the whole is 100
    bytes past a multiple of :data:`CHUNK` (so the reader's output buffer fills inside the
    last match), and the last match's code ends in the stream's last byte, before the
    end-of-block code (so zlib has read every input byte by then)."""
    chunks = (prefix + at_least) // CHUNK + 1
    zeros = chunks * CHUNK + 100 - prefix
    # bits: 3 + 8 * literals + 13 * matches + 7, a multiple of 8 when matches = 6 (mod 8)
    matches = (zeros - 1) // 258
    matches -= (matches - 6) % 8
    return zeros, matches


def test_a_member_of_zeros_whose_last_byte_is_read_before_its_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the wheel reader (1 MiB output pieces): zlib's blocks, then zeros whose
    last match's code is in the last input byte and whose output fills a piece 100 bytes
    before the end."""
    head = random.Random(4).randbytes(70_000)
    enc = Encoder().zlib(head)
    enc = _tail(enc, *_tail_size(len(head), 2 * CHUNK))
    raw = enc.finish()
    content = bytes(enc.out)
    assert len(content) % CHUNK == 100 and zlib.decompress(raw, -15) == content
    path = _zip(monkeypatch, tmp_path / "a.zip", {NAME: (content, raw)})
    out, stream = _indexed(path)
    assert out == content and stream.length == len(content) and len(stream.starts) >= 2


# -- floods of empty and tiny blocks ------------------------------------------------------


def _flood(seed: int, empties: int) -> Encoder:
    """1.2 MB in blocks of 10-15 KB (literals, stored, runs), with ``empties`` empty blocks
    (fixed and stored) in four floods among them."""
    rng = random.Random(seed)
    enc = Encoder()
    for n in range(4):
        for k in range(25):
            if k == 12:
                enc.empty_fixed(empties // 8).empty_stored(empties // 8)
            kind = (n + k) % 3
            if kind == 0:
                enc.literals(rng.randbytes(10_000))
            elif kind == 1:
                enc.stored(rng.randbytes(12_000))
            else:
                enc.repeat(15_000, rng.randrange(256))
    return enc


def test_a_flood_of_empty_blocks_keeps_the_index_small_and_right(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """40,000 empty blocks among 1.2 MB of output: every entry is a real block start with
    its output's CRC-32, fewer than the bound, and an edit of the member is spliced."""
    enc = _flood(1, 40_000)
    raw, content = enc.finish(), bytes(enc.out)
    out, stream = _indexed(_zip(monkeypatch, tmp_path / "a.zip", {NAME: (content, raw)}))
    assert out == content
    assert 2 <= len(stream.starts) <= _entries_allowed(len(content))
    _check_entries(stream, content, enc.starts)
    _splices(tmp_path, stream, content)


def test_a_flood_past_the_budget_falls_back_to_a_plain_inflate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """400,000 empty blocks for 1.2 MB of output: the member is inflated right, not indexed
    (it is compressed anew if edited), and indexing it holds no per-block memory."""
    enc = _flood(2, 400_000)
    raw, content = enc.finish(), bytes(enc.out)
    path = _zip(monkeypatch, tmp_path / "a.zip", {NAME: (content, raw), "next": (b"x", b"x")})
    tracemalloc.start()
    try:
        out, stream = _indexed(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out == content and stream.crc == zlib.crc32(content)
    assert stream.starts == () and peak < 8 << 20  # the output pieces, a few MiB
    assert plan_reuse(Reuse.unchanged(stream), len(content)) is not None  # still copied whole


def test_many_tiny_blocks_are_indexed_coarsely(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """20,000 blocks of 200 bytes (zlib at memLevel 1 writes such): more than the index
    holds block by block, so entries are at least 4 KiB of output apart; all are real
    block starts, and an edit is spliced."""
    rng = random.Random(3)
    enc = Encoder()
    for n in range(20_000):
        if n % 3:
            enc.literals(rng.randbytes(200))
        else:
            enc.stored(rng.randbytes(200))
    raw, content = enc.finish(), bytes(enc.out)
    out, stream = _indexed(_zip(monkeypatch, tmp_path / "a.zip", {NAME: (content, raw)}))
    assert out == content
    assert 100 < len(stream.starts) <= _entries_allowed(len(content))
    gaps = [b - a for a, b in itertools.pairwise(stream.starts)]
    assert min(gaps[-500:]) >= 4096
    _check_entries(stream, content, enc.starts)
    _splices(tmp_path, stream, content)


def _splices(tmp_path: Path, stream: DeflateStream, content: bytes) -> None:
    """An edit in the middle of the member is spliced from the index and decodes right."""
    source = tmp_path / "lib.so"
    source.write_bytes(content)
    edit = ElfEdit(source, len(content), ((len(content) // 2, b"EDIT"),), b"")
    expected = b"".join(edit.iter_chunks())
    reuse = Reuse(stream, edit.kept_runs())
    plan = plan_reuse(reuse, edit.size)
    assert plan, "most of the member is kept: it must be spliced"
    with open(tmp_path / "out.zip", "w+b") as f:
        writer = ZipWriter(f, 315532800)
        write_reused(
            writer,
            NAME,
            executable=False,
            reuse=reuse,
            plan=plan,
            content=iter([expected]),
            size=len(expected),
            level=6,
        )
        writer.close()
    with zipfile.ZipFile(tmp_path / "out.zip") as z:
        assert z.read(NAME) == expected
    assert zlib.decompress(raw_member(tmp_path / "out.zip", NAME), -15) == expected


# -- a real library and 2.9 MB of zeros ---------------------------------------------------


@pytest.mark.real
def test_a_wheel_of_a_real_library_and_zeros_splits(
    debian_package: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """librocrand and about 2.9 MB of zeros, deflated so that the reader's 1 MiB output
    buffer fills inside the last match, after the last input byte was read: the wheel is
    whole (``unzip -t`` passes) and splits."""
    library = (debian_package("librocrand1") / ROCRAND_LIB).read_bytes()
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    head = c.compress(library) + c.flush(zlib.Z_SYNC_FLUSH)
    zeros, matches = _tail_size(len(library), 2_900_000)
    enc = Encoder()
    _tail(enc, zeros, matches)
    raw = head + enc.finish()
    padded = library + bytes(enc.out)
    assert 2_900_000 < zeros < 4_000_000 and len(padded) % CHUNK == 100
    assert zlib.decompress(raw, -15) == padded
    (tmp_path / "librocrand.so.1").write_bytes(padded)
    fat = make_fat_wheel(tmp_path / "fat", tmp_path / "librocrand.so.1")
    wheel = tmp_path / "in" / fat.name
    wheel.parent.mkdir()
    lib = "torch/lib/librocrand.so.1"
    with zipfile.ZipFile(fat) as z:
        members = {i.filename: z.read(i) for i in z.infolist()}
    _zip(monkeypatch, wheel, {n: (d, raw if n == lib else _zlib(d, 6)) for n, d in members.items()})
    with zipfile.ZipFile(wheel) as z:
        assert z.testzip() is None
    out = tmp_path / "out"
    argv = ["split-wheel", "--input", str(wheel), "--output-dir", str(out),
            "--wheel-type", "torch-fat", "--compression", "none", "-j", "2"]  # fmt: skip
    assert cli.main(argv) == 0
    host = out / fat.name
    with zipfile.ZipFile(host) as z:
        assert z.testzip() is None
        split = z.read(lib)
    assert bytes(zeros) in split and len(split) < len(padded)  # the device code is cut out
