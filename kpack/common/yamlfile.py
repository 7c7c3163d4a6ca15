"""Read a YAML document safely: one clear error for every way the file can be wrong.

A safe loader builds no objects but plain data (libyaml's ``CSafeLoader`` where PyYAML was
built with it: the same documents, ten times as fast as the pure-Python ``SafeLoader``, which
a split would otherwise spend a tenth of its start-up in); on top of it, non-UTF-8 bytes,
nesting too deep for the parser (a ``RecursionError`` otherwise) and any parser error become
the caller's error type naming the file.

**Renderings.** Importing PyYAML costs a command about 10 ms, as much as a small wheel's
split spends on its work, and every split reads three manifests. So a manifest may have a
*rendering* beside it, ``<name>.yaml.json``: its data as JSON, with the sha256 of the YAML
bytes it was made from. :func:`read_yaml` reads the YAML file's bytes, and when a rendering
of exactly those bytes is there, returns the rendering's data (the same plain data: mappings
in file order, lists, strings, numbers, booleans, null); otherwise it parses the YAML, so a
rendering that is stale, damaged or missing costs time, never a different answer.
``python -m kpack.common.yamlfile FILE.yaml...`` writes the renderings (the shipped
manifests' are checked current by ``tests/kpack/common/test_yamlfile.py``); a document JSON
cannot carry as it is (a non-string key, a date) gets none. PyYAML is imported by the first
YAML file parsed.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kpack.common.jsonfile import load_json_object
from kpack.errors import ManifestError, RocmPackagingError

__all__ = ["RENDERING_SUFFIX", "read_yaml", "render"]

#: A rendering's name: the YAML file's name and this.
RENDERING_SUFFIX = ".json"
_FORMAT = "rocm-packaging-yaml-rendering/1"


def read_yaml(path: str | os.PathLike[str], *, error: type[RocmPackagingError]) -> Any:
    """The data of the YAML file ``path``, or ``error`` naming it and what is wrong."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise error(f"cannot read YAML: {exc.strerror}", path=path) from None
    rendered = _rendering(Path(path), raw)
    if rendered is not None:
        return rendered[0]
    return _parse(raw, path, error)


def render(path: Path) -> bytes:
    """The rendering of the YAML file ``path`` (:class:`ManifestError` if JSON cannot carry
    its data as it is)."""
    raw = path.read_bytes()
    data = _parse(raw, path, ManifestError)
    if not _plain(data):
        raise ManifestError("has data JSON cannot carry (a non-string key, a date...)", path=path)
    doc = {"format": _FORMAT, "sha256": hashlib.sha256(raw).hexdigest(), "data": data}
    return (json.dumps(doc, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def _rendering(path: Path, raw: bytes) -> tuple[Any] | None:
    """The data of ``path``'s rendering made from ``raw``, in a 1-tuple; ``None`` when there
    is no such rendering."""
    rendering = path.with_name(path.name + RENDERING_SUFFIX)
    try:  # the bounded loader (size, depth, duplicate keys); anything wrong: parse the YAML
        doc = load_json_object(rendering, error=ManifestError)
    except ManifestError:
        return None
    if doc.get("format") != _FORMAT or "data" not in doc:
        return None
    if doc.get("sha256") != hashlib.sha256(raw).hexdigest():
        return None
    return (doc["data"],)


def _parse(raw: bytes, path: str | os.PathLike[str], error: type[RocmPackagingError]) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"not UTF-8 text: {exc}", path=path) from None
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)  # a safe loader: plain data only
    except yaml.YAMLError as exc:
        raise error(f"cannot read YAML: {exc}", path=path) from None
    except RecursionError:
        raise error("cannot read YAML: nested too deeply", path=path) from None


def _plain(data: Any) -> bool:
    """Whether JSON gives ``data`` back as it is."""
    if isinstance(data, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in data.items())
    if isinstance(data, list):
        return all(_plain(v) for v in data)
    if isinstance(data, float):
        return data == data and data not in (float("inf"), float("-inf"))
    return data is None or isinstance(data, (str, int, bool))


def main(argv: Sequence[str] | None = None) -> int:
    """Write the rendering of every YAML file named on the command line."""
    paths = [Path(p) for p in (sys.argv[1:] if argv is None else argv)]
    if not paths:
        print("usage: python -m kpack.common.yamlfile FILE.yaml...", file=sys.stderr)
        return 2
    for path in paths:
        try:
            rendering = render(path)
        except RocmPackagingError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        target = path.with_name(path.name + RENDERING_SUFFIX)
        partial = target.with_name(f".{target.name}.partial")
        partial.write_bytes(rendering)
        os.replace(partial, target)  # a reader never sees half a rendering
        print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
