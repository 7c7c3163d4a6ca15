"""Write small synthetic artifact trees for tests (TheRock layout)."""

from __future__ import annotations

import json
import os
from pathlib import Path

STAGE = {"base": "base/aux-overlay/stage"}


def write_manifest(root: Path, *, kpack: bool | None = False, raw: str | None = None) -> Path:
    stage = root / "base_lib_generic" / STAGE["base"]
    therock = stage / "share" / "therock"
    therock.mkdir(parents=True, exist_ok=True)
    (root / "base_lib_generic" / "artifact_manifest.txt").write_text(STAGE["base"] + "\n")
    path = therock / "therock_manifest.json"
    if raw is not None:
        path.write_text(raw)
    else:
        flags = {} if kpack is None else {"KPACK_SPLIT_ARTIFACTS": kpack}
        path.write_text(json.dumps({"flags": flags}))
    (therock / "dist_info.json").write_text(json.dumps({"dist_amdgpu_targets": "gfx942"}))
    return path


def add_artifact(
    root: Path,
    dirname: str,
    stage: str,
    files: dict[str, bytes | str],
    *,
    manifest: str | None = None,
) -> Path:
    """files: relpath -> bytes (regular file) or 'symlink:<target>' / 'dir:'."""
    art = root / dirname
    base = art / stage
    base.mkdir(parents=True, exist_ok=True)
    text = manifest if manifest is not None else stage + "\n"
    (art / "artifact_manifest.txt").write_text(text)
    for relpath, content in files.items():
        path = base / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str) and content.startswith("symlink:"):
            os.symlink(content[len("symlink:") :], path)
        elif isinstance(content, str) and content == "dir:":
            path.mkdir(exist_ok=True)
        else:
            path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return art
