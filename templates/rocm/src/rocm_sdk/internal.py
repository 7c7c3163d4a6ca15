"""What the other ROCm packages' own code calls in ``rocm_sdk``: the console-script
trampolines of ``rocm_sdk_core`` (the expanded devel tree, its device links reconciled) and
``rocm_profiler`` (its dist-info and RECORD, to record the library aliases it creates).

An interface between the packages of one release (``rocm`` requires the others at its own
version), not part of the ``rocm_sdk`` API (``find_libraries``, ``initialize_process``, as
TheRock's): those packages import this module, never ``rocm_sdk``'s private ones.
"""

from __future__ import annotations

from ._devel import get_devel_root
from ._layout import find_dist_info
from ._record import locked_record, read_record_paths

__all__ = ["find_dist_info", "get_devel_root", "locked_record", "read_record_paths"]
