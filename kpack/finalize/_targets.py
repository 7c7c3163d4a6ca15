"""The GPU targets a wheel carries, checked against ``--expected-gpu-target``.

Embedded targets are read from every fat binary's bundles (ELF and PE) and from every
``.kpack`` archive's TOC. An expected target and an embedded one *match* when the code can
serve that target, as the runtime's loader matches code objects: the same processor, or an
LLVM generic target and one of its processors (``gfx11-generic`` code serves ``gfx1100``),
with no feature the two spell with opposite signs (``gfx90a`` accepts ``gfx90a:xnack+``
code; ``gfx90a:xnack-`` does not). The check fails when an expected target has no matching
code, or embedded code matches no expected target: one error listing both sets.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from kpack.errors import PackagingError, UsageError
from kpack.generic_targets import generic_table
from kpack.targets import base_target, is_isa_target, target_features

__all__ = ["check_targets", "embedded_targets", "expected_targets"]


def expected_targets(values: Iterable[str]) -> tuple[str, ...]:
    """``--expected-gpu-target`` values, each a target id (``gfx942``, ``gfx90a:xnack-``,
    ``gfx11-generic``); a usage error otherwise."""
    out = tuple(dict.fromkeys(values))
    bad = [v for v in out if not is_isa_target(v)]
    if bad:
        raise UsageError(
            f"--expected-gpu-target: not a GPU target: {', '.join(map(repr, bad))} "
            "(gfx942, gfx90a:xnack-, gfx11-generic)"
        )
    return out


def embedded_targets(root: Path, elves: Iterable[str], archives: Iterable[str]) -> set[str]:
    """Targets of the device code in the ELF/PE files ``elves`` and the ``.kpack``
    ``archives`` (member names under ``root``)."""
    from kpack.archive import KpackArchive
    from kpack.transform import extract_kernels, inspect_fat_binary

    found: set[str] = set()
    for name in elves:
        info = inspect_fat_binary(root / name)
        if info is not None and info.wrapper_count and not info.already_transformed:
            found.update(k.target for k in extract_kernels(root / name))
    for name in archives:
        with KpackArchive.open(root / name) as archive:
            found.update(archive.gfx_arches)
    return found


def _matches(code: str, wanted: str) -> bool:
    table = generic_table()
    a, b = base_target(code), base_target(wanted)
    if a != b and table.generic_of(b) != a and table.generic_of(a) != b:
        return False
    mine = {f[:-1]: f[-1] for f in target_features(code)}
    return all(mine.get(f[:-1], f[-1]) == f[-1] for f in target_features(wanted))


def check_targets(embedded: set[str], expected: tuple[str, ...], where: Path) -> None:
    """One error when ``embedded`` and ``expected`` disagree (see the module docstring)."""
    if not expected:
        return
    missing = [t for t in expected if not any(_matches(e, t) for e in embedded)]
    extra = sorted(e for e in embedded if not any(_matches(e, t) for t in expected))
    if missing or extra:
        problems = [f"no code for expected {t}" for t in missing]
        problems += [f"code for unexpected {t}" for t in extra]
        raise PackagingError(
            f"the wheel's GPU targets differ from --expected-gpu-target: embedded "
            f"{{{', '.join(sorted(embedded))}}}, expected {{{', '.join(expected)}}}",
            path=where,
            problems=problems,
        )
