"""JSON files of the installed package set (``dist_info.json``, link manifests), read so
that a damaged one fails like any unparsable file: ``OSError`` or ``ValueError``.

Nesting is bounded before ``json`` parses anything (its C scanner recurses once per ``[`` or
``{``: 200,000 of them are a ``RecursionError``, or a crash where the recursion limit was
raised), with the cap of the builder's loader (``kpack/common/jsonfile.py``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

#: Far more than any JSON file of a package set holds.
MAX_JSON_BYTES = 64 << 20
#: Arrays and objects nested deeper than this are refused: the files we read nest 2-5 levels.
MAX_JSON_DEPTH = 512

# A string (escapes included; unterminated at the end of the text), or one bracket.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.DOTALL)


def too_deep(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
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


def read_json(path: Path) -> object:
    """The parsed content of ``path``. Raises OSError, or ValueError for a file that is not
    UTF-8 JSON, nests more than ``MAX_JSON_DEPTH`` deep or is larger than
    ``MAX_JSON_BYTES``."""
    with open(path, "rb") as f:
        data = f.read(MAX_JSON_BYTES + 1)
    if len(data) > MAX_JSON_BYTES:
        raise ValueError(f"larger than {MAX_JSON_BYTES} bytes")
    text = data.decode("utf-8")
    if too_deep(text):
        raise ValueError(f"nested too deeply (more than {MAX_JSON_DEPTH} levels of [ and {{)")
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None
