"""What the kpack integrity check (:mod:`rocm_sdk._kpack_check`) finds: one
:class:`Failure` per problem, a :class:`KpackReport` of the whole check, and the lines that
print them (``co_index`` values folded into ranges)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

__all__ = ["Failure", "KpackReport", "format_failures"]


@dataclass(frozen=True)
class Failure:
    binary: str  # site-relative path of the host binary or archive
    target: str | None
    co_index: int | None
    problem: str


@dataclass
class KpackReport:
    binaries: list[str] = field(default_factory=list)
    targets: tuple[str, ...] = ()
    lookups: int = 0
    failures: list[Failure] = field(default_factory=list)

    def message(self) -> str:
        head = (
            f"{len(self.failures)} kpack problem(s) in {len(self.binaries)} transformed "
            f"binaries (installed targets: {', '.join(self.targets) or 'none'}):"
        )
        return "\n".join([head, *format_failures(self.failures)])


def _ranges(values: Sequence[int]) -> str:
    out: list[str] = []
    ordered = sorted(set(values))
    start = prev = ordered[0]
    for value in [*ordered[1:], None]:
        if value is not None and value == prev + 1:
            prev = value
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if value is not None:
            start = prev = value
    return ",".join(out)


def format_failures(failures: Iterable[Failure]) -> list[str]:
    """One line per (binary, target, problem); the co_index values are listed as ranges."""
    groups: dict[tuple[str, str | None, str], list[int]] = {}
    for failure in failures:
        indices = groups.setdefault((failure.binary, failure.target, failure.problem), [])
        if failure.co_index is not None:
            indices.append(failure.co_index)
    lines = []
    for (binary, target, problem), indices in groups.items():
        parts = [binary]
        if target is not None:
            parts.append(target)
        if indices:
            parts.append(f"co_index {_ranges(indices)}")
        lines.append(f"  {': '.join(parts)}: {problem}")
    return lines
