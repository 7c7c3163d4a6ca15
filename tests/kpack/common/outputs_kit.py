"""What the output-module tests share: a tool, a record name, staged publications, planted
records and fingerprints taken the way the module takes them, and a snapshot of a tree."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from kpack.common.output_record import FORMAT
from kpack.common.outputs import publish

TOOL = "t"
REC = ".rec.json"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def snapshot(root: Path) -> dict[str, object]:
    """Everything below ``root``, never followed: files' bytes, links' targets, dirs."""
    out: dict[str, object] = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = path.read_bytes()
    return out


def stage(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    root.mkdir(parents=True, exist_ok=True)
    return root


def publish_files(
    dest: Path, tmp: Path, files: dict[str, bytes], *, force: bool = False, record: str = REC
) -> None:
    """``files`` staged in a fresh dir under ``tmp``, then published into ``dest``."""
    staged = stage(tmp / f"s{len(list(tmp.glob('s*')))}", files)
    publish(dest, staged, sorted(files), record=record, tool=TOOL, force=force)


def record_doc(outputs: dict[str, object]) -> str:
    return json.dumps({"format": FORMAT, "tool": TOOL, "outputs": outputs})


def plant_record(dest: Path, outputs: dict[str, object], name: str = REC) -> None:
    (dest / name).write_text(record_doc(outputs))


def file_entry(path: Path) -> dict[str, object]:
    """A file's entry as the tool records it: the right bytes and inode."""
    st = path.lstat()
    return {
        "kind": "file",
        "size": st.st_size,
        "sha256": sha(path.read_bytes()),
        "inode": st.st_ino,
    }


def link_entry(path: Path) -> dict[str, object]:
    return {"kind": "symlink", "target": os.readlink(path), "inode": path.lstat().st_ino}
