"""``--wheel-type`` presets: ``manifests/wheel_types.yaml``, validated on load."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from kpack.common.data import manifest_path
from kpack.common.frozen import frozen
from kpack.common.yamlfile import read_yaml
from kpack.databases import handler_names
from kpack.errors import ManifestError, UsageError

__all__ = ["WheelType", "load_wheel_types", "overlay_root_ok", "prefix_ok", "wheel_type"]

log = logging.getLogger(__name__)

WHEEL_TYPES_YAML = "wheel_types.yaml"
_NAME = re.compile(r"[a-z][a-z0-9-]*")
_PREFIX = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_ROOT = re.compile(r"(?:[A-Za-z0-9_.-]+/)+")
_KEYS = {"description", "overlay_root", "device_package_prefix", "databases"}


def overlay_root_ok(root: object) -> bool:
    """A relative directory ending in ``/`` (``torch/``), no ``.`` or ``..`` in it."""
    return (
        isinstance(root, str)
        and _ROOT.fullmatch(root) is not None
        and not {".", ".."} & set(root.split("/"))
    )


def prefix_ok(prefix: object) -> bool:
    """A normalized distribution name (``amd-torch-device``)."""
    return isinstance(prefix, str) and _PREFIX.fullmatch(prefix) is not None


@frozen
class WheelType:
    name: str
    description: str
    overlay_root: str
    device_package_prefix: str
    databases: tuple[str, ...]


def load_wheel_types(path: Path | None = None) -> dict[str, WheelType]:
    """Every preset by name; a :class:`ManifestError` lists all problems with their keys."""
    path = path or manifest_path(WHEEL_TYPES_YAML)
    raw = read_yaml(path, error=ManifestError)
    problems: list[str] = []
    types: dict[str, WheelType] = {}
    if not isinstance(raw, dict) or set(raw) != {"wheel_types"}:
        problems.append("wheel_types: the document must be a mapping with one key 'wheel_types'")
    elif not isinstance(raw["wheel_types"], dict) or not raw["wheel_types"]:
        problems.append("wheel_types: expected a non-empty mapping of name -> preset")
    else:
        known = set(handler_names())
        for name, body in raw["wheel_types"].items():
            preset = _preset(problems, str(name), body, known)
            if preset is not None:
                types[preset.name] = preset
    if problems:
        raise ManifestError("invalid wheel type manifest", path=path, problems=problems)
    log.debug("loaded %d wheel types from %s", len(types), path)
    return types


def wheel_type(name: str, path: Path | None = None) -> WheelType:
    """The preset ``name``; :class:`UsageError` naming the known ones if there is none."""
    types = load_wheel_types(path)
    if name not in types:
        raise UsageError(f"unknown wheel type {name!r}; known: {', '.join(sorted(types))}")
    return types[name]


def _preset(problems: list[str], name: str, body: Any, known: set[str]) -> WheelType | None:
    key = f"wheel_types.{name}"
    before = len(problems)
    if not _NAME.fullmatch(name):
        problems.append(f"{key}: names are lower-case letters, digits and '-'")
    if not isinstance(body, dict):
        problems.append(f"{key}: expected a mapping, got {type(body).__name__}")
        return None
    problems += [f"{key}.{k}: unknown key" for k in sorted(set(body) - _KEYS, key=str)]
    problems += [f"{key}.{k}: missing" for k in sorted(_KEYS - set(body))]
    description = body.get("description")
    if not isinstance(description, str) or not description.strip():
        problems.append(f"{key}.description: expected a non-empty string")
    root = body.get("overlay_root")
    if not overlay_root_ok(root):
        problems.append(f"{key}.overlay_root: expected a relative directory ending in '/'")
    prefix = body.get("device_package_prefix")
    if not prefix_ok(prefix):
        problems.append(f"{key}.device_package_prefix: expected a normalized name, got {prefix!r}")
    databases = body.get("databases", [])
    if not isinstance(databases, list) or not all(isinstance(d, str) for d in databases):
        problems.append(f"{key}.databases: expected a list of handler names")
        databases = []
    unknown = sorted(set(databases) - known)
    if unknown:
        problems.append(f"{key}.databases: unknown handler(s) {', '.join(unknown)}")
    if len(problems) != before:
        return None
    return WheelType(
        name, " ".join(str(description).split()), str(root), str(prefix), tuple(databases)
    )
