"""Where installed packages and their distribution metadata live."""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import re
from pathlib import Path

from ._errors import RocmSdkError


def normalize_dist_name(name: str) -> str:
    """PEP 503 normalisation with '_' as separator, as used in dist-info names."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _find_spec(name: str) -> importlib.machinery.ModuleSpec | None:
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


def package_dir(name: str) -> Path | None:
    """Directory of the regular (``__init__.py``) package ``name``, or None.

    Raises RocmSdkError if ``name`` resolves to a namespace package, which means
    a wheel that owned its ``__init__.py`` was removed.
    """
    spec = _find_spec(name)
    if spec is None:  # maybe installed after this process scanned sys.path
        importlib.invalidate_caches()
        spec = _find_spec(name)
    if spec is None:
        return None
    if spec.origin is None or not spec.origin.endswith("__init__.py"):
        where = ", ".join(spec.submodule_search_locations or []) or "?"
        raise RocmSdkError(
            f"{name!r} at {where} is not a regular package (no __init__.py): files left over "
            "from a wheel that was uninstalled, or a wheel that lost its __init__.py. If you "
            f"removed the package on purpose, delete {where}; otherwise reinstall it"
        )
    return Path(spec.origin).parent


def dist_info_dirs(site: Path) -> list[Path]:
    """Every ``*.dist-info`` directory directly under ``site``, sorted.

    Lists the directory itself instead of using importlib.metadata, whose path
    cache misses new entries on file systems with coarse mtimes.
    """
    try:
        names = os.listdir(site)
    except OSError:
        return []
    return [site / n for n in sorted(names) if n.endswith(".dist-info") and (site / n).is_dir()]


def dist_info_name(dist_info: Path) -> str:
    """The normalised distribution name of a ``<name>-<version>.dist-info`` dir."""
    return normalize_dist_name(dist_info.name[: -len(".dist-info")].split("-", 1)[0])


def find_dist_info(site: Path, dist_name: str) -> Path | None:
    """The dist-info directory of ``dist_name`` under ``site``, or None."""
    wanted = normalize_dist_name(dist_name)
    for path in dist_info_dirs(site):
        if dist_info_name(path) == wanted:
            return path
    return None


def read_metadata_headers(dist_info: Path) -> dict[str, str]:
    """Name and Version (and other single-line headers) of an installed dist."""
    headers: dict[str, str] = {}
    try:
        with open(dist_info / "METADATA", encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    break
                key, sep, value = line.partition(":")
                if sep and not key.startswith((" ", "\t")):
                    headers.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return headers


def without_post_release(version: str) -> str:
    """The version with a ``.postN`` segment removed."""
    return re.sub(r"\.post\d+", "", version, count=1)
