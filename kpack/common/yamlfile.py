"""Read a YAML document safely: one clear error for every way the file can be wrong.

A safe loader builds no objects but plain data (libyaml's ``CSafeLoader`` where PyYAML was
built with it: the same documents, ten times as fast as the pure-Python ``SafeLoader``, which
a split would otherwise spend a tenth of its start-up in); on top of it, non-UTF-8 bytes,
nesting too deep for the parser (a ``RecursionError`` otherwise) and any parser error become
the caller's error type naming the file.
"""

from __future__ import annotations

import os
from typing import Any

import yaml

from kpack.errors import RocmPackagingError

__all__ = ["read_yaml"]

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: str | os.PathLike[str], *, error: type[RocmPackagingError]) -> Any:
    """The data of the YAML file ``path``, or ``error`` naming it and what is wrong."""
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8")
    except OSError as exc:
        raise error(f"cannot read YAML: {exc.strerror}", path=path) from None
    except UnicodeDecodeError as exc:
        raise error(f"not UTF-8 text: {exc}", path=path) from None
    try:
        return yaml.load(text, Loader=_LOADER)  # a safe loader: plain data only
    except yaml.YAMLError as exc:
        raise error(f"cannot read YAML: {exc}", path=path) from None
    except RecursionError:
        raise error("cannot read YAML: nested too deeply", path=path) from None
