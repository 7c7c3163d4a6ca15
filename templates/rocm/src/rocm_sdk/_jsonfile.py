"""JSON files of the installed package set (``dist_info.json``, link manifests), read so
that a damaged one fails like any unparsable file: ``OSError`` or ``ValueError``."""

from __future__ import annotations

import json
from pathlib import Path

#: Far more than any JSON file of a package set holds.
MAX_JSON_BYTES = 64 << 20


def read_json(path: Path) -> object:
    """The parsed content of ``path``. Raises OSError, or ValueError for a file that is not
    UTF-8 JSON, nests too deeply or is larger than ``MAX_JSON_BYTES``."""
    with open(path, "rb") as f:
        data = f.read(MAX_JSON_BYTES + 1)
    if len(data) > MAX_JSON_BYTES:
        raise ValueError(f"larger than {MAX_JSON_BYTES} bytes")
    try:
        return json.loads(data.decode("utf-8"))
    except RecursionError:
        raise ValueError("nested too deeply") from None
