"""What a tool wrote into an output dir, recorded so that its next run knows.

Private to :mod:`kpack.split`. The rule every writer here follows: a re-run replaces what the
same tool wrote before and leaves every other file alone; an entry the tool did not write
(or that was changed since) is never deleted or overwritten without ``force``.

A record is a small JSON file (``.kpack-split-<prefix>.json`` beside the split's artifact
dirs, one per prefix so that parallel splits into one dir never share a file): for every
top-level name written, a fingerprint of what it held — each file's size, mtime and mode,
each symlink's target, each directory. A name is *ours* when it is recorded and its
fingerprint still matches; a missing, unreadable or malformed record owns nothing.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

from kpack.common.jsonfile import load_json_object
from kpack.common.tempdirs import temp_dir_name
from kpack.errors import ArtifactError

__all__ = [
    "Fingerprint",
    "fingerprint",
    "load_record",
    "record_path",
    "shortened",
    "write_record",
]

log = logging.getLogger(__name__)

#: relpath inside one written name ("" for the name itself) -> what it is
Fingerprint = dict[str, str]

_FORMAT = "kpack-output-record/1"
#: entries of an error's problem list shown before "... and N more"
SHOWN = 3


def record_path(output_dir: Path, prefix: str) -> Path:
    """The record of the split of ``prefix`` into ``output_dir``."""
    return output_dir / f".kpack-split-{prefix}.json"


def shortened(names: Sequence[str], shown: int = SHOWN) -> list[str]:
    """A problem list kept short: the first ``shown`` entries and a count of the rest."""
    if len(names) <= shown:
        return list(names)
    return [*names[:shown], f"... and {len(names) - shown} more"]


def _describe(st: os.stat_result, target: str | None) -> str:
    if target is not None:
        return f"l:{target}"
    if stat.S_ISDIR(st.st_mode):
        return f"d:{stat.S_IMODE(st.st_mode):o}"
    if stat.S_ISREG(st.st_mode):
        return f"f:{st.st_size}:{st.st_mtime_ns}:{stat.S_IMODE(st.st_mode):o}"
    return f"other:{stat.S_IFMT(st.st_mode):o}"


def fingerprint(path: Path) -> Fingerprint:
    """Every entry at and below ``path`` (symlinks never followed), by relative path."""
    out: Fingerprint = {}
    pending = [("", path)]
    while pending:
        rel, here = pending.pop()
        st = os.lstat(here)
        target = os.readlink(here) if stat.S_ISLNK(st.st_mode) else None
        out[rel] = _describe(st, target)
        if target is None and stat.S_ISDIR(st.st_mode):
            with os.scandir(here) as entries:
                pending += [(f"{rel}/{e.name}" if rel else e.name, Path(e.path)) for e in entries]
    return out


def load_record(path: Path) -> dict[str, Fingerprint]:
    """The names ``path`` records, with their fingerprints; nothing if there is no valid
    record (every existing name then counts as foreign)."""
    if not path.is_file() or path.is_symlink():
        return {}
    try:
        data = load_json_object(path, error=ArtifactError)
    except ArtifactError as exc:
        log.warning("ignoring the output record: %s", exc)
        return {}
    names = data.get("names")
    if data.get("format") != _FORMAT or not isinstance(names, dict):
        log.warning("%s: ignoring an output record of another format", path)
        return {}
    valid = all(
        isinstance(fp, dict) and all(isinstance(v, str) for v in fp.values())
        for fp in names.values()
    )
    if not valid:
        log.warning("%s: ignoring an output record of another format", path)
        return {}
    return {str(k): dict(v) for k, v in names.items()}


def write_record(path: Path, names: Mapping[str, Fingerprint]) -> None:
    """Replace the record at ``path`` atomically (a temporary file beside it, then rename)."""
    body = {"format": _FORMAT, "names": {k: names[k] for k in sorted(names)}}
    text = json.dumps(body, indent=1, sort_keys=True) + "\n"
    temp = temp_dir_name(path.parent, f".{path.name}.", ".tmp")
    try:
        temp.write_text(text, encoding="utf-8")
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
