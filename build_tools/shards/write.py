"""The planned assembly written all or nothing, under the project's output-directory rule.

:func:`write_assembly` stages the planned files (hard links where it can) and the merged
report in a temporary directory beside ``--output``, the PEP 503 index (when asked) in one
beside ``--index``, then publishes both in one step (:func:`kpack.common.outputs.publish_all`):
what an earlier run wrote there (listed in a record beside each directory,
``.assemble-shards.<name>.json``) is replaced, every other file is left alone, and a file in
the way that assemble-shards did not write (or that changed since) needs ``force``. No
symlink is followed: one in the way is an error, or with ``force`` is itself replaced. A
failure or a signal takes everything back: the outputs as they were found, no temporary or
new parent directory left.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from contextlib import ExitStack
from pathlib import Path

from build_tools.pep503 import TOOL, stage_simple_index
from build_tools.report import render_markdown
from kpack.common.boundary import os_error_line
from kpack.common.outputs import Publication, publish_all, record_beside, staging
from kpack.errors import PackagingError, UsageError

from .assembly import AssemblyPlan
from .report import REPORT_JSON, REPORT_MD

__all__ = ["TOOL", "write_assembly"]


def write_assembly(
    plan: AssemblyPlan, output: Path, *, index: Path | None = None, force: bool = False
) -> None:
    """Write the merged dist (and the PEP 503 index), all or nothing.

    The merged report goes next to the output dist (never inside it: dist/ holds
    distributions only, so ``twine upload dist/*`` works as is). ``force``: replace files
    in the way that assemble-shards did not write."""
    output = Path(os.path.abspath(output))
    index = Path(os.path.abspath(index)) if index is not None else None
    if index is not None:
        out_abs, index_abs = output.resolve(), index.resolve()
        if index_abs == out_abs or out_abs in index_abs.parents or index_abs in out_abs.parents:
            raise UsageError("--index and --output must be separate directories", path=index)
    reports = _report_files(plan)
    _check_report_places(output.parent, reports)
    try:
        with ExitStack() as stack:
            out_tmp = stack.enter_context(staging(output.parent, TOOL))
            publications = [_stage_output(plan, output, reports, out_tmp)]
            if index is not None:
                index_tmp = stack.enter_context(staging(index.parent, TOOL))
                dist = out_tmp / output.name
                publications.insert(0, _stage_index(plan, dist, index, index_tmp))
            publish_all(publications, tool=TOOL, force=force)
    except OSError as exc:
        line = os_error_line(exc)
        raise PackagingError(f"cannot write the output: {line}", path=output) from exc


def _stage_output(
    plan: AssemblyPlan, output: Path, reports: Mapping[str, str], tmp: Path
) -> Publication:
    """``<tmp>/<output name>/`` with the planned files and ``<tmp>/report.*``, in a
    staging dir in ``output``'s parent."""
    (tmp / output.name).mkdir()
    for f in plan.files:
        _link_or_copy(f.path, tmp / output.name / f.name)
    for name, text in reports.items():
        (tmp / name).write_text(text, encoding="utf-8")
    outputs = (*(f"{output.name}/{f.name}" for f in plan.files), *reports)
    record = record_beside(output, TOOL)
    return Publication(dest=output.parent, staged=tmp, outputs=outputs, record=record)


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


def _check_report_places(parent: Path, names: Iterable[str]) -> None:
    for name in names:
        place = parent / name
        if place.is_dir() and not place.is_symlink():
            raise UsageError("is a directory, where the merged report goes", path=place)
