"""The output-directory rule of the wheel splitter: replace what we wrote, keep the rest.

An output directory may hold anything: other projects' wheels (TheRock splits torch and then
torchvision into the one dist dir that already holds torchaudio and triton), a previous run's
outputs, files a user put there. Each run writes its outputs into a staging directory and then
publishes them under one rule:

- what an earlier run *for the same input* wrote there (listed in its record,
  ``<dir>/.kpack-split-wheel/<input file name>.json``, and unchanged since: same sha256) is
  replaced, and those of its outputs this run no longer makes are removed;
- every other file is left alone; one that a new output would overwrite stops the run
  (listed on the following lines, a few names and a count) unless ``force`` is given;
- the swap is all or nothing: old outputs move aside, new ones move in, the record is
  rewritten, and a failure at any step moves everything back.

The record is a hidden file, so ``twine upload dist/*`` and ``pip --find-links`` see only the
distributions. Its content is deterministic (names and sha256 digests).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kpack.common.safepath import open_new
from kpack.common.tempdirs import make_temp_dir, temp_dir_name
from kpack.errors import PackagingError

__all__ = ["RECORD_DIR", "few", "publish", "record_path", "staging_name"]

log = logging.getLogger(__name__)

RECORD_DIR = ".kpack-split-wheel"
_SHOWN = 5
_CHUNK = 1 << 20


def few(items: Sequence[str], shown: int = _SHOWN) -> list[str]:
    """At most ``shown`` entries of a problem list, then ``... and N more``."""
    head = list(items[:shown])
    if len(items) > shown:
        head.append(f"... and {len(items) - shown} more")
    return head


def record_path(directory: Path, key: str) -> Path:
    return directory / RECORD_DIR / f"{key}.json"


def staging_name(target: Path) -> Path:
    """A fresh name for a staging directory on ``target``'s file system: inside it when it
    exists (a hidden name), else beside it. The caller creates it (``make_temp_dir``) inside
    the ``try`` that removes it."""
    if target.is_dir() and not target.is_symlink():
        return temp_dir_name(target, f"{RECORD_DIR}.new-")
    return temp_dir_name(target.parent, f".{target.name}.new-")


# --- fingerprints -------------------------------------------------------------------------


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _tree_entries(root: Path, rel: str = "") -> Iterator[bytes]:
    with os.scandir(root / rel if rel else root) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        name = f"{rel}/{entry.name}" if rel else entry.name
        if entry.is_symlink():
            yield b"L" + os.fsencode(name) + b"\0" + os.fsencode(os.readlink(entry.path))
        elif entry.is_dir():
            yield b"D" + os.fsencode(name)
            yield from _tree_entries(root, name)
        else:
            yield b"F" + os.fsencode(name) + b"\0" + _file_sha256(Path(entry.path)).encode()


def fingerprint(path: Path) -> str | None:
    """``sha256:<hex>`` of a regular file, ``tree:<hex>`` of a directory (names, kinds and
    file digests), None for anything else (a symlink is never ours)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISREG(mode):
        return "sha256:" + _file_sha256(path)
    if stat.S_ISDIR(mode):
        digest = hashlib.sha256()
        for item in _tree_entries(path):
            digest.update(item + b"\n")
        return "tree:" + digest.hexdigest()
    return None


# --- the record ---------------------------------------------------------------------------


def _read_record(directory: Path, key: str, force: bool) -> dict[str, str]:
    """What the last run for ``key`` wrote into ``directory``: name -> fingerprint."""
    path = record_path(directory, key)
    if os.path.islink(path.parent) or (path.parent.exists() and not path.parent.is_dir()):
        raise PackagingError("not a directory; remove it", path=path.parent)
    if not os.path.lexists(path):
        return {}
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            raise ValueError("not a regular file")
        data = json.loads(path.read_bytes()[: 16 << 20])
        outputs = data["outputs"]
        if data.get("input") != key or not isinstance(outputs, dict):
            raise ValueError("not a record of this input")
        if not all(_plain_name(n) and isinstance(v, str) for n, v in outputs.items()):
            raise ValueError("an output name is not a plain file name")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        if force:
            log.warning("%s: unreadable record ignored (--force): %s", path, exc)
            return {}
        raise PackagingError(
            f"unreadable record of an earlier split ({exc}); remove it or pass --force", path=path
        ) from None
    return dict(outputs)


def _plain_name(name: object) -> bool:
    return (
        isinstance(name, str)
        and name not in ("", ".", "..")
        and "/" not in name
        and "\\" not in name
        and "\0" not in name
        and not name.startswith(RECORD_DIR)
    )


def _record_bytes(key: str, outputs: dict[str, str]) -> bytes:
    doc = {"tool": "kpack split-wheel", "input": key, "outputs": dict(sorted(outputs.items()))}
    return (json.dumps(doc, indent=2) + "\n").encode("utf-8")


# --- plan -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    staging: Path
    target: Path
    key: str
    new: dict[str, str]  # name -> fingerprint, in staging
    aside: tuple[str, ...]  # existing names moved out of the way (replaced or stale)


def _plan(staging: Path, target: Path, key: str, force: bool) -> _Plan:
    names = sorted(os.listdir(staging))
    new = {}
    for name in names:
        digest = fingerprint(staging / name)
        if digest is None:  # pragma: no cover - the splitter writes files and directories
            raise PackagingError("staged output is neither a file nor a directory", path=name)
        new[name] = digest
    if not target.is_dir():
        return _Plan(staging, target, key, new, ())
    record = _read_record(target, key, force)
    ours = {n for n, p in record.items() if fingerprint(target / n) == p}
    aside, clash = [], []
    for name in names:
        path = target / name
        if not os.path.lexists(path):
            continue
        if name in ours or force or (path.is_symlink() and not path.exists()):
            aside.append(name)
        else:
            clash.append(name)
    if clash:
        raise PackagingError(
            f"{len(clash)} outputs exist already and are not what an earlier split of {key} "
            "wrote; remove them, pick another --output-dir or pass --force",
            path=target,
            problems=few(clash),
        )
    stale = sorted(ours - set(names))
    changed = sorted(set(record) - ours - set(names))
    for name in changed:
        if os.path.lexists(target / name):
            log.warning("%s: changed since an earlier split wrote it; left alone", target / name)
    return _Plan(staging, target, key, new, (*aside, *stale))


# --- apply ------------------------------------------------------------------------------


@dataclass
class _Applied:
    plan: _Plan
    trash: Path | None = None
    moves: list[tuple[Path, Path]] = field(default_factory=list)  # (from, to), in order
    record: Path | None = None  # the record written over an existing target

    def move(self, src: Path, dst: Path) -> None:
        os.rename(src, dst)
        self.moves.append((src, dst))

    def undo(self) -> None:
        record, self.record = self.record, None
        if record is not None:
            record.unlink(missing_ok=True)
        for src, dst in reversed(self.moves):
            os.rename(dst, src)
        self.moves.clear()
        if record is not None:
            # a record dir this run created goes too; one holding other records stays
            with contextlib.suppress(OSError):
                record.parent.rmdir()
        if self.trash is not None:
            shutil.rmtree(self.trash, ignore_errors=True)

    def finish(self) -> None:
        if self.trash is not None:
            shutil.rmtree(self.trash, ignore_errors=True)
        shutil.rmtree(self.plan.staging, ignore_errors=True)


def _apply(plan: _Plan) -> _Applied:
    applied = _Applied(plan)
    record = _record_bytes(plan.key, plan.new)
    try:
        if not plan.target.is_dir():
            _write_record(plan.staging, plan.key, record)
            umask = os.umask(0)
            os.umask(umask)
            plan.staging.chmod(0o777 & ~umask)
            applied.move(plan.staging, plan.target)
            return applied
        applied.trash = make_temp_dir(temp_dir_name(plan.target, f"{RECORD_DIR}.old-"))
        for name in plan.aside:
            applied.move(plan.target / name, applied.trash / name)
        old_record = record_path(plan.target, plan.key)
        if os.path.lexists(old_record):
            applied.move(old_record, applied.trash / f"{RECORD_DIR}.json")
        for name in sorted(plan.new):
            applied.move(plan.staging / name, plan.target / name)
        applied.record = _write_record(plan.target, plan.key, record)
    except BaseException:
        applied.undo()
        raise
    return applied


def _write_record(directory: Path, key: str, data: bytes) -> Path:
    """Write the record through a fresh temporary name, then rename it into place."""
    path = record_path(directory, key)
    if not path.parent.is_dir():
        path.parent.mkdir()
    tmp = temp_dir_name(path.parent, f".{key}.", ".tmp")
    try:
        with open_new(tmp) as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def publish(pairs: Sequence[tuple[Path, Path]], key: str, *, force: bool) -> None:
    """Publish each ``(staging, target)`` under the rule above, all or nothing: every plan
    is checked before anything moves, and a failure moves every target back."""
    plans = [_plan(staging, target, key, force) for staging, target in pairs]
    done: list[_Applied] = []
    try:
        for plan in plans:
            done.append(_apply(plan))
    except BaseException:
        for applied in reversed(done):
            applied.undo()
        raise
    for applied in done:
        applied.finish()
    for plan in plans:
        log.info("%s: %d outputs published", plan.target, len(plan.new))
