"""A split report read back (``<name>-<version>-split-report.json``), for assembling the
shards of a split (:mod:`kpack.wheelsplit._assemble`).

The file is untrusted input: bounded JSON (:mod:`kpack.common.jsonfile`), every key of
:class:`~kpack.wheelsplit._report.SplitReport` and its rows present with its type (the
derived ``saved`` and ``saving`` too, and equal to what they derive from), no other key,
and every file name one safe path component. Every problem is collected and reported
together, naming the file. The per-GPU rows are not read back: they are recomputed over
every device wheel.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from kpack.common.budget import WheelSize
from kpack.common.jsonfile import load_json_object
from kpack.common.safepath import safe_component
from kpack.errors import PackagingError, RocmPackagingError
from kpack.wheelsplit._report import DeviceWheelRow, LibraryRow, SplitReport

__all__ = ["read_report"]

T = TypeVar("T")

#: Keys a row holds beyond its fields: derived values, checked against the fields.
_DERIVED: dict[type, dict[str, Callable[[Any], int]]] = {
    LibraryRow: {"saved": lambda row: row.saved},
}
_FILE_NAMES = {"input_wheel", "host_wheel", "filename", "name"}
_FILE_LISTS = {"variant_wheels"}


def read_report(path: Path) -> SplitReport:
    """The report at ``path``; a :class:`PackagingError` lists every problem."""
    data = load_json_object(path, error=PackagingError)
    problems: list[str] = []
    report = _record(SplitReport, data, "", problems, skip=frozenset({"gpus"}))
    if not isinstance(data.get("gpus"), list):
        problems.append("gpus: expected a list")
    if problems or report is None:
        raise PackagingError("not a split report", path=path, problems=problems)
    return report


def _record(
    cls: type[T],
    data: object,
    where: str,
    problems: list[str],
    skip: frozenset[str] = frozenset(),
) -> T | None:
    """``data`` as a ``cls`` (a dataclass of the report), or None with its problems noted."""
    if not isinstance(data, Mapping):
        problems.append(f"{where or 'report'}: expected an object")
        return None
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    derived = _DERIVED.get(cls, {})
    known = {*fields, *derived}
    before = len(problems)
    problems += [f"{where}{k}: unknown key" for k in sorted(set(data) - known - skip)]
    problems += [f"{where}{k}: missing" for k in sorted(known - set(data) - skip)]
    values = {
        name: _value(str(f.type), data[name], f"{where}{name}", problems)
        for name, f in fields.items()
        if name in data and name not in skip
    }
    if len(problems) != before:
        return None
    values.update({name: () for name in skip})
    record = cls(**values)
    for name, derive in derived.items():
        if data[name] != derive(record):
            problems.append(f"{where}{name}: {data[name]!r} is not {derive(record)}")
    return record


def _value(kind: str, value: object, where: str, problems: list[str]) -> Any:
    """``value`` checked against the field type ``kind`` (as the annotation spells it)."""
    rows = {
        "tuple[LibraryRow, ...]": LibraryRow,
        "tuple[DeviceWheelRow, ...]": DeviceWheelRow,
        "tuple[WheelSize, ...]": WheelSize,
    }
    if kind in rows:
        if not isinstance(value, list):
            problems.append(f"{where}: expected a list")
            return ()
        return tuple(
            _record(rows[kind], v, f"{where}[{i}].", problems) for i, v in enumerate(value)
        )
    if kind == "tuple[str, ...]":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            problems.append(f"{where}: expected a list of strings")
            return ()
        if where in _FILE_LISTS:
            for i, name in enumerate(value):
                _file_name(name, f"{where}[{i}]", problems)
        return tuple(value)
    if kind == "int | None" and value is None:
        return None
    expected = {"str": str, "int": int, "bool": bool, "int | None": int}[kind]
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        problems.append(f"{where}: expected {expected.__name__}, got {type(value).__name__}")
        return value
    if expected is int and value < 0:  # type: ignore[operator]
        problems.append(f"{where}: {value} is negative")
    if where.rpartition(".")[2] in _FILE_NAMES:
        _file_name(value, where, problems)
    return value


def _file_name(value: object, where: str, problems: list[str]) -> None:
    try:
        safe_component(value, what=where, error=PackagingError)
    except RocmPackagingError as exc:
        problems.append(exc.message)
