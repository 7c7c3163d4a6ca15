"""Wheel members inflated by ISA-L, or by ``zlib`` where ``isal`` is not installed: the same
bytes as ``zipfile`` gives, in bounded pieces, and every damage ``zipfile`` would notice
noticed (CRC, a stream cut short or running on). Every test runs on both engines."""

from __future__ import annotations

import copy
import io
import os
import zipfile
import zlib
from pathlib import Path

import pytest

from kpack.wheelfile import _inflate
from kpack.wheelfile._inflate import member_chunks
from kpack.wheelfile._reuse import DeflateStream
from kpack.wheelfile._zstream import zlib_library
from tests.pypi_inputs import JAX_PLUGIN, pypi_wheel

CHUNK = 1 << 20


@pytest.fixture(autouse=True, params=["isal", "zlib"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "zlib":
        monkeypatch.setattr(_inflate, "_inflate_lib", zlib)
        monkeypatch.setattr(_inflate, "_InflateError", zlib.error)
    else:
        assert _inflate._inflate_lib.__name__ == "isal.isal_zlib"
    return str(request.param)


def _archive(members: dict[str, bytes]) -> zipfile.ZipFile:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
        z.writestr(zipfile.ZipInfo("stored.txt"), b"kept as it is")
    return zipfile.ZipFile(buf)


def test_the_same_bytes_as_zipfile_on_a_real_wheel() -> None:
    with zipfile.ZipFile(pypi_wheel(JAX_PLUGIN)) as z:
        infos = [i for i in z.infolist() if not i.is_dir()]
        assert any(i.compress_type == zipfile.ZIP_DEFLATED and i.file_size > CHUNK for i in infos)
        for info in infos:
            pieces = list(member_chunks(z, info, CHUNK))
            assert all(len(p) <= CHUNK for p in pieces)
            assert b"".join(pieces) == z.read(info), info.filename


def test_synthetic_members_and_a_stored_one() -> None:
    z = _archive({"a": os.urandom(3 << 20) + b"x" * (5 << 20), "empty": b"", "c": b"ab" * 9999})
    for info in z.infolist():
        assert b"".join(member_chunks(z, info, CHUNK)) == z.read(info)


def test_a_bomb_comes_out_in_bounded_pieces() -> None:
    z = _archive({"zeros": bytes(64 << 20)})
    info = z.getinfo("zeros")
    assert info.compress_size < 1 << 20
    sizes = [len(p) for p in member_chunks(z, info, CHUNK)]
    assert max(sizes) == CHUNK and sum(sizes) == 64 << 20


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda i: setattr(i, "CRC", i.CRC ^ 1), "Bad CRC-32"),
        (lambda i: setattr(i, "compress_size", i.compress_size - 7), "ends before its end block"),
        (lambda i: setattr(i, "compress_size", i.compress_size + 7), "after the end"),
    ],
    ids=["crc", "cut-short", "runs-on"],
)
def test_damage_is_noticed(change: object, message: str) -> None:
    z = _archive({"c": os.urandom(1 << 16) * 8, "next": b"more bytes after it"})
    info = copy.copy(z.getinfo("c"))
    change(info)  # type: ignore[operator]
    with pytest.raises(zipfile.BadZipFile, match=message):
        b"".join(member_chunks(z, info, CHUNK))


def test_bytes_that_do_not_decode() -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("c", os.urandom(1 << 16) * 4)
    raw = bytearray(buf.getvalue())
    z = zipfile.ZipFile(io.BytesIO(bytes(raw)))
    info = z.getinfo("c")
    start = info.header_offset + 30 + len(info.filename)
    raw[start : start + 64] = b"\xff" * 64  # reserved block type 3
    z = zipfile.ZipFile(io.BytesIO(bytes(raw)))
    with pytest.raises(zipfile.BadZipFile, match="does not decode"):
        b"".join(member_chunks(z, z.getinfo("c"), CHUNK))


def _file_archive(tmp_path: Path, data: bytes) -> zipfile.ZipFile:
    path = tmp_path / "a.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("c", data)
        z.writestr("next", b"more bytes after it")
    return zipfile.ZipFile(path)


@pytest.mark.skipif(zlib_library() is None, reason="needs a shared zlib (Z_BLOCK)")
def test_indexed_blocks_are_where_zlib_decodes_from(tmp_path: Path) -> None:
    data = b"".join(os.urandom(1 << 10) * (i % 7 + 1) for i in range(3000))
    z = _file_archive(tmp_path, data)
    info = z.getinfo("c")
    streams: list[DeflateStream] = []
    assert b"".join(member_chunks(z, info, CHUNK, streams=streams, blocks=True)) == data
    (stream,) = streams
    assert stream.starts[0] == 0 and len(stream.starts) > 5 and stream.length == len(data)
    assert list(stream.starts) == sorted(set(stream.starts)) and stream.crc == info.CRC
    # every recorded start is a block boundary: zlib, primed there, decodes the rest
    comp = stream.archive.read_bytes()[stream.offset : stream.offset + stream.size]
    for start, bit in list(zip(stream.starts, stream.bits, strict=True))[1:4]:
        rest = int.from_bytes(comp[bit // 8 :], "little") >> (bit % 8)
        tail = rest.to_bytes(len(comp) - bit // 8, "little")
        inflater = zlib.decompressobj(-15, zdict=data[max(0, start - 32768) : start])
        assert inflater.decompress(tail) == data[start:]


@pytest.mark.skipif(zlib_library() is None, reason="needs a shared zlib (Z_BLOCK)")
def test_an_indexed_stream_that_does_not_decode_is_refused(tmp_path: Path) -> None:
    z = _file_archive(tmp_path, os.urandom(1 << 16) * 4)
    info = z.getinfo("c")
    raw = bytearray(Path(str(z.filename)).read_bytes())
    start = info.header_offset + 30 + len(info.filename)
    raw[start : start + 64] = b"\xff" * 64  # reserved block type 3
    (tmp_path / "b.zip").write_bytes(raw)
    z = zipfile.ZipFile(tmp_path / "b.zip")
    with pytest.raises(zipfile.BadZipFile, match="does not decode"):
        b"".join(member_chunks(z, z.getinfo("c"), CHUNK, streams=[], blocks=True))
