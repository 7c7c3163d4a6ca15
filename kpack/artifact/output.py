"""Writing artifact dirs (and other output dirs built from an input): entries built in a
marked staging dir, then published together under the project's one output rule
(:mod:`kpack.common.outputs`).

The sink of :mod:`kpack.split` (split and recombine) and :mod:`kpack.unbundle`. Inputs are
only ever read: files are copied (never hard-linked, so link counts of inputs never
change), symlinks recreated.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType

from kpack.common.outputs import Owns, check_outputs, publish, staging
from kpack.errors import ArtifactError, shown_list

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


TOOL = "kpack split"


class Staging:
    """A marked staging dir for entries of ``output_dir``: build them with :meth:`dir`,
    then :meth:`publish` them together.

    ``record``: where the tool's record goes, in ``output_dir`` or beside it (then each
    entry is published as ``<output_dir name>/<entry>`` into the parent); None records
    nothing (a scratch dir: nothing there is the tool's). ``owns``: see
    :data:`kpack.common.outputs.Owns`. A name that is one of the ``protected`` inputs is
    refused even with ``force``.
    """

    def __init__(
        self,
        output_dir: Path,
        *,
        force: bool,
        protected: Iterable[Path] = (),
        record: Path | None = None,
        owns: Owns = "recorded",
    ) -> None:
        self.output_dir = Path(os.path.abspath(output_dir))
        self.force = force
        self.owns = owns
        self.protected = {os.path.realpath(p) for p in protected}
        beside = record is not None and Path(os.path.abspath(record)).parent != self.output_dir
        self.dest = self.output_dir.parent if beside else self.output_dir
        self.prefix = f"{self.output_dir.name}/" if beside else ""
        self.record = None if record is None else Path(os.path.abspath(record)).name
        self._stack = ExitStack()
        self.root = Path()

    def __enter__(self) -> Staging:
        staged = self._stack.enter_context(staging(self.dest, TOOL))
        self.root = staged / self.prefix if self.prefix else staged
        self.root.mkdir(exist_ok=True)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stack.__exit__(exc_type, exc, tb)

    def dir(self, name: str) -> Path:
        return self.root / name

    def _outputs(self, names: Iterable[str]) -> Iterator[str]:
        return (f"{self.prefix}{n}" for n in names)

    def check_free(self, names: Iterable[str]) -> None:
        """Fail (unless ``force``) if any of ``names`` exists in the output dir and is not
        what this tool wrote there last time, unchanged."""
        names = sorted(names)
        inputs = [n for n in names if os.path.realpath(self.output_dir / n) in self.protected]
        if inputs:
            raise ArtifactError(
                "output directories would replace the input artifact",
                path=self.output_dir,
                problems=shown_list(inputs),
            )
        check_outputs(
            self.dest,
            self._outputs(names),
            record=self.record,
            tool=TOOL,
            force=self.force,
            owns=self.owns,
        )

    def publish(self, names: Iterable[str]) -> list[Path]:
        """Move every finished entry into the output dir (all or nothing); returns them."""
        names = sorted(names)
        self.check_free(names)
        publish(
            self.dest,
            self.root.parent if self.prefix else self.root,
            list(self._outputs(names)),
            record=self.record,
            tool=TOOL,
            force=self.force,
            owns=self.owns,
        )
        return [self.output_dir / n for n in names]
