"""The planned assembly written all or nothing, under the project's output-directory rule.

:func:`write_assembly` lays its output out as one build's ``--dest-dir``: ``OUT/dist/`` (the
planned files, hard links where it can), ``OUT/report.json`` and ``OUT/report.md`` (the
merged report), recorded in ``OUT/`` + :data:`RECORD`. Everything is staged in a temporary
directory inside ``OUT`` (the PEP 503 index, when asked, in one beside ``--index``, recorded
beside it), then both are published in one step (:func:`kpack.common.outputs.publish_all`):
what an earlier run wrote there is replaced, every other file is left alone, and a file in
the way that assemble-shards did not write (or that changed since) needs ``force``. No
symlink is followed: one in the way is an error, or with ``force`` is itself replaced. A
failure or a signal takes everything back: the outputs as they were found, no temporary or
new parent directory left.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path

from build_tools.pep503 import TOOL, stage_simple_index
from build_tools.report import render_markdown
from kpack.common.boundary import os_error_line
from kpack.common.outputs import Publication, publish_all, record_beside, staging
from kpack.errors import PackagingError, UsageError

from .assembly import AssemblyPlan
from .report import REPORT_JSON, REPORT_MD

__all__ = ["DIST", "RECORD", "TOOL", "write_assembly"]

#: The directory of ``--dest-dir`` that holds the distributions (only them, so
#: ``twine upload OUT/dist/*`` works as is), as the builder's.
DIST = "dist"
#: What assemble-shards wrote into ``--dest-dir`` (beside ``dist/``): the outputs a re-run
#: replaces; nothing else there is touched.
RECORD = ".assemble-shards.json"


def write_assembly(
    plan: AssemblyPlan, dest_dir: Path, *, index: Path | None = None, force: bool = False
) -> None:
    """Write ``dest_dir/dist/`` and the merged report beside it (and the PEP 503 index), all
    or nothing. ``force``: replace files in the way that assemble-shards did not write."""
    dest_dir = Path(os.path.abspath(dest_dir))
    index = Path(os.path.abspath(index)) if index is not None else None
    if index is not None:
        _check_index_place(index, dest_dir / DIST)
    reports = _report_files(plan)
    try:
        with ExitStack() as stack:
            out_tmp = stack.enter_context(staging(dest_dir, TOOL))
            publications = [_stage_output(plan, dest_dir, reports, out_tmp)]
            if index is not None:
                index_tmp = stack.enter_context(staging(index.parent, TOOL))
                publications.insert(0, _stage_index(plan, out_tmp / DIST, index, index_tmp))
            publish_all(publications, tool=TOOL, force=force)
    except OSError as exc:
        line = os_error_line(exc)
        raise PackagingError(f"cannot write the output: {line}", path=dest_dir) from exc


def _check_index_place(index: Path, dist: Path) -> None:
    """``--index`` is a directory of its own: not ``OUT/dist``, inside it or around it."""
    index_abs, dist_abs = index.resolve(), dist.resolve()
    if (
        index_abs == dist_abs
        or index_abs.is_relative_to(dist_abs)
        or dist_abs.is_relative_to(index_abs)
    ):
        raise UsageError(f"--index {index} and DEST/dist ({dist}) must be apart")


def _stage_output(
    plan: AssemblyPlan, dest_dir: Path, reports: Mapping[str, str], tmp: Path
) -> Publication:
    """``<tmp>/dist/`` with the planned files and ``<tmp>/report.*``, in a staging dir
    inside ``dest_dir``."""
    (tmp / DIST).mkdir()
    for f in plan.files:
        _link_or_copy(f.path, tmp / DIST / f.name)
    for name, text in reports.items():
        (tmp / name).write_text(text, encoding="utf-8")
    outputs = (*(f"{DIST}/{f.name}" for f in plan.files), *reports)
    return Publication(dest=dest_dir, staged=tmp, outputs=outputs, record=RECORD)


def _stage_index(plan: AssemblyPlan, dist: Path, index: Path, tmp: Path) -> Publication:
    digests = {f.name: f.sha256 for f in plan.files}
    _index, files = stage_simple_index(dist, tmp / index.name, digests=digests)
    outputs = tuple(f"{index.name}/{rel}" for rel in files)
    record = record_beside(index, TOOL)
    return Publication(dest=index.parent, staged=tmp, outputs=outputs, record=record)


def _link_or_copy(source: Path, dest: Path) -> None:
    try:
        os.link(source, dest)
    except OSError:
        shutil.copyfile(source, dest)


def _report_files(plan: AssemblyPlan) -> dict[str, str]:
    """The merged report, by file name (none when the merge was skipped)."""
    if plan.report is None:
        return {}
    return {REPORT_JSON: plan.report.to_json(), REPORT_MD: render_markdown(plan.report)}
