"""Fuzz every reader of untrusted bytes with a per-input time and memory limit.

A long-lived worker process runs the readers; it lives under ``RLIMIT_AS`` (memory) and the
parent kills and restarts it when one input takes longer than the time limit. Each input's
outcome is ``ok``, ``error`` (one of the reader's own errors: the input was refused cleanly),
or a finding — ``escape`` (any other exception), ``timeout`` or ``memory`` (``MemoryError``,
or the worker died) — saved with its reproducer bytes.

Inputs are deterministic mutations of real seeds (:class:`Mutator`): byte flips, random bytes,
insertions, deletions, truncations, splices and header integers smashed to boundary values.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import random
import resource
import shutil
import struct
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

__all__ = ["Finding", "Mutator", "Reader", "Stats", "fuzz"]

#: A reader runs one input: ``run(data, workdir)``. ``ours`` are the exception types that
#: count as a clean refusal.
RunFn = Callable[[bytes, Path], object]

_INTERESTING = (
    0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
    1 << 32, 0x7FFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFFFF, 4096, 1 << 20, 1 << 30,
)  # fmt: skip


@dataclass(frozen=True)
class Reader:
    name: str
    run: RunFn
    ours: tuple[type[BaseException], ...]
    seeds: Callable[[], Sequence[bytes]]
    #: tokens a random mutation would not find by chance (hash names, RECORD syntax, target
    #: names, header keywords): inserted or written over the input as one of the mutations
    tokens: Sequence[bytes] = ()


@dataclass(frozen=True)
class Finding:
    reader: str
    kind: str  # escape, timeout, memory
    detail: str
    reproducer: Path


@dataclass
class Stats:
    reader: str
    inputs: int = 0
    refused: int = 0
    seconds: float = 0.0
    findings: list[Finding] = field(default_factory=list)

    @property
    def per_second(self) -> float:
        return self.inputs / self.seconds if self.seconds else 0.0


class Mutator:
    """Deterministic mutations of ``seeds`` (same seed number, same inputs)."""

    def __init__(self, seeds: Sequence[bytes], seed: int, tokens: Sequence[bytes] = ()) -> None:
        if not seeds:
            raise ValueError("no seeds")
        self.seeds = [bytes(s) for s in seeds]
        self.tokens = [bytes(t) for t in tokens if t]
        self.rng = random.Random(seed)

    def __iter__(self) -> Iterator[bytes]:
        while True:
            yield self.mutate(self.rng.choice(self.seeds))

    def mutate(self, data: bytes) -> bytes:
        buf = bytearray(data)
        for _ in range(self.rng.choice((1, 1, 1, 2, 3, 5, 8))):
            self._one(buf)
        return bytes(buf)

    def _one(self, buf: bytearray) -> None:
        rng = self.rng
        n = len(buf)
        op = rng.randrange(10 if self.tokens else 8)
        if op >= 8:  # a dictionary token, inserted or written over what is there
            token = rng.choice(self.tokens)
            at = rng.randint(0, n)
            end = at if op == 8 else at + len(token)
            buf[at:end] = token
        elif n == 0 or op == 0:  # insert random bytes
            at = rng.randint(0, n)
            buf[at:at] = rng.randbytes(rng.choice((1, 2, 4, 8, 64)))
        elif op == 1:  # flip a bit
            at = rng.randrange(n)
            buf[at] ^= 1 << rng.randrange(8)
        elif op == 2:  # set a byte
            buf[rng.randrange(n)] = rng.randrange(256)
        elif op == 3:  # delete a run
            at = rng.randrange(n)
            del buf[at : at + rng.choice((1, 4, 16, 256, 4096))]
        elif op == 4:  # truncate
            del buf[rng.randrange(n) :]
        elif op == 5:  # splice in a piece of another seed
            other = rng.choice(self.seeds)
            if other:
                start = rng.randrange(len(other))
                piece = other[start : start + rng.choice((4, 16, 256, 4096))]
                at = rng.randrange(n)
                buf[at : at + len(piece)] = piece
        else:  # smash a header-sized integer with a boundary value
            width = rng.choice((2, 4, 8))
            if n >= width:
                at = rng.randrange(0, n - width + 1) if rng.random() < 0.3 else (
                    rng.randrange(0, min(n - width, 512) + 1) & ~(width - 1)
                )  # fmt: skip
                value = rng.choice(_INTERESTING) & ((1 << (8 * width)) - 1)
                struct.pack_into({2: "<H", 4: "<I", 8: "<Q"}[width], buf, at, value)


def _worker(conn: Connection, readers: dict[str, Reader], memory: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    scratch = Path(tempfile.mkdtemp(prefix="fuzz-worker-"))
    try:
        while True:
            message = conn.recv()
            if message is None:
                return
            name, data = message
            reader = readers[name]
            work = scratch / "w"
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir()
            try:
                reader.run(data, work)
                conn.send(("ok", ""))
            except reader.ours:
                conn.send(("error", ""))
            except MemoryError:
                conn.send(("memory", traceback.format_exc(limit=-8)))
            except Exception:
                conn.send(("escape", traceback.format_exc(limit=-8)))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


class _Worker:
    def __init__(self, readers: dict[str, Reader], memory: int) -> None:
        self._args = (readers, memory)
        self._ctx = multiprocessing.get_context("fork")
        self._start()

    def _start(self) -> None:
        self.conn, child = self._ctx.Pipe()
        self.proc = self._ctx.Process(target=_worker, args=(child, *self._args), daemon=True)
        self.proc.start()
        child.close()

    def run(self, reader: str, data: bytes, timeout: float) -> tuple[str, str]:
        self.conn.send((reader, data))
        if not self.conn.poll(timeout):
            self.restart()
            return "timeout", f"no result within {timeout} s"
        try:
            return self.conn.recv()  # type: ignore[no-any-return]
        except EOFError:
            code = self.proc.exitcode
            self.restart()
            return "memory", f"worker died (exit code {code})"

    def restart(self) -> None:
        self.proc.kill()
        self.proc.join()
        self._start()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.send(None)
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


def fuzz(
    readers: Sequence[Reader],
    *,
    count: int,
    seed: int,
    findings_dir: Path,
    time_limit: float = 5.0,
    memory_limit: int = 2 << 30,
    progress: Callable[[Stats], None] | None = None,
) -> list[Stats]:
    """Run ``count`` mutated inputs through each reader; return per-reader stats."""
    table = {r.name: r for r in readers}
    worker = _Worker(table, memory_limit)
    out: list[Stats] = []
    try:
        for number, reader in enumerate(readers):
            stats = Stats(reader.name)
            seeds = list(reader.seeds())
            inputs = iter(Mutator(seeds, seed * 1000 + number, reader.tokens))
            start = time.perf_counter()
            for index in range(count):
                data = seeds[index] if index < len(seeds) else next(inputs)
                kind, detail = worker.run(reader.name, data, time_limit)
                stats.inputs += 1
                if kind == "error":
                    stats.refused += 1
                elif kind != "ok":
                    path = findings_dir / reader.name / f"{kind}-{seed}-{index}.bin"
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(data)
                    stats.findings.append(Finding(reader.name, kind, detail, path))
            stats.seconds = time.perf_counter() - start
            out.append(stats)
            if progress is not None:
                progress(stats)
    finally:
        worker.close()
    return out


def reproduce(reader: Reader, data: bytes) -> None:
    """Run one input in this process (for debugging a saved reproducer)."""
    with tempfile.TemporaryDirectory() as tmp:
        reader.run(data, Path(tmp))


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
