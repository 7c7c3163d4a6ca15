"""The kernels an archive is given, and the checks that refuse what the C runtime cannot load.

Private to :mod:`kpack.archive`. A :class:`KernelInput` is a code object to store (or its
frame, compressed already); a :class:`StoredKernel` describes one whose stored bytes exist
before the archive is laid out. Both writers check their kernels here first: every key,
target and metadata map is well formed, no ``(binary_key, target)`` comes twice, and the
count stays under the C reader's cap. All problems are reported together, in one
:class:`~kpack.errors.ArchiveError`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import zstandard

from kpack.archive import _write as _archive_write
from kpack.archive._toc import SCHEMES
from kpack.archive._write import ZstdFrame
from kpack.errors import ArchiveError
from kpack.targets import is_target_id

_KEY = re.compile(r"[^#\\\x00]+#(?:0|[1-9][0-9]*)")


@dataclass(frozen=True)
class KernelInput:
    """One code object to store: ``binary_key`` is ``<path>#<N>``, ``target`` a target id;
    ``data`` is the code object, or its frame compressed already (stored as it is when the
    archive is written at its level)."""

    binary_key: str
    target: str
    data: bytes | memoryview | ZstdFrame
    metadata: Mapping[str, str] | None = None


@dataclass(frozen=True)
class StoredKernel:
    """A kernel as an archive will store it, known before the archive is written: its
    ``stored_size`` bytes in the blob area (its zstd frame at the archive's level, or, in
    scheme ``none``, the code object) stand for ``original_size`` bytes of code object."""

    binary_key: str
    target: str
    stored_size: int
    original_size: int
    metadata: Mapping[str, str] | None = None


def _identity_problems(
    binary_key: object, target: object, metadata: Mapping[str, str] | None
) -> list[str]:
    where = f"kernel ({binary_key!r}, {target!r})"
    problems = []
    if not isinstance(binary_key, str) or not _KEY.fullmatch(binary_key):
        problems.append(f"{where}: binary_key must be '<forward-slash path>#<N>'")
    if not isinstance(target, str) or not is_target_id(target):
        problems.append(f"{where}: target is not a target id such as 'gfx942:xnack+'")
    if metadata is not None and not all(isinstance(x, str) for kv in metadata.items() for x in kv):
        problems.append(f"{where}: metadata must map str to str")
    return problems


def _kernel_problems(kernel: KernelInput) -> list[str]:
    where = f"kernel ({kernel.binary_key!r}, {kernel.target!r})"
    problems = _identity_problems(kernel.binary_key, kernel.target, kernel.metadata)
    if isinstance(kernel.data, ZstdFrame):
        declared = _frame_size(kernel.data.frame)
        if declared != kernel.data.size:
            problems.append(
                f"{where}: its zstd frame declares {declared} bytes, not {kernel.data.size}"
            )
    elif not isinstance(kernel.data, bytes | memoryview):
        problems.append(f"{where}: data must be bytes, memoryview or ZstdFrame")
    return problems


def _frame_size(frame: bytes | memoryview) -> int | None:
    try:
        size: int = zstandard.frame_content_size(frame)
    except zstandard.ZstdError:
        return None
    return size


def _refuse(problems: list[str], count: int, path: Path) -> None:
    limit = _archive_write.MAX_KERNELS
    if count > limit:
        problems.append(f"{count} kernels exceed the C runtime's limit of {limit}")
    if problems:
        more = [f"... and {len(problems) - 20} more"] if len(problems) > 20 else []
        raise ArchiveError(
            "refusing to write the archive", path=path, problems=problems[:20] + more
        )


def _duplicates(pairs: Sequence[tuple[str, str]]) -> list[str]:
    seen: set[tuple[str, str]] = set()
    problems = []
    for pair in pairs:
        if pair in seen:
            problems.append(f"duplicate kernel {pair}")
        seen.add(pair)
    return problems


def check_kernels(kernels: Sequence[KernelInput], path: Path) -> None:
    """Refuse ``kernels`` unless every one is well formed and none comes twice."""
    problems = [p for k in kernels for p in _kernel_problems(k)]
    problems += _duplicates([(k.binary_key, k.target) for k in kernels])
    _refuse(problems, len(kernels), path)


def check_stored(kernels: Sequence[StoredKernel], path: Path) -> None:
    """Refuse stored ``kernels`` unless every identity is well formed and none comes twice."""
    problems = [p for k in kernels for p in _identity_problems(k.binary_key, k.target, k.metadata)]
    problems += _duplicates([(k.binary_key, k.target) for k in kernels])
    _refuse(problems, len(kernels), path)


def check_options(
    path: Path, scheme: str, level: int, group_name: str, gfx_arch_family: str
) -> None:
    """Refuse an unknown scheme, a zstd level out of range or an empty group or family."""
    if scheme not in SCHEMES:
        raise ArchiveError(f"unknown compression scheme {scheme!r}", path=path)
    if scheme == "zstd-per-kernel" and not 1 <= level <= 22:
        raise ArchiveError(f"zstd level must be 1..22, got {level}", path=path)
    for label, value in (("group_name", group_name), ("gfx_arch_family", gfx_arch_family)):
        if not isinstance(value, str) or not value:
            raise ArchiveError(f"{label} must be a non-empty string", path=path)
