"""The planned assembly written all or nothing.

:func:`write_assembly` fills a temporary sibling of ``--output`` with the planned files
(hard links where it can), stages the merged report beside it, writes the PEP 503 index
when asked, then renames each into place, the report last. :class:`_Undo` notes each step
before it is taken, so a failure or a signal takes everything back: the outputs as they
were found, an older report restored, no temporary or new parent directory left.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from build_tools.pep503 import write_simple_index
from build_tools.report import render_markdown
from kpack.common.boundary import os_error_line
from kpack.common.tempdirs import make_temp_dir, temp_dir_name
from kpack.errors import PackagingError, UsageError

from .plan import AssemblyPlan
from .report import REPORT_JSON, REPORT_MD

__all__ = ["write_assembly"]


def write_assembly(plan: AssemblyPlan, output: Path, *, index: Path | None = None) -> None:
    """Write the merged dist (and the PEP 503 index) atomically: all or nothing.

    The merged report goes next to the output dist (never inside it: dist/ holds
    distributions only, so ``twine upload dist/*`` works as is); it is written beside
    the dist first and moved into place last."""
    output, index = Path(output), Path(index) if index is not None else None
    _check_free(output, "--output")
    if index is not None:
        _check_free(index, "--index")
        out_abs, index_abs = output.resolve(), index.resolve()
        if index_abs == out_abs or out_abs in index_abs.parents or index_abs in out_abs.parents:
            raise UsageError("--index and --output must be separate directories", path=index)
    reports = _report_files(plan)
    _check_report_places(output.parent, reports)
    undo = _Undo()
    tmp = temp_dir_name(output.parent, f".{output.name}.", ".tmp")
    staged = temp_dir_name(output.parent, f".{output.name}.report.", ".tmp")
    try:
        undo.make_parents(output.parent)
        undo.temps += [tmp, staged]
        _populate(plan, make_temp_dir(tmp))
        tmp.chmod(0o755)
        _stage_reports(reports, make_temp_dir(staged))
        if index is not None:
            undo.make_parents(index.parent)
            undo.place(index)
            write_simple_index(tmp, index, digests={f.name: f.sha256 for f in plan.files})
        undo.place(output)
        with suppress(FileNotFoundError):
            output.rmdir()  # empty, checked above
        tmp.rename(output)
        _move_reports(reports, staged, output.parent, undo)
        shutil.rmtree(staged)
    except BaseException as exc:
        undo.run()
        if isinstance(exc, OSError):
            line = os_error_line(exc)
            raise PackagingError(f"cannot write the output: {line}", path=output) from exc
        raise


def _check_free(path: Path, what: str) -> None:
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise UsageError(f"{what} exists and is not a directory", path=path)
    if path.is_dir() and any(path.iterdir()):
        raise UsageError(f"{what} exists and is not empty; remove it first", path=path)


def _link_or_copy(source: Path, dest: Path) -> None:
    try:
        os.link(source, dest)
    except OSError:
        shutil.copyfile(source, dest)


def _populate(plan: AssemblyPlan, into: Path) -> None:
    for f in plan.files:
        _link_or_copy(f.path, into / f.name)


def _report_files(plan: AssemblyPlan) -> dict[str, str]:
    """The merged report, by file name (none when the merge was skipped)."""
    if plan.report is None:
        return {}
    return {REPORT_JSON: plan.report.to_json(), REPORT_MD: render_markdown(plan.report)}


def _check_report_places(parent: Path, names: Iterable[str]) -> None:
    for name in names:
        place = parent / name
        if place.is_dir() and not place.is_symlink():
            raise UsageError("is a directory, where the merged report goes", path=place)


def _missing_dirs(path: Path) -> list[Path]:
    """The directories ``mkdir -p path`` would make, outermost first."""
    missing = []
    for directory in (path, *path.parents):
        if directory.exists() or directory.is_symlink():
            break
        missing.append(directory)
    return missing[::-1]


@dataclass
class _Undo:
    """What a failed :func:`write_assembly` takes back: the reports it moved in (the old
    ones back), its temporary dirs, the outputs it had put in place (left as they were
    found: absent or empty) and the parents it made."""

    reports: list[tuple[Path, Path | None]] = field(default_factory=list)  # (final, old)
    temps: list[Path] = field(default_factory=list)
    placed: list[tuple[Path, bool]] = field(default_factory=list)  # (dir, existed empty)
    made: list[Path] = field(default_factory=list)

    def place(self, directory: Path) -> None:
        self.placed.append((directory, directory.is_dir()))

    def make_parents(self, path: Path) -> None:
        """``mkdir -p path``, each new directory noted before it is made."""
        self.made += _missing_dirs(path)
        path.mkdir(parents=True, exist_ok=True)

    def run(self) -> None:
        for final, old in reversed(self.reports):
            with suppress(OSError):
                if old is None:
                    final.unlink()
                else:
                    os.replace(old, final)
        for temp in self.temps:
            shutil.rmtree(temp, ignore_errors=True)
        for directory, existed in reversed(self.placed):
            shutil.rmtree(directory, ignore_errors=True)
            if existed:
                with suppress(OSError):
                    directory.mkdir()
        for directory in reversed(self.made):
            with suppress(OSError):
                directory.rmdir()


def _stage_reports(reports: Mapping[str, str], into: Path) -> None:
    for name, text in reports.items():
        (into / name).write_text(text, encoding="utf-8")


def _move_reports(names: Iterable[str], staged: Path, parent: Path, undo: _Undo) -> None:
    """Move the staged reports into ``parent``; a report there before is kept in ``staged``
    until the end, for :class:`_Undo`."""
    for name in names:
        final, old = parent / name, staged / f"{name}.old"
        undo.reports.append((final, old))  # before the rename: a signal may come after it
        try:
            os.rename(final, old)
        except FileNotFoundError:
            undo.reports[-1] = (final, None)
        os.replace(staged / name, final)
