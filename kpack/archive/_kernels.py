"""The kernels an archive is given, and the checks that refuse what the C runtime cannot load.

Private to :mod:`kpack.archive`. A :class:`KernelInput` is a code object to store (or its
frame, compressed already); a :class:`StoredKernel` describes one whose stored bytes exist
before the archive is laid out. Both writers check their kernels here first: every key,
target and metadata map is well formed, no ``(binary_key, target)`` comes twice, and the
count stays under the C reader's cap. All problems are reported together, in one
:class:`~kpack.errors.ArchiveError`.

Two key rules: ``"kernel"`` (the default, what host-binary transforms write) is the grammar
``<path>#<N>``; ``"name"`` takes any key the TOC holds safely and the C runtime can look up,
as rocm-kpack's library callers write them (``rocke/<op>/<family>/<name>``): a non-empty
string of at most :data:`MAX_KEY_BYTES` UTF-8 bytes with no control character (a NUL would
cut it short for the C API's ``const char *``) and no backslash (readers turn ``\\`` into
``/`` before they look a key up).
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Literal

import zstandard

from kpack.archive import _write  # its limits are read at call time (tests lower them)
from kpack.archive._toc import SCHEMES
from kpack.archive._write import ZstdFrame, payload_size
from kpack.common.frozen import frozen
from kpack.errors import ArchiveError
from kpack.targets import is_target_id, target_order

_KEY = re.compile(r"[^#\\\x00]+#(?:0|[1-9][0-9]*)")
_NAME_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f\\]")
MAX_KEY_BYTES = 4096  # PATH_MAX: no key a caller can mean is longer

#: Why an empty code object is refused: it is no code object (no ELF header), no runtime
#: loads it, and HRX refuses a whole archive with an ``original_size`` of 0 in it.
EMPTY = "the code object is empty (original_size must be > 0; HRX refuses the archive)"

KeyRule = Literal["kernel", "name"]
KEY_RULES: tuple[KeyRule, ...] = ("kernel", "name")


@frozen
class KernelInput:
    """One code object to store: ``binary_key`` is ``<path>#<N>``, ``target`` a target id;
    ``data`` is the code object, or its frame compressed already (stored as it is when the
    archive is written at its level)."""

    binary_key: str
    target: str
    data: bytes | memoryview | ZstdFrame
    metadata: Mapping[str, str] | None = None


@frozen
class StoredKernel:
    """A kernel as an archive will store it, known before the archive is written: its
    ``stored_size`` bytes in the blob area (its zstd frame at the archive's level, or, in
    scheme ``none``, the code object) stand for ``original_size`` bytes of code object."""

    binary_key: str
    target: str
    stored_size: int
    original_size: int
    metadata: Mapping[str, str] | None = None
    #: Kernels whose ``content`` is equal (and not ``None``) hold the same stored bytes:
    #: the archive stores them once, under one ordinal.
    content: Hashable | None = field(default=None, compare=False)


def _name_problem(key: str) -> str | None:
    """Why ``key`` cannot be a TOC key under the ``"name"`` rule, or None."""
    if not key:
        return "binary_key is empty"
    if _NAME_FORBIDDEN.search(key):
        return "binary_key holds a control character or a backslash"
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        return "binary_key is not valid UTF-8"
    if size > MAX_KEY_BYTES:
        return f"binary_key is {size} bytes long, more than {MAX_KEY_BYTES}"
    return None


def _key_problem(key: object, rule: KeyRule) -> str | None:
    if not isinstance(key, str):
        return "binary_key must be a str"
    if rule == "name":
        return _name_problem(key)
    return None if _KEY.fullmatch(key) else "binary_key must be '<forward-slash path>#<N>'"


def _identity_problems(
    binary_key: object,
    target: object,
    metadata: Mapping[str, str] | None,
    rule: KeyRule = "kernel",
) -> list[str]:
    where = f"kernel ({binary_key!r}, {target!r})"
    problems = []
    key_problem = _key_problem(binary_key, rule)
    if key_problem is not None:
        problems.append(f"{where}: {key_problem}")
    if not isinstance(target, str) or not is_target_id(target):
        problems.append(f"{where}: target is not a target id such as 'gfx942:xnack+'")
    if metadata is not None and not all(isinstance(x, str) for kv in metadata.items() for x in kv):
        problems.append(f"{where}: metadata must map str to str")
    return problems


def _kernel_problems(kernel: KernelInput, rule: KeyRule) -> list[str]:
    where = f"kernel ({kernel.binary_key!r}, {kernel.target!r})"
    problems = _identity_problems(kernel.binary_key, kernel.target, kernel.metadata, rule)
    if isinstance(kernel.data, ZstdFrame):
        declared = _frame_size(kernel.data.frame)
        if declared != kernel.data.size:
            problems.append(
                f"{where}: its zstd frame declares {declared} bytes, not {kernel.data.size}"
            )
    elif not isinstance(kernel.data, bytes | memoryview):
        problems.append(f"{where}: data must be bytes, memoryview or ZstdFrame")
        return problems
    if payload_size(kernel.data) == 0:
        problems.append(f"{where}: {EMPTY}")
    return problems


def _frame_size(frame: bytes | memoryview) -> int | None:
    try:
        size: int = zstandard.frame_content_size(frame)
    except zstandard.ZstdError:
        return None
    return size


def _refuse(problems: list[str], count: int, path: Path) -> None:
    limit = _write.MAX_KERNELS
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


def _arch_problems(targets: Sequence[str], gfx_arches: Sequence[str] | None) -> list[str]:
    """A declared ``gfx_arches`` must hold target ids only, and every kernel's target."""
    if gfx_arches is None:
        return []
    declared = set(gfx_arches)
    problems = [
        f"gfx_arches entry {arch!r} is not a target id such as 'gfx942:xnack+'"
        for arch in gfx_arches
        if not isinstance(arch, str) or not is_target_id(arch)
    ]
    unknown = sorted(
        {t for t in targets if isinstance(t, str) and t not in declared}, key=target_order
    )
    listed = sorted(declared, key=target_order)
    problems += [f"target {t!r} is not in gfx_arches {listed}" for t in unknown]
    return problems


def check_kernels(
    kernels: Sequence[KernelInput],
    path: Path,
    *,
    key_rule: KeyRule = "kernel",
    gfx_arches: Sequence[str] | None = None,
) -> None:
    """Refuse ``kernels`` unless every one is well formed (its key under ``key_rule``, its
    target in ``gfx_arches`` when given) and none comes twice."""
    if key_rule not in KEY_RULES:
        raise ArchiveError(f"unknown key rule {key_rule!r} (expected one of {KEY_RULES})")
    problems = [p for k in kernels for p in _kernel_problems(k, key_rule)]
    problems += _arch_problems([k.target for k in kernels], gfx_arches)
    problems += _duplicates([(k.binary_key, k.target) for k in kernels])
    _refuse(problems, len(kernels), path)


def check_stored(kernels: Sequence[StoredKernel], path: Path) -> None:
    """Refuse stored ``kernels`` unless every identity is well formed, every code object
    holds bytes, and none comes twice."""
    problems = [p for k in kernels for p in _identity_problems(k.binary_key, k.target, k.metadata)]
    problems += [
        f"kernel ({k.binary_key!r}, {k.target!r}): {EMPTY}"
        for k in kernels
        if k.original_size <= 0 or k.stored_size <= 0
    ]
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
