"""One shard's ``report.json``, read and checked, and the helpers for input values.

A report is the builder's record of what a shard built: its version and mode, one row
per device wheel, per target and per generic file, and (given ``--max-wheel-size``) one per
wheel against that budget. :func:`parse_report` reads one into a
:class:`build_tools.report.Report`, checking every row's columns against the row type (an
integer column, a size or a count, is never negative) and collecting every problem before it
fails. :func:`shown` quotes a bad input value in a
message, cut to one line; :func:`parse_version` reads a PEP 440 version or gives None.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from packaging.version import Version

from build_tools.report import DeviceRow, GenericRow, Report, TargetRow
from kpack.common.budget import WheelSize
from kpack.common.jsonfile import load_json_object
from kpack.errors import PackagingError

__all__ = ["MODES", "REPORT_JSON", "REPORT_MD", "parse_report", "parse_version", "shown"]

REPORT_JSON = "report.json"
REPORT_MD = "report.md"
#: A set's modes: kpack-split (device wheels per target) or legacy (libraries per family).
MODES = ("kpack", "legacy")

_FIELD_TYPES: dict[str, tuple[type, ...]] = {"str": (str,), "int": (int,), "float": (int, float)}
_SHOWN = 160  # characters of a bad value quoted in an error


def shown(value: object) -> str:
    """``repr`` of a value from an input, cut short: one line of reasonable length."""
    text = repr(value)
    return text if len(text) <= _SHOWN else f"{text[: _SHOWN - 3]}..."


def _valid(value: object, kind: str) -> bool:
    if kind == "tuple[str, ...]":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if not isinstance(value, _FIELD_TYPES[kind]) or type(value) is bool:
        return False
    return not isinstance(value, float) or math.isfinite(value)  # JSON has no NaN


def _rows(doc: Mapping[str, Any], key: str, cls: type[Any], problems: list[str]) -> tuple[Any, ...]:
    raw = doc.get(key)
    if not isinstance(raw, list):
        problems.append(f"{key}: expected a list")
        return ()
    out = []
    for i, row in enumerate(raw):
        if not isinstance(row, dict):
            problems.append(f"{key}[{i}]: expected an object")
            continue
        values: dict[str, Any] = {}
        for column in fields(cls):
            value: Any = row.get(column.name)
            if not _valid(value, str(column.type)):
                problems.append(
                    f"{key}[{i}].{column.name}: expected {column.type}, got {shown(value)}"
                )
            elif column.type == "int" and value < 0:  # a size or a count
                problems.append(f"{key}[{i}].{column.name}: expected int >= 0, got {shown(value)}")
            elif column.type == "tuple[str, ...]":
                values[column.name] = tuple(value)
            else:
                values[column.name] = float(value) if column.type == "float" else value
        if len(values) == len(fields(cls)):
            out.append(cls(**values))
    return tuple(out)


def parse_report(path: Path) -> Report:
    """Read and validate one shard's ``report.json``; all problems at once."""
    doc = load_json_object(path, error=PackagingError)
    problems: list[str] = []
    mode = doc.get("mode")
    if mode not in MODES:
        problems.append(f"mode: expected 'kpack' or 'legacy', got {shown(mode)}")
    version = doc.get("version")
    if not isinstance(version, str):
        problems.append(f"version: expected a string, got {shown(version)}")
    elif parse_version(version) is None:
        problems.append(f"version: not a PEP 440 version: {shown(version)}")
    device = _rows(doc, "device_wheels", DeviceRow, problems)
    targets = _rows(doc, "targets", TargetRow, problems)
    generic = _rows(doc, "generic", GenericRow, problems)
    budget = _budget_rows(doc.get("budget", []), problems)
    if problems:
        raise PackagingError("invalid report", path=path, problems=problems)
    return Report(str(version), str(mode), device, targets, generic, budget)


def _budget_rows(raw: object, problems: list[str]) -> tuple[WheelSize, ...]:
    """``budget``: every wheel against ``--max-wheel-size`` (a list, empty without one; a
    report written before there was one has no key); each row a wheel's name, its size and
    the budget, a positive integer."""
    if not isinstance(raw, list):
        problems.append(f"budget: expected a list, got {shown(raw)}")
        return ()
    rows = []
    for i, row in enumerate(raw):
        if not isinstance(row, dict):
            problems.append(f"budget[{i}]: expected an object")
            continue
        name, size, budget = row.get("name"), row.get("size"), row.get("budget")
        bad = [
            f"budget[{i}].{key}: expected {kind}, got {shown(value)}"
            for key, value, kind, ok in (
                ("name", name, "str", isinstance(name, str)),
                ("size", size, "int >= 0", _count(size, 0)),
                ("budget", budget, "int >= 1", _count(budget, 1)),
            )
            if not ok
        ]
        problems += bad
        if not bad and isinstance(name, str) and isinstance(size, int) and isinstance(budget, int):
            rows.append(WheelSize(name=name, size=size, budget=budget))
    return tuple(rows)


def _count(value: object, least: int) -> bool:
    return isinstance(value, int) and type(value) is not bool and value >= least


def parse_version(text: str) -> Version | None:
    """``text`` as a PEP 440 version, None when it is none (a number over Python's
    4300-digit limit is a bare ValueError from packaging, not InvalidVersion)."""
    try:
        return Version(text)
    except ValueError:  # InvalidVersion is one too
        return None
