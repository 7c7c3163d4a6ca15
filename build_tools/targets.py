"""GPU families, gfx target ids and the family -> target table.

The table ships as data (``manifests/targets.yaml``); ``--targets-cmake`` can parse
TheRock's authoritative ``therock_amdgpu_targets.cmake`` instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NewType

import yaml

from kpack.artifact_names import base_target, is_isa_target
from kpack.errors import ManifestError, UsageError

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

_SINGLE_RE = re.compile(r"^gfx[0-9a-f]+$")


@dataclass(frozen=True)
class FamilyTable:
    """Family name -> sorted tuple of gfx targets; every single target is its own family."""

    families: Mapping[str, tuple[str, ...]]
    source: str

    def expand(self, family: str) -> tuple[str, ...]:
        if family in self.families:
            return self.families[family]
        if _SINGLE_RE.match(family) and any(family in t for t in self.families.values()):
            return (family,)
        raise UsageError(f"unknown GPU family {family!r} (known to {self.source})")

    def expand_all(self, families: Iterable[str]) -> tuple[str, ...]:
        out: set[str] = set()
        for family in families:
            out.update(self.expand(family))
        return tuple(sorted(out))

    def is_known(self, family: str) -> bool:
        try:
            self.expand(family)
        except UsageError:
            return False
        return True


def parse_family_list(value: str | None) -> tuple[str, ...]:
    """Split a ``,``/``;`` separated flag value; empty or blank means not given."""
    if value is None or not value.strip():
        return ()
    parts = [p.strip() for p in re.split(r"[,;]", value)]
    return tuple(dict.fromkeys(p for p in parts if p))


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
            if not isinstance(target, str) or not _SINGLE_RE.match(target):
                raise ManifestError(f"families.{name}: invalid gfx target {target!r}", path=path)
        table[name] = tuple(sorted(set(targets)))
    return FamilyTable(families=table, source=str(path))


_TOKEN_RE = re.compile(r'"[^"]*"|\(|\)|[^\s()"]+')
_CMAKE_KEYWORDS = frozenset({"FAMILY", "EXCLUDE_TARGET_PROJECTS"})


_FAMILY_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def _cmake_calls(text: str, command: str) -> list[list[str]]:
    """Argument lists of every ``command(...)`` call (comments stripped, quotes removed)."""
    text = re.sub(r"#[^\n]*", "", text)
    tokens = _TOKEN_RE.findall(text)
    calls: list[list[str]] = []
    i = 0
    while i < len(tokens) - 1:
        if tokens[i] == command and tokens[i + 1] == "(":
            args: list[str] = []
            i += 2
            while i < len(tokens) and tokens[i] != ")":
                args.append(tokens[i].strip('"'))
                i += 1
            calls.append(args)
        i += 1
    return calls


def parse_targets_cmake(path: Path) -> FamilyTable:
    """Parse ``therock_add_amdgpu_target(gfxNNN "name" FAMILY a b ... [KEYWORD ...])``.

    As in CMake's ``cmake_parse_arguments``, only names after ``FAMILY`` count, and every
    target is also a family of its own.
    """
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read targets CMake file: {exc.strerror}", path=path) from exc
    except UnicodeDecodeError as exc:
        raise UsageError(f"targets CMake file is not UTF-8 text: {exc}", path=path) from None
    families: dict[str, set[str]] = {}
    for args in _cmake_calls(text, "therock_add_amdgpu_target"):
        if len(args) < 2 or not _SINGLE_RE.match(args[0]):
            continue
        target = args[0]
        families.setdefault(target, set()).add(target)
        section = None
        for arg in args[2:]:
            if arg in _CMAKE_KEYWORDS:
                section = arg
            elif section == "FAMILY":
                if not _FAMILY_NAME_RE.fullmatch(arg):
                    raise UsageError(
                        f"family name {arg!r} of {target} is not a name "
                        "(letters, digits, '.', '_', '-'): it becomes part of package and "
                        "directory names",
                        path=path,
                    )
                families.setdefault(arg, set()).add(target)
    if not families:
        raise UsageError("no therock_add_amdgpu_target(...) calls found", path=path)
    return FamilyTable(
        families={k: tuple(sorted(v)) for k, v in sorted(families.items())}, source=str(path)
    )
