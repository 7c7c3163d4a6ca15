"""The splitter's sink: a staging dir under the output root, published dir by dir.

Private to :mod:`kpack.split`. Output artifact dirs are built under
``OUT/.partial-*`` and renamed into place only when all of them are complete; an existing
output dir is an error unless ``force`` is set. Inputs are only ever read: files are
copied (never hard-linked, so link counts of inputs never change), symlinks recreated.
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
    """``OUT/.partial-*``: build output dirs here, then :meth:`publish` them together."""

    def __init__(self, output_dir: Path, *, force: bool, protected: Iterable[Path] = ()) -> None:
        self.output_dir = output_dir
        self.force = force
        self.protected = {os.path.realpath(p) for p in protected}
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

    def check_free(self, names: Iterable[str]) -> None:
        """Fail (unless ``force``) if any of ``names`` already exists in the output root.

        A name that is one of the ``protected`` inputs is refused even with ``force``.
        """
        names = list(names)
        inputs = sorted(n for n in names if os.path.realpath(self.output_dir / n) in self.protected)
        if inputs:
            raise ArtifactError(
                "output directories would replace the input artifact",
                path=self.output_dir,
                problems=inputs,
            )
        if self.force:
            return
        taken = sorted(n for n in names if os.path.lexists(self.output_dir / n))
        if taken:
            raise ArtifactError(
                "output directories already exist (use --force to replace them)",
                path=self.output_dir,
                problems=taken,
            )

    def publish(self, names: Iterable[str]) -> list[Path]:
        """Rename every finished dir into the output root; with ``force`` replace old ones."""
        names = sorted(names)
        self.check_free(names)
        trash = self.root / ".replaced"
        published: list[Path] = []
        for name in names:
            final = self.output_dir / name
            if os.path.lexists(final):
                trash.mkdir(exist_ok=True)
                log.info("replacing %s (--force)", final)
                final.rename(trash / name)
            (self.root / name).rename(final)
            published.append(final)
        return published
