"""The splitter's sink: a staging dir under the output root, published dir by dir.

Private to :mod:`kpack.split`. Output artifact dirs are built under
``OUT/.partial-*`` and renamed into place only when all of them are complete; an existing
output dir the tool did not write (see :mod:`._record`) is an error unless ``force`` is set.
Inputs are only ever read: files are copied (never hard-linked, so link counts of inputs never
change), symlinks recreated.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

from kpack.common.tempdirs import make_temp_dir, temp_dir_name
from kpack.errors import ArtifactError
from kpack.split._record import Fingerprint, fingerprint, load_record, shortened, write_record

__all__ = ["Staging", "copy_file", "copy_meta", "make_dirs", "write_manifest"]

log = logging.getLogger(__name__)


def copy_meta(source: Path, dest: Path, mode: int) -> None:
    """Give ``dest`` the permission bits ``mode`` and the modification time of ``source``."""
    st = os.stat(source, follow_symlinks=False)
    os.chmod(dest, mode)
    os.utime(dest, ns=(st.st_mtime_ns, st.st_mtime_ns))


def copy_file(source: Path, dest: Path, mode: int) -> None:
    """Copy a regular file's bytes (kernel copy where possible), mode and mtime."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, dest, follow_symlinks=False)
    copy_meta(source, dest, mode)


def make_dirs(root: Path, relpath: str) -> Path:
    path = root / relpath
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_manifest(artifact_dir: Path, stages: Iterable[str]) -> None:
    """``artifact_manifest.txt``: sorted stage dirs, ``\\n``-joined, trailing newline."""
    ordered = sorted(set(stages))
    (artifact_dir / "artifact_manifest.txt").write_text("\n".join(ordered) + "\n", encoding="utf-8")


class Staging:
    """``OUT/.partial-*``: build output entries here, then :meth:`publish` them together.

    With a ``record`` (see :mod:`._record`), an existing entry this tool wrote before, and
    did not change since, is replaced without ``force``; entries the last run recorded that
    this run does not write are removed with it. Anything else in the way needs ``force``.
    """

    def __init__(
        self,
        output_dir: Path,
        *,
        force: bool,
        protected: Iterable[Path] = (),
        record: Path | None = None,
    ) -> None:
        self.output_dir = output_dir
        self.force = force
        self.protected = {os.path.realpath(p) for p in protected}
        self.record = record
        self._created_output = not output_dir.exists()
        output_dir.mkdir(parents=True, exist_ok=True)
        self.root = temp_dir_name(output_dir, ".partial-")

    def __enter__(self) -> Staging:
        try:
            make_temp_dir(self.root)
        except BaseException:  # __exit__ will not run: undo a directory made half-way
            shutil.rmtree(self.root, ignore_errors=True)
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        if exc is not None and self._created_output:
            with contextlib.suppress(OSError):  # only if nothing else landed there
                self.output_dir.rmdir()

    def dir(self, name: str) -> Path:
        return self.root / name

    def _recorded(self) -> dict[str, Fingerprint]:
        return {} if self.record is None else load_record(self.record)

    def _ours(self, name: str, recorded: dict[str, Fingerprint]) -> bool:
        known = recorded.get(name)
        return known is not None and fingerprint(self.output_dir / name) == known

    def check_free(self, names: Iterable[str]) -> None:
        """Fail (unless ``force``) if any of ``names`` exists in the output root and is not
        what this tool wrote there last time, unchanged.

        A name that is one of the ``protected`` inputs is refused even with ``force``.
        """
        names = sorted(names)
        inputs = [n for n in names if os.path.realpath(self.output_dir / n) in self.protected]
        if inputs:
            raise ArtifactError(
                "output directories would replace the input artifact",
                path=self.output_dir,
                problems=shortened(inputs),
            )
        if self.force:
            return
        recorded = self._recorded()
        taken = [
            n for n in names if os.path.lexists(self.output_dir / n) and not self._ours(n, recorded)
        ]
        if taken:
            raise ArtifactError(
                "output entries already exist that this tool did not write (use --force to "
                "replace them)",
                path=self.output_dir,
                problems=shortened(taken),
            )

    def publish(self, names: Iterable[str]) -> list[Path]:
        """Rename every finished entry into the output root, replacing (and, for names only
        the last run wrote, removing) this tool's earlier output; then record what is there.
        A failure half-way puts back what was moved."""
        names = sorted(names)
        stale = sorted(
            n for n in self._recorded() if n not in names and os.path.lexists(self.output_dir / n)
        )
        self.check_free([*names, *stale])
        prints = {n: fingerprint(self.root / n) for n in names}
        moves = _Moves(self.root / ".replaced")
        try:
            for name in [*names, *stale]:
                moves.set_aside(self.output_dir / name)
            for name in names:
                moves.bring(self.root / name, self.output_dir / name)
            if self.record is not None:
                write_record(self.record, prints)
        except BaseException:
            moves.undo()
            raise
        for name in stale:
            log.info("removed %s (written by the last run, not by this one)", name)
        return [self.output_dir / n for n in names]


class _Moves:
    """Renames done while publishing, so that a failure can put everything back."""

    def __init__(self, trash: Path) -> None:
        self.trash = trash
        self.done: list[tuple[Path, Path]] = []  # (from, to)

    def set_aside(self, final: Path) -> None:
        if os.path.lexists(final):
            self.trash.mkdir(exist_ok=True)
            aside = self.trash / final.name
            log.info("replacing %s", final)
            final.rename(aside)
            self.done.append((final, aside))

    def bring(self, staged: Path, final: Path) -> None:
        staged.rename(final)
        self.done.append((staged, final))

    def undo(self) -> None:
        for source, dest in reversed(self.done):
            with contextlib.suppress(OSError):
                dest.rename(source)
