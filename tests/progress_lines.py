"""A CI log's progress lines (kpack.common.progress: ``[   1.2s] ...``), which precede the
one error line of a run that fails: what tests of that line look past."""

from __future__ import annotations

import re

__all__ = ["PROGRESS", "without_progress"]

PROGRESS = re.compile(r"^\[ *\d+\.\ds\] ")


def without_progress(err: str) -> list[str]:
    """The lines of ``err`` that are not progress lines."""
    return [line for line in err.splitlines() if not PROGRESS.match(line)]
