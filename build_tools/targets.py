"""GPU families, gfx target ids and the family -> target table.

The table ships as data (``manifests/targets.yaml``); ``--targets-cmake`` can parse
TheRock's authoritative ``therock_amdgpu_targets.cmake`` instead.
"""

from __future__ import annotations

import difflib
import os
import re
import stat
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NewType

import yaml

from kpack.common.cli import split_list
from kpack.errors import ManifestError, UsageError
from kpack.targets import base_target, is_isa_target, target_order

from ._cmake import CMakeCall, cmake_calls
from ._data import data_dir

__all__ = [
    "FamilyTable",
    "GfxTarget",
    "base_target",
    "is_isa_target",
    "load_family_table",
    "parse_family_list",
    "parse_targets_cmake",
]

GfxTarget = NewType("GfxTarget", str)

_SINGLE_RE = re.compile(r"gfx[0-9a-f]+")  # fullmatch: "$" would let "gfx942\n" through


@dataclass(frozen=True)
class FamilyTable:
    """Family name -> sorted tuple of gfx targets; every single target is its own family."""

    families: Mapping[str, tuple[str, ...]]
    source: str

    def expand(self, family: str, flag: str = "") -> tuple[str, ...]:
        if family in self.families:
            return self.families[family]
        if _SINGLE_RE.fullmatch(family) and any(family in t for t in self.families.values()):
            return (family,)
        raise UsageError(self._unknown(family, flag))

    def expand_all(self, families: Iterable[str], flag: str = "") -> tuple[str, ...]:
        out: set[str] = set()
        for family in families:
            out.update(self.expand(family, flag))
        return tuple(sorted(out))

    def _unknown(self, family: str, flag: str) -> str:
        """``unknown GPU family 'x'`` (in which flag, the closest names), then the valid
        names on the lines below: the families, and the single targets of the table."""
        shown = repr(family if len(family) <= 80 else f"{family[:77]}...")  # a value, cut
        groups = sorted((n for n in self.families if not _SINGLE_RE.fullmatch(n)), key=target_order)
        singles = sorted({t for ts in self.families.values() for t in ts}, key=target_order)
        close = difflib.get_close_matches(family[:80], [*groups, *singles], n=2, cutoff=0.75)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        where = f" in {flag}" if flag else ""
        lines = [f"unknown GPU family {shown}{where}{hint}; the valid ones:"]
        lines += _wrapped(f"families ({len(groups)}):", groups)
        lines += _wrapped(f"single targets ({len(singles)}):", singles)
        return "\n".join(lines)

    def is_known(self, family: str) -> bool:
        try:
            self.expand(family)
        except UsageError:
            return False
        return True


def _wrapped(label: str, names: Sequence[str]) -> list[str]:
    """``  label a, b, c`` wrapped at 100 columns, continuation lines indented."""
    if not names:
        return []
    return textwrap.wrap(
        f"{label} {', '.join(names)}",
        width=100,
        initial_indent="  ",
        subsequent_indent="    ",
        break_on_hyphens=False,
    )


def parse_family_list(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """The items of a family or target flag: ``,``/``;``/space separated, the flag
    possibly repeated (see :func:`kpack.common.cli.split_list`); blank means not given."""
    return split_list(value)


def load_family_table(path: Path | None = None) -> FamilyTable:
    """Load the shipped YAML table (or the given YAML file), validated."""
    path = path or data_dir("manifests") / "targets.yaml"
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ManifestError(f"cannot read family table: {exc}", path=path) from exc
    families = doc.get("families") if isinstance(doc, dict) else None
    if not isinstance(families, dict) or not families:
        raise ManifestError("missing mapping 'families'", path=path)
    table: dict[str, tuple[str, ...]] = {}
    for name, targets in families.items():
        if not isinstance(name, str) or not isinstance(targets, list) or not targets:
            raise ManifestError(f"families.{name}: expected a non-empty list", path=path)
        for target in targets:
            if not isinstance(target, str) or not _SINGLE_RE.fullmatch(target):
                raise ManifestError(f"families.{name}: invalid gfx target {target!r}", path=path)
        table[name] = tuple(sorted(set(targets)))
    return FamilyTable(families=table, source=str(path))


_FAMILY_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_ADD_TARGET = "therock_add_amdgpu_target"
_CMAKE_KEYWORDS = frozenset({"FAMILY", "EXCLUDE_TARGET_PROJECTS"})
#: TheRock's file is about 20 KB; anything this large is not it.
MAX_TARGETS_CMAKE_BYTES = 1 << 20


def _read_targets_cmake(path: Path) -> str:
    """The text of a regular file of at most :data:`MAX_TARGETS_CMAKE_BYTES` (a FIFO or a
    device is refused without blocking on it). A path that cannot be read is a usage error
    (exit status 2); a file that is not TheRock's targets file, like every error in its
    text below, is a :class:`ManifestError` (bad input data, exit status 1)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        with open(os.open(path, flags), "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise UsageError("targets CMake file is not a regular file", path=path)
            data = handle.read(MAX_TARGETS_CMAKE_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read targets CMake file: {exc.strerror}", path=path) from None
    if len(data) > MAX_TARGETS_CMAKE_BYTES:
        raise ManifestError(
            f"targets CMake file is larger than {MAX_TARGETS_CMAKE_BYTES} bytes", path=path
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ManifestError(f"targets CMake file is not UTF-8 text: {exc}", path=path) from None


def _call_families(call: CMakeCall, path: Path) -> tuple[str, tuple[str, ...]]:
    """(target, its families) of one ``therock_add_amdgpu_target`` call."""
    if len(call.args) < 2:
        raise ManifestError(
            f"line {call.line}: {_ADD_TARGET}() needs a gfx target and a product name", path=path
        )
    target = call.args[0]
    if not _SINGLE_RE.fullmatch(target):
        raise ManifestError(f"line {call.line}: {target!r} is not a gfx target (gfxNNN)", path=path)
    section = None
    families = []
    for arg in call.args[2:]:
        if arg in _CMAKE_KEYWORDS:
            section = arg
        elif section == "FAMILY":
            if not _FAMILY_NAME_RE.fullmatch(arg):
                raise ManifestError(
                    f"line {call.line}: family name {arg!r} of {target} is not a name "
                    "(letters, digits, '.', '_', '-'): it becomes part of package and "
                    "directory names",
                    path=path,
                )
            families.append(arg)
    return target, tuple(families)


def parse_targets_cmake(path: Path) -> FamilyTable:
    """Parse ``therock_add_amdgpu_target(gfxNNN "name" FAMILY a b ... [KEYWORD ...])``.

    As in CMake's ``cmake_parse_arguments``, only names after ``FAMILY`` count, and every
    target is also a family of its own. A call that is not a target declaration, and a
    target declared twice (TheRock's own ``FATAL_ERROR``), are errors naming the line.
    """
    text = _read_targets_cmake(path)
    families: dict[str, set[str]] = {}
    declared: dict[str, int] = {}
    for call in cmake_calls(text, source=path, error=ManifestError):
        if call.name != _ADD_TARGET:
            continue
        target, names = _call_families(call, path)
        if target in declared:
            raise ManifestError(
                f"line {call.line}: AMDGPU target {target} already declared on line "
                f"{declared[target]}",
                path=path,
            )
        declared[target] = call.line
        for family in (target, *names):
            families.setdefault(family, set()).add(target)
    if not families:
        raise ManifestError(f"no {_ADD_TARGET}(...) calls found", path=path)
    return FamilyTable(
        families={k: tuple(sorted(v)) for k, v in sorted(families.items())}, source=str(path)
    )
