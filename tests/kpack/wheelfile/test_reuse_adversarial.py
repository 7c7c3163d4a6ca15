"""Adversarial tests of the reuse of an input member's deflate stream (kpack.wheelfile._reuse).

The input streams are made by many compressors and settings (zlib levels 0/1/9, memLevel 1
with its tiny blocks, full, sync, partial and block flushes, the fixed, RLE, Huffman-only and
filtered strategies, libdeflate 0/1/12, ISA-L 0..3) and by a hand-made encoder whose blocks
start at every bit offset in a byte, hold stored and empty blocks, and refer back exactly
32 KiB. Every spliced member must decode, by zlib and by ISA-L and through ``zipfile``, to
exactly the edited bytes; inputs written with data descriptors, zip64 local headers or bytes
before the archive are read alike; an input changed behind the writer's back and a
cancelled run are errors, never a member written as if nothing happened.
"""

from __future__ import annotations

import dataclasses
import io
import random
import shutil
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import deflate as libdeflate
import pytest
from isal import isal_zlib

from kpack.common import cancel
from kpack.elf import ElfEdit
from kpack.errors import PackagingError
from kpack.wheelfile import Generated, Member, write_wheel
from kpack.wheelfile._inflate import member_chunks
from kpack.wheelfile._reuse import WHOLE, DeflateStream, Reuse, plan_reuse, write_reused
from kpack.wheelfile._zip import ZipWriter
from kpack.wheelfile._zstream import zlib_library
from tests.kpack.wheel_fixtures import ROCRAND_LIB, TAG, VERSION, metadata, raw_member

pytestmark = [
    pytest.mark.real,
    pytest.mark.skipif(zlib_library() is None, reason="needs a shared zlib (Z_BLOCK)"),
]

NAME = "torch/lib/lib.so"
SIZE = 3 << 20
WINDOW = 32 << 10
EPOCH = 315532800


@pytest.fixture(scope="module")
def data(debian_package: Callable[[str], Path]) -> bytes:
    """3 MiB of a real library (host code and data), so that blocks look like real ones."""
    with open(debian_package("librocrand1") / ROCRAND_LIB, "rb") as f:
        f.seek(1 << 20)
        return f.read(SIZE)


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("adversarial")


class _Given:
    """A ``zipfile`` compressor that writes a raw deflate stream made elsewhere."""

    def __init__(self, raw: bytes) -> None:
        self._raw: bytes | None = raw

    def compress(self, data: bytes) -> bytes:
        return b""

    def flush(self, *mode: int) -> bytes:
        raw, self._raw = self._raw or b"", None
        return raw


class _Unseekable(io.RawIOBase):
    """A file ``zipfile`` cannot seek in: it writes data descriptors (flag 0x08)."""

    def __init__(self, f: io.BufferedWriter) -> None:
        self._f = f

    def writable(self) -> bool:
        return True

    def write(self, b: bytes) -> int:  # type: ignore[override]
        return self._f.write(b)

    def tell(self) -> int:
        return self._f.tell()


def _zip(
    monkeypatch: pytest.MonkeyPatch,
    path: Path,
    data: bytes,
    raw: bytes,
    *,
    descriptor: bool = False,
    zip64: bool = False,
    prefix: bytes = b"",
) -> Path:
    """An archive whose member :data:`NAME` is ``data`` deflated as ``raw``."""
    with monkeypatch.context() as m:
        m.setattr(zipfile, "_get_compressor", lambda *a, **k: _Given(raw))
        with open(path, "wb") as f:
            f.write(prefix)
            target = _Unseekable(f) if descriptor else f
            with zipfile.ZipFile(target, "w") as z:  # type: ignore[arg-type]
                z.writestr("torch/__init__.py", b"")
                info = zipfile.ZipInfo(NAME, (2020, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                with z.open(info, "w", force_zip64=zip64) as w:
                    w.write(data)
    return path


def _index(path: Path) -> DeflateStream:
    with zipfile.ZipFile(path) as z:
        streams: list[DeflateStream] = []
        chunks = member_chunks(z, z.getinfo(NAME), 1 << 20, streams=streams, blocks=True)
        inflated = b"".join(chunks)
    (stream,) = streams
    assert inflated_ok(inflated, stream)
    return stream


def inflated_ok(inflated: bytes, stream: DeflateStream) -> bool:
    return len(inflated) == stream.length and zlib.crc32(inflated) == stream.crc


def _write(path: Path, reuse: Reuse, plan: object, content: bytes, level: int = 6) -> bytes:
    """``content`` written as :data:`NAME` by :func:`write_reused`; its compressed bytes."""
    with open(path, "w+b") as f:
        writer = ZipWriter(f, EPOCH)
        pieces = (content[i : i + (1 << 20)] for i in range(0, len(content), 1 << 20))
        write_reused(
            writer,
            NAME,
            executable=False,
            reuse=reuse,
            plan=plan,  # type: ignore[arg-type]
            content=pieces,
            size=len(content),
            level=level,
        )
        writer.close()
    return _check(path, content)


def _check(path: Path, expected: bytes) -> bytes:
    """Two decoders and ``zipfile`` (CRC included) give back ``expected``."""
    with zipfile.ZipFile(path) as z:
        assert z.testzip() is None
        assert z.read(NAME) == expected
    raw = raw_member(path, NAME)
    assert zlib.decompress(raw, -15) == expected
    inflater = isal_zlib.decompressobj(-15)
    assert inflater.decompress(raw) == expected
    assert inflater.eof and not inflater.unused_data
    return raw


# -- input streams by many compressors --------------------------------------------------


def _zlib(
    level: int = 6,
    mem: int = 8,
    strategy: int = zlib.Z_DEFAULT_STRATEGY,
    flush: int | None = None,
    piece: int = 1 << 16,
) -> Callable[[bytes], bytes]:
    def make(data: bytes) -> bytes:
        c = zlib.compressobj(level, zlib.DEFLATED, -15, mem, strategy)
        out = []
        for i in range(0, len(data), piece):
            out.append(c.compress(data[i : i + piece]))
            if flush is not None:
                out.append(c.flush(flush))
        out.append(c.flush())
        return b"".join(out)

    return make


def _isal(level: int) -> Callable[[bytes], bytes]:
    def make(data: bytes) -> bytes:
        c = isal_zlib.compressobj(level, isal_zlib.DEFLATED, -15)
        return c.compress(data) + c.flush()

    return make


def _libdeflate(level: int) -> Callable[[bytes], bytes]:
    return lambda data: bytes(libdeflate.deflate_compress(data, level))


COMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "zlib-0": _zlib(0),
    "zlib-1": _zlib(1),
    "zlib-9": _zlib(9),
    "zlib-memlevel-1": _zlib(6, mem=1),
    "zlib-9-memlevel-9": _zlib(9, mem=9),
    "zlib-fixed": _zlib(6, strategy=zlib.Z_FIXED),
    "zlib-rle": _zlib(6, strategy=zlib.Z_RLE),
    "zlib-huffman-only": _zlib(6, strategy=zlib.Z_HUFFMAN_ONLY),
    "zlib-filtered": _zlib(6, strategy=zlib.Z_FILTERED),
    "zlib-full-flush": _zlib(6, flush=zlib.Z_FULL_FLUSH, piece=200_000),
    "zlib-sync-flush": _zlib(6, flush=zlib.Z_SYNC_FLUSH, piece=130_000),
    "zlib-partial-flush": _zlib(6, flush=zlib.Z_PARTIAL_FLUSH, piece=7777),
    "zlib-memlevel-1-partial-flush": _zlib(6, mem=1, flush=zlib.Z_PARTIAL_FLUSH, piece=5000),
    "zlib-block-flush": _zlib(6, flush=zlib.Z_BLOCK, piece=9999),
    "libdeflate-0": _libdeflate(0),
    "libdeflate-1": _libdeflate(1),
    "libdeflate-12": _libdeflate(12),
    "isal-0": _isal(0),
    "isal-1": _isal(1),
    "isal-2": _isal(2),
    "isal-3": _isal(3),
}


def _edits(source: Path, size: int) -> Iterator[tuple[str, ElfEdit]]:
    yield "patch-at-0", ElfEdit(source, size, ((0, b"XX"),), b"")
    yield "patch-at-the-end", ElfEdit(source, size, ((size - 3, b"YYY"),), b"")
    yield "last-byte", ElfEdit(source, size, ((size - 1, b"!"),), b"")
    yield (
        "zeros-appended",
        ElfEdit(source, size, ((size // 2, b"Z" * 10),), b"A" * 99, zero_fill=5000),
    )
    yield (
        "cut",
        ElfEdit(source, size, ((0x40, b"Q" * 8),), b"", removed=(size // 3, size // 3 + 99999)),
    )
    adjacent = ((1000, b"a"), (1001, b"b"), (size // 2, b"c"), (size // 2 + 1, b"d"))
    yield "adjacent-patches", ElfEdit(source, size, adjacent, b"")
    yield "tail-cut", ElfEdit(source, size, (), b"", removed=(size - 200_000, size))
    yield "head-cut", ElfEdit(source, size, (), b"", removed=(0, 100_000))
    inner = ElfEdit(
        source, size, ((0x18, b"\1\2\3\4"),), b"note", removed=(size // 4, size // 4 + 4096)
    )
    yield "edit-of-an-edit", ElfEdit(inner, inner.size, ((inner.size // 2, b"R" * 16),), b"x")
    rng = random.Random(size)
    for n in range(3):
        at = sorted(rng.sample(range(0, size - 64, 64), 4))
        patches = tuple((p, rng.randbytes(rng.randrange(1, 64))) for p in at)
        yield f"random-{n}", ElfEdit(source, size, patches, rng.randbytes(rng.randrange(0, 3000)))


@pytest.mark.parametrize("compressor", list(COMPRESSORS))
def test_streams_of_any_compressor_are_spliced_right(
    data: bytes, work: Path, monkeypatch: pytest.MonkeyPatch, compressor: str
) -> None:
    raw = COMPRESSORS[compressor](data)
    assert zlib.decompress(raw, -15) == data
    base = work / compressor
    base.mkdir()
    stream = _index(_zip(monkeypatch, base / "in.zip", data, raw))
    assert stream.starts[0] == 0 and stream.bits[0] == 0
    assert list(stream.bits) == sorted(set(stream.bits))
    source = base / "lib.so"
    source.write_bytes(data)
    spliced = 0
    for _, edit in _edits(source, SIZE):
        expected = b"".join(edit.iter_chunks())
        reuse = Reuse(stream, edit.kept_runs())
        plan = plan_reuse(reuse, edit.size)
        if plan is None:
            continue
        assert plan is not WHOLE
        _write(base / "out.zip", reuse, plan, expected)
        spliced += 1
    if len(stream.starts) > 20:  # enough blocks that some edit must be spliced
        assert spliced
    # unchanged: the compressed bytes are copied as they are
    assert plan_reuse(Reuse.unchanged(stream), SIZE) is WHOLE
    assert _write(base / "whole.zip", Reuse.unchanged(stream), WHOLE, data) == raw


@pytest.mark.parametrize(
    "layout",
    [{"descriptor": True}, {"zip64": True}, {"descriptor": True, "zip64": True}, {"prefix": b"#!"}],
    ids=["data-descriptor", "zip64", "data-descriptor-zip64", "bytes-before-the-archive"],
)
def test_input_archive_layouts(
    data: bytes, work: Path, monkeypatch: pytest.MonkeyPatch, layout: dict[str, object]
) -> None:
    base = work / ("layout-" + "-".join(layout))
    base.mkdir()
    raw = _zlib(6, mem=1)(data)
    path = _zip(monkeypatch, base / "in.zip", data, raw, **layout)  # type: ignore[arg-type]
    with zipfile.ZipFile(path) as z:
        info = z.getinfo(NAME)
    assert bool(info.flag_bits & 0x08) == bool(layout.get("descriptor"))
    stream = _index(path)
    if layout.get("zip64"):  # the local header has a zip64 extra field the offset skips
        assert stream.offset == info.header_offset + 30 + len(NAME) + 20
    source = base / "lib.so"
    source.write_bytes(data)
    patches = ((0x40, b"P"), (SIZE // 2, b"Q" * 33))
    edit = ElfEdit(
        source, SIZE, patches, b"E", removed=(SIZE // 3, SIZE // 3 + 70000), zero_fill=4096
    )
    expected = b"".join(edit.iter_chunks())
    reuse = Reuse(stream, edit.kept_runs())
    plan = plan_reuse(reuse, edit.size)
    assert plan
    _write(base / "out.zip", reuse, plan, expected)
    assert _write(base / "whole.zip", Reuse.unchanged(stream), WHOLE, data) == raw


# -- a hand-made stream: every bit offset, stored and empty blocks, 32 KiB back ----------


class _Bits:
    def __init__(self) -> None:
        self.value = 0
        self.count = 0

    def put(self, value: int, n: int) -> None:  # deflate's fields: least significant bit first
        self.value |= value << self.count
        self.count += n

    def code(self, code: int, n: int) -> None:  # Huffman codes: most significant bit first
        self.put(int(f"{code:0{n}b}"[::-1], 2), n)

    def align(self) -> None:
        self.count = (self.count + 7) // 8 * 8

    def bytes(self) -> bytes:
        return self.value.to_bytes((self.count + 7) // 8, "little")


_LBASE = [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99,
          115, 131, 163, 195, 227, 258]  # fmt: skip
_LEXTRA = [0] * 8 + [1] * 4 + [2] * 4 + [3] * 4 + [4] * 4 + [5] * 4 + [0]


def _symbol(bits: _Bits, symbol: int) -> None:  # the fixed literal/length code
    if symbol < 144:
        bits.code(0x30 + symbol, 8)
    elif symbol < 256:
        bits.code(0x190 + symbol - 144, 9)
    elif symbol < 280:
        bits.code(symbol - 256, 7)
    else:
        bits.code(0xC0 + symbol - 280, 8)


def _match_32k(bits: _Bits, length: int) -> None:
    """A match ``length`` bytes long at distance 32768 (code 29, 13 extra bits all ones)."""
    i = 28 if length == 258 else max(k for k in range(28) if _LBASE[k] <= length)
    _symbol(bits, 257 + i)
    bits.put(length - _LBASE[i], _LEXTRA[i])
    bits.code(29, 5)
    bits.put(32768 - 24577, 13)


Block = tuple[str, object]


def _encode(blocks: list[Block]) -> tuple[bytes, bytes, list[tuple[int, int]]]:
    """(raw stream, its bytes, (output offset, bit offset) of every block); the last block is
    final. Blocks: ("literals", bytes), ("matches", [lengths at distance 32768]),
    ("stored", bytes)."""
    bits, out, starts = _Bits(), bytearray(), []
    for n, (kind, body) in enumerate(blocks):
        starts.append((len(out), bits.count))
        final = int(n == len(blocks) - 1)
        if kind == "stored":
            assert isinstance(body, bytes)
            bits.put(final, 1)
            bits.put(0, 2)
            bits.align()
            bits.put(len(body), 16)
            bits.put(len(body) ^ 0xFFFF, 16)
            for byte in body:
                bits.put(byte, 8)
            out += body
            continue
        bits.put(final, 1)
        bits.put(1, 2)
        if kind == "literals":
            assert isinstance(body, bytes)
            for byte in body:
                _symbol(bits, byte)
            out += body
        else:
            assert isinstance(body, list)
            for length in body:
                _match_32k(bits, length)
                for _ in range(length):
                    out.append(out[-WINDOW])
        _symbol(bits, 256)
    return bits.bytes(), bytes(out), starts


def _periodic_blocks(head: bytes, rng: random.Random, size: int) -> list[Block]:
    """32 KiB of literals, then blocks of matches 32768 back (some lengths short, so that
    blocks start at every bit offset), stored blocks and empty ones among them."""
    blocks: list[Block] = [("literals", head)]
    total = len(head)
    while total < size:
        roll = rng.random()
        if roll < 0.1:
            blocks.append(("stored", b""))  # a sync flush's marker
            continue
        if roll < 0.15:
            blocks.append(("matches", []))  # a partial flush's empty fixed block
            continue
        if roll < 0.3:
            body = rng.randbytes(rng.randrange(1, 3000))
            blocks.append(("stored", body))
            total += len(body)
            continue
        lengths = [258] * rng.randrange(10, 200) + [rng.randrange(3, 258)]
        blocks.append(("matches", lengths))
        total += sum(lengths)
    blocks.append(("matches", [258] * 4))
    return blocks


@pytest.fixture(scope="module")
def handmade(
    data: bytes, work: Path, monkeypatch_module: pytest.MonkeyPatch
) -> tuple[bytes, Path, DeflateStream, list[tuple[int, int]]]:
    raw, content, starts = _encode(_periodic_blocks(data[:WINDOW], random.Random(7), 2 << 20))
    assert zlib.decompress(raw, -15) == content
    assert {bit % 8 for _, bit in starts} == set(range(8))
    base = work / "handmade"
    base.mkdir()
    stream = _index(_zip(monkeypatch_module, base / "in.zip", content, raw))
    # the index is exactly where the encoder put the blocks (empty blocks included)
    assert list(zip(stream.starts, stream.bits, strict=True)) == starts
    (base / "lib.so").write_bytes(content)
    return content, base, stream, starts


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as m:
        yield m


def test_blocks_at_every_bit_offset_are_padded_and_closed_right(
    handmade: tuple[bytes, Path, DeflateStream, list[tuple[int, int]]],
) -> None:
    """Copies start at bit offsets 0, 2, 4 and 6 of a byte and end at all eight."""
    content, base, stream, _ = handmade
    size = len(content)
    begins, ends = set(), set()
    rng = random.Random(3)
    for n in range(40):
        p = rng.randrange(WINDOW, size - 1000)
        edit = ElfEdit(base / "lib.so", size, ((p, b"\xaa" * rng.randrange(1, 9)),), b"")
        if n % 3 == 0:
            edit = ElfEdit(
                base / "lib.so", size, ((p, b"\x55"),), b"", zero_fill=rng.randrange(1, 999)
            )
        expected = b"".join(edit.iter_chunks())
        reuse = Reuse(stream, edit.kept_runs())
        plan = plan_reuse(reuse, edit.size)
        if plan is None:
            continue
        for copy in plan:
            begins.add(stream.bits[copy.first] % 8)
            ends.add(stream.bits[copy.last] % 8)
            assert stream.bits[copy.first] % 2 == 0
        _write(base / "out.zip", reuse, plan, expected)
    assert begins == {0, 2, 4, 6}
    assert ends == set(range(8))


@pytest.mark.parametrize("delta", [0, 1])
def test_a_block_exactly_32k_past_an_edit_is_copied_and_decodes(
    handmade: tuple[bytes, Path, DeflateStream, list[tuple[int, int]]], delta: int
) -> None:
    """Every match of the stream reaches back exactly 32768 bytes. The kept run starts 32768
    bytes before a block (``delta`` 0): the block is copied and its first match refers to
    the run's first byte; one byte later (``delta`` 1) it must not be."""
    content, base, stream, starts = handmade
    size = len(content)
    checked = 0
    for i, (start, bit) in enumerate(starts[:-1]):
        if start < 2 * WINDOW or bit % 2 or starts[i + 1][0] == start:
            continue
        patch = start - WINDOW - 1 + delta  # the kept run starts just after it
        edit = ElfEdit(base / "lib.so", size, ((patch, b"\xaa"),), b"")
        reuse = Reuse(stream, edit.kept_runs())
        plan = plan_reuse(reuse, size)
        if plan is None or len(plan) != 2:
            continue
        assert (plan[1].start == start) == (delta == 0)
        assert plan[1].start >= patch + 1 + WINDOW
        _write(base / "out.zip", reuse, plan, b"".join(edit.iter_chunks()))
        checked += 1
        if checked == 4:
            break
    assert checked == 4


# -- thresholds of plan_reuse --------------------------------------------------------------


def _synthetic(length: int, starts: tuple[int, ...], bits: tuple[int, ...]) -> DeflateStream:
    crcs = (0,) * len(starts)
    return DeflateStream(
        archive=Path("unused"),
        offset=0,
        size=1,
        length=length,
        crc=0,
        raw_digest=b"",
        starts=starts,
        bits=bits,
        crcs=crcs,
    )


def test_plan_thresholds() -> None:
    kib = 1 << 10
    whole = _synthetic(256 * kib, (0, 256 * kib), (0, 8))
    assert plan_reuse(Reuse.unchanged(whole), 256 * kib) is WHOLE
    small = _synthetic(256 * kib - 1, (0, 256 * kib - 1), (0, 8))
    assert plan_reuse(Reuse.unchanged(small), 256 * kib - 1) is None
    # the final block (from 7 MiB on) is compressed anew, and the byte appended
    mib = 1 << 20
    stream = _synthetic(8 * mib - 1, (0, 7 * mib), (0, 100))
    assert plan_reuse(Reuse(stream, ((0, 0, 8 * mib - 1),)), 8 * mib)  # exactly an eighth
    stream = _synthetic(8 * mib, (0, 7 * mib), (0, 100))
    assert plan_reuse(Reuse(stream, ((0, 0, 8 * mib),)), 8 * mib + 1) is None  # more
    # never the final block, even when the run covers it
    final = _synthetic(8 * mib, (0, 4 * mib), (0, 100))
    plan = plan_reuse(Reuse(final, ((0, 0, 8 * mib),)), 8 * mib + 1)
    assert plan is None  # the final block is half the member
    # a copy of exactly 256 KiB pays, one byte less does not
    runs = ((0, 0, 280 * kib),)
    exact = _synthetic(280 * kib, (0, 256 * kib), (0, 10))
    assert plan_reuse(Reuse(exact, runs), 280 * kib + 1)
    short = _synthetic(280 * kib, (0, 256 * kib - 1), (0, 10))
    assert plan_reuse(Reuse(short, runs), 280 * kib + 1) is None
    # odd bit offsets are skipped to the next even one; the run's first 32 KiB never copied
    starts = (*range(0, 4 * mib, 64 * kib), 4 * mib)
    bits = tuple(10 * i + (1 if i in (2, 3) else 0) for i in range(len(starts)))
    stream = _synthetic(4 * mib, starts, bits)
    (copy,) = plan_reuse(Reuse(stream, ((100, 64 * kib, 4 * mib - 64 * kib),)), 4 * mib + 36) or ()
    assert copy.first == 4 and copy.last == len(starts) - 1
    assert copy.start == 4 * 64 * kib + 100 - 64 * kib


# -- an input changed behind the writer's back, a cancelled run ----------------------------


@pytest.fixture(scope="module")
def spliced_input(
    data: bytes, work: Path, monkeypatch_module: pytest.MonkeyPatch
) -> tuple[Path, DeflateStream, ElfEdit, bytes]:
    base = work / "changed"
    base.mkdir()
    stream = _index(_zip(monkeypatch_module, base / "in.zip", data, _zlib(6, mem=1)(data)))
    (base / "lib.so").write_bytes(data)
    edit = ElfEdit(base / "lib.so", SIZE, ((SIZE // 2, b"PATCH"),), b"appended")
    return base, stream, edit, b"".join(edit.iter_chunks())


def _changed(base: Path, stream: DeflateStream, name: str) -> DeflateStream:
    path = base / name
    shutil.copy(stream.archive, path)
    return dataclasses.replace(stream, archive=path)


def _flip(path: Path, at: int) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)
        f.seek(at)
        f.write(bytes([byte[0] ^ 0x40]))


@pytest.mark.parametrize("where", ["copied", "compressed-anew", "last-byte", "truncated"])
def test_a_changed_input_is_an_error(
    spliced_input: tuple[Path, DeflateStream, ElfEdit, bytes], where: str
) -> None:
    base, stream, edit, expected = spliced_input
    reuse = Reuse(stream, edit.kept_runs())
    plan = plan_reuse(reuse, edit.size)
    assert plan and len(plan) == 2
    changed = _changed(base, stream, f"{where}.zip")
    middle = (stream.bits[plan[0].first] + stream.bits[plan[0].last]) // 16
    seam = stream.bits[plan[0].last] // 8 + 64
    assert seam < stream.bits[plan[1].first] // 8
    if where == "truncated":
        with open(changed.archive, "r+b") as f:
            f.truncate(stream.offset + stream.size // 2)
        match = "shorter"
    else:
        at = {"copied": middle, "compressed-anew": seam, "last-byte": stream.size - 1}[where]
        _flip(changed.archive, stream.offset + at)
        match = "compressed bytes differ"
    with pytest.raises(PackagingError, match=match):
        _write(base / f"{where}-out.zip", Reuse(changed, reuse.runs), plan, expected)


def test_the_local_header_is_not_copied(
    spliced_input: tuple[Path, DeflateStream, ElfEdit, bytes],
) -> None:
    """Only the compressed bytes are read again: a local header changed after indexing
    (its name here) changes nothing."""
    base, stream, edit, expected = spliced_input
    changed = _changed(base, stream, "header.zip")
    _flip(changed.archive, stream.offset - len(NAME))
    reuse = Reuse(changed, edit.kept_runs())
    plan = plan_reuse(reuse, edit.size)
    assert plan
    _write(base / "header-out.zip", reuse, plan, expected)


def test_a_changed_input_leaves_no_wheel(
    spliced_input: tuple[Path, DeflateStream, ElfEdit, bytes], tmp_path: Path
) -> None:
    base, stream, edit, _ = spliced_input
    changed = _changed(base, stream, "wheel.zip")
    reuse = Reuse(changed, edit.kept_runs())
    plan = plan_reuse(reuse, edit.size)
    assert plan
    _flip(changed.archive, stream.offset + stream.bits[plan[-1].first] // 8 + 100)
    member = Member(NAME, Generated(edit.size, edit.iter_chunks), executable=True, reuse=reuse)
    with pytest.raises(PackagingError, match="changed since it was verified"):
        write_wheel(
            tmp_path, dist_name="torch", version=VERSION, tag=TAG,
            members=[Member("torch/__init__.py", b""), member], metadata=metadata(), jobs=2,
        )  # fmt: skip
    assert not list(tmp_path.glob("*.whl"))


def test_a_cancelled_splice_stops(
    spliced_input: tuple[Path, DeflateStream, ElfEdit, bytes], tmp_path: Path
) -> None:
    _, stream, edit, expected = spliced_input
    reuse = Reuse(stream, edit.kept_runs())
    plan = plan_reuse(reuse, edit.size)
    assert plan
    given = 0

    def pieces() -> Iterator[bytes]:
        nonlocal given
        for i in range(0, len(expected), 1 << 20):
            given += 1
            if given == 2:
                cancel.cancel()
            yield expected[i : i + (1 << 20)]

    with pytest.raises(cancel.Cancelled), cancel.scope(), open(tmp_path / "c.zip", "w+b") as f:
        writer = ZipWriter(f, EPOCH)
        write_reused(
            writer,
            NAME,
            executable=False,
            reuse=reuse,
            plan=plan,
            content=pieces(),
            size=len(expected),
            level=6,
        )
    assert given == 2
    with cancel.scope():  # the next run is not cancelled
        _write(tmp_path / "after.zip", reuse, plan, expected)


def test_spliced_through_the_wheel_writer(
    spliced_input: tuple[Path, DeflateStream, ElfEdit, bytes], tmp_path: Path
) -> None:
    _, stream, edit, expected = spliced_input
    reuse = Reuse(stream, edit.kept_runs())
    member = Member(NAME, Generated(edit.size, edit.iter_chunks), executable=True, reuse=reuse)
    written = write_wheel(
        tmp_path, dist_name="torch", version=VERSION, tag=TAG,
        members=[Member("torch/__init__.py", b""), member], metadata=metadata(), jobs=1,
    )  # fmt: skip
    _check(written.path, expected)
    original = raw_member(stream.archive, NAME)
    plan = plan_reuse(reuse, edit.size)
    assert plan
    copy = plan[0]
    inside = original[stream.bits[copy.first] // 8 + 1 : stream.bits[copy.last] // 8 - 1]
    assert len(inside) > 100_000 and inside in raw_member(written.path, NAME)


# -- what the splice trusts without checking -----------------------------------------------


def test_kept_runs_of_composed_edits_are_the_source_bytes_in_order(tmp_path: Path) -> None:
    """:func:`write_reused` copies blocks for the kept runs without comparing the member's
    bytes there, and reads the input forward only: every run must hold the file's bytes,
    and runs must rise in both the result and the file."""
    rng = random.Random(11)
    base = rng.randbytes(3000)
    path = tmp_path / "small.bin"
    path.write_bytes(base)
    for _ in range(1500):
        edit = ElfEdit(path, len(base), (), b"")
        for _ in range(rng.randrange(1, 4)):
            size = edit.size
            removed = None
            if rng.random() < 0.6 and size > 2:
                lo = rng.randrange(0, size - 1)
                removed = (lo, rng.randrange(lo + 1, size + 1))
            patches: list[tuple[int, bytes]] = []
            pos = rng.randrange(0, 20)
            while pos < size and rng.random() < 0.8:
                length = rng.randrange(1, 20)
                if pos + length > size:
                    break
                if removed is None or not (pos < removed[1] and removed[0] < pos + length):
                    patches.append((pos, rng.randbytes(length)))
                pos += length + rng.randrange(0, 200)
            appended = rng.randbytes(rng.randrange(0, 50))
            edit = ElfEdit(
                edit,
                size,
                tuple(patches),
                appended,
                removed=removed,
                zero_fill=rng.randrange(0, 99),
            )
        result = b"".join(edit.iter_chunks())
        end_at = end_origin = 0
        for at, origin, length in edit.kept_runs():
            assert length > 0 and at >= end_at and origin >= end_origin
            assert result[at : at + length] == base[origin : origin + length]
            end_at, end_origin = at + length, origin + length


def test_trailing_bytes_after_an_indexed_stream_are_refused(
    data: bytes, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = _zlib(6, mem=1)(data[: 1 << 20]) + b"\x00trailing"
    path = _zip(monkeypatch, work / "trailing.zip", data[: 1 << 20], raw)
    with zipfile.ZipFile(path) as z, pytest.raises(zipfile.BadZipFile, match="after the end"):
        b"".join(member_chunks(z, z.getinfo(NAME), 1 << 20, streams=[], blocks=True))
