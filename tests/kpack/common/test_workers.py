"""When workers start (kpack.common.workers): the thresholds and their overrides, work done
on the calling thread handed over as a pool would hand it, and the same bytes out either way."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest

from kpack.common.workers import (
    POOL_MIN_BYTES,
    THREAD_MIN_BYTES,
    done_future,
    pool_min_bytes,
    thread_min_bytes,
)
from kpack.errors import UsageError
from kpack.wheelfile import Member, write_wheel


def test_the_thresholds_and_their_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KPACK_THREAD_MIN_BYTES", raising=False)
    monkeypatch.delenv("KPACK_POOL_MIN_BYTES", raising=False)
    assert (thread_min_bytes(), pool_min_bytes()) == (THREAD_MIN_BYTES, POOL_MIN_BYTES)
    monkeypatch.setenv("KPACK_THREAD_MIN_BYTES", " 0 ")
    monkeypatch.setenv("KPACK_POOL_MIN_BYTES", "1048576")
    assert (thread_min_bytes(), pool_min_bytes()) == (0, 1 << 20)


@pytest.mark.parametrize("value", ["4MB", "-1", "1e6", "9" * 20])
def test_a_bad_override_is_a_usage_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("KPACK_THREAD_MIN_BYTES", value)
    with pytest.raises(UsageError, match=r"^KPACK_THREAD_MIN_BYTES=.* is not a number of bytes"):
        thread_min_bytes()


def test_work_done_here_is_handed_over_as_a_pool_would() -> None:
    ran_on: list[threading.Thread] = []

    def work(x: int) -> int:
        ran_on.append(threading.current_thread())
        if x < 0:
            raise ValueError("negative")
        return 2 * x

    assert done_future(work, 21).result() == 42
    failed = done_future(work, -1)
    assert failed.done() and isinstance(failed.exception(), ValueError)
    assert ran_on == [threading.current_thread()] * 2


def test_an_interruption_is_raised_at_once() -> None:
    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        done_future(interrupted)


def _wheel(dest: Path, jobs: int) -> bytes:
    """A wheel of 6 MiB of members (some compressible, some not) written with ``jobs``."""
    members = [
        Member(f"pkg/text{i}.txt", (f"line {i} of a member\n" * 40_000).encode()) for i in range(4)
    ]
    members += [
        Member(f"pkg/blob{i}.bin", b"".join(hashlib.sha256(bytes([i, j % 256, j // 256])).digest()
                                           for j in range(20_000)))
        for i in range(4)
    ]  # fmt: skip
    metadata = b"Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n"
    result = write_wheel(
        dest, dist_name="pkg", version="1.0", tag="py3-none-any", members=members,
        metadata=metadata, jobs=jobs, epoch=315532800,
    )  # fmt: skip
    return result.path.read_bytes()


def test_a_wheel_is_the_same_bytes_with_threads_and_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[str] = []
    start = threading.Thread.start

    def recording_start(self: threading.Thread) -> None:
        started.append(self.name)
        start(self)

    monkeypatch.setattr(threading.Thread, "start", recording_start)
    monkeypatch.setenv("KPACK_THREAD_MIN_BYTES", str(1 << 40))
    alone = _wheel(tmp_path / "alone", jobs=2)
    assert started == []  # all on this thread
    monkeypatch.setenv("KPACK_THREAD_MIN_BYTES", "0")
    threaded = _wheel(tmp_path / "threaded", jobs=2)
    assert any(name.startswith("deflate") for name in started)
    assert threaded == alone
