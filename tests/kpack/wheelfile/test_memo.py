"""kpack.wheelfile._memo and shared members: content repeated across the wheels of a run
is deflated once, and the bytes are those written without a memo."""

from __future__ import annotations

import threading
import time
import zipfile
import zlib
from pathlib import Path

import pytest

from kpack.wheelfile import DeflateMemo, Member
from kpack.wheelfile._deflate import CHUNK_SIZE
from kpack.wheelfile._engine import deflate_chunk, deflate_whole
from tests.kpack.wheelfile.test_wheelfile import build, elf_like

TARBALL = "rocm_sdk_devel/_devel.tar"


def _tarball(tmp_path: Path, name: str, tail: bytes) -> Path:
    """Three and a half chunks alike in every copy, then a tail of the copy's own."""
    path = tmp_path / name
    path.write_bytes(elf_like(3 * CHUNK_SIZE + CHUNK_SIZE // 2, seed=7) + tail)
    return path


def member_stream(wheel: Path, name: str) -> tuple[bytes, bytes]:
    """(raw deflate stream, content) of member ``name``, read apart from zipfile's inflate."""
    with zipfile.ZipFile(wheel) as archive:
        info = archive.getinfo(name)
        content = archive.read(name)
    with wheel.open("rb") as handle:
        handle.seek(info.header_offset + 26)
        name_len, extra_len = (int.from_bytes(handle.read(2), "little") for _ in range(2))
        handle.seek(info.header_offset + 30 + name_len + extra_len)
        return handle.read(info.compress_size), content


def joined_chunks(data: bytes, level: int = 6) -> bytes:
    """``data`` deflated as the writer streams a member: libdeflate chunks, joined."""
    pieces = range(0, len(data), CHUNK_SIZE)
    return b"".join(
        deflate_chunk(data[i : i + CHUNK_SIZE], None, i + CHUNK_SIZE >= len(data), level)
        for i in pieces
    )


def test_shared_member_is_chunked_and_memo_gives_the_same_bytes(tmp_path: Path) -> None:
    sources = [
        _tarball(tmp_path, f"devel{i}.tar", f"links of family {i}\n".encode()) for i in (1, 2)
    ]
    memo = DeflateMemo()
    with_memo = [
        build(tmp_path / f"memo{i}", [Member(TARBALL, src, shared=True)], jobs=2, memo=memo)
        for i, src in enumerate(sources)
    ]
    without = [
        build(tmp_path / f"plain{i}", [Member(TARBALL, src, shared=True)], jobs=2)
        for i, src in enumerate(sources)
    ]
    for a, b, src in zip(with_memo, without, sources, strict=True):
        assert a.path.read_bytes() == b.path.read_bytes()
        raw, content = member_stream(a.path, TARBALL)
        assert content == src.read_bytes()
        assert zlib.decompress(raw, -15) == content  # zlib's inflate, not libdeflate's
        # streamed in fixed chunks, although it is small enough to be deflated whole
        assert raw == joined_chunks(content) != deflate_whole(content, 6)
    # the second wheel took its first three chunks from the memo; its last one is its own
    assert (memo.hits, memo.misses) == (3, 5)


def test_unshared_members_never_use_the_memo(tmp_path: Path) -> None:
    src = _tarball(tmp_path, "devel.tar", b"tail")
    memo = DeflateMemo()
    for i in range(2):
        result = build(tmp_path / f"out{i}", [Member(TARBALL, src)], jobs=2, memo=memo)
        raw, content = member_stream(result.path, TARBALL)
        assert raw == deflate_whole(content, 6)
    assert (memo.hits, memo.misses) == (0, 0)


def test_memo_drops_the_least_recently_used_past_its_bound() -> None:
    calls: list[bytes] = []

    def deflate(data: bytes) -> None:
        def compress() -> bytes:
            calls.append(data)
            return data * 10

        assert memo.deflate(data, level=6, final=False, compress=compress) == data * 10

    memo = DeflateMemo(max_bytes=25)
    deflate(b"a")  # 10 bytes held
    deflate(b"b")  # 20
    deflate(b"a")  # a hit: a is now the most recently used
    deflate(b"c")  # 30 > 25: b goes
    deflate(b"a")
    deflate(b"b")  # compressed again
    assert calls == [b"a", b"b", b"c", b"b"]
    assert memo.hits == 2


def test_memo_keys_level_and_final() -> None:
    memo = DeflateMemo()
    results = {}
    for level in (1, 6):
        for final in (False, True):
            made = b"%d %d" % (level, final)
            results[level, final] = memo.deflate(
                b"x" * 100, level=level, final=final, compress=lambda made=made: made
            )
    assert results == {(lv, f): b"%d %d" % (lv, f) for lv in (1, 6) for f in (False, True)}
    assert memo.misses == 4


def test_two_threads_asking_at_once_compress_once() -> None:
    memo = DeflateMemo()
    started = threading.Event()
    calls: list[int] = []

    def slow() -> bytes:
        calls.append(1)
        started.set()
        time.sleep(0.2)
        return b"deflated"

    results: list[bytes] = []
    first = threading.Thread(
        target=lambda: results.append(memo.deflate(b"data", level=6, final=True, compress=slow))
    )
    first.start()
    started.wait(5)
    results.append(memo.deflate(b"data", level=6, final=True, compress=slow))
    first.join()
    assert results == [b"deflated", b"deflated"]
    assert len(calls) == 1
    assert (memo.hits, memo.misses) == (1, 1)


def test_a_failed_compression_is_not_kept() -> None:
    memo = DeflateMemo()

    def broken() -> bytes:
        raise OSError("boom")

    with pytest.raises(OSError, match="boom"):
        memo.deflate(b"data", level=6, final=True, compress=broken)
    assert memo.deflate(b"data", level=6, final=True, compress=lambda: b"ok") == b"ok"
    assert memo.misses == 1
