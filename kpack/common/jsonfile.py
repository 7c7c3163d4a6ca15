"""Read a JSON object from an untrusted file: one clear error for every way it can be wrong.

Duplicate keys are refused (``json`` would silently keep the last one), as are nesting
deeper than :data:`MAX_JSON_DEPTH`, non-UTF-8 bytes, numbers Python refuses to convert, files
over :data:`MAX_JSON_BYTES`, and a top level that is not an object.

The depth is counted before ``json`` parses anything: its C scanner recurses once per ``[`` or
``{``, so 200,000 of them end in a ``RecursionError`` at the default recursion limit and in a
crash of the interpreter (a stack overflow) where the limit was raised. The runtime's own
loader (``templates/rocm/src/rocm_sdk/_jsonfile.py``, stdlib only) keeps the same cap.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from kpack.errors import RocmPackagingError

__all__ = [
    "MAX_JSON_BYTES",
    "MAX_JSON_DEPTH",
    "json_too_deep",
    "load_json_object",
    "parse_json_object",
]

#: Manifests we read are a few KiB; anything this large is not one of them.
MAX_JSON_BYTES = 64 << 20
#: Arrays and objects nested deeper than this are refused: the files we read nest 2-5 levels.
MAX_JSON_DEPTH = 512

# A string (escapes included; unterminated at the end of the text), or one bracket.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.DOTALL)


def json_too_deep(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``text`` nests ``[`` and ``{`` outside strings more than ``limit`` deep: one
    linear scan without recursion (the text need not be valid JSON)."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > limit:
                return True
        elif token in ("]", "}"):
            depth -= 1
    return False


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def parse_json_object(
    data: bytes, *, source: str | os.PathLike[str], error: type[RocmPackagingError]
) -> dict[str, Any]:
    """``data`` as a JSON object, or ``error`` naming ``source`` and what is wrong."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"not UTF-8 text: {exc}", path=source) from None
    if json_too_deep(text):
        raise error(
            f"malformed JSON: nested too deeply (more than {MAX_JSON_DEPTH} levels of [ and {{)",
            path=source,
        )
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as exc:
        raise error(f"duplicate key {exc.args[0]!r} in a JSON object", path=source) from None
    except RecursionError:
        raise error("malformed JSON: nested too deeply", path=source) from None
    except ValueError as exc:  # JSONDecodeError, and int() refusing a huge number
        raise error(f"malformed JSON: {exc}", path=source) from None
    if not isinstance(value, dict):
        raise error("top level must be a JSON object", path=source)
    return value


def load_json_object(
    path: str | os.PathLike[str], *, error: type[RocmPackagingError]
) -> dict[str, Any]:
    """Read and parse ``path`` (see :func:`parse_json_object`)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_JSON_BYTES + 1)
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror}", path=path) from None
    if len(data) > MAX_JSON_BYTES:
        raise error(f"larger than {MAX_JSON_BYTES} bytes: not a manifest", path=path)
    return parse_json_object(data, source=path, error=error)
