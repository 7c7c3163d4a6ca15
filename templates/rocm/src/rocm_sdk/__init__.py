"""ROCm SDK for Python: locate and load the ROCm libraries of the installed packages.

The ``rocm`` distribution depends on ``rocm-sdk-core`` and offers extras for the
other packages (``rocm[libraries,devel,profiler]``). Run ``rocm-sdk --help`` for
the command line and ``rocm-sdk test`` for the installation self-tests.

``devel_status()`` says whether the devel tree (``rocm[devel]``) is expanded and complete
without expanding it (a :class:`DevelStatus`: ``.ok``, ``.state``, ``.root``, ``.fix``);
``is_devel_expanded()`` is its yes or no. ``rocm-sdk init --check`` prints the same answer.
"""

from __future__ import annotations

from ._devel_status import DevelStatus, devel_status, is_devel_expanded
from ._dist_info import __version__
from ._library import find_libraries, initialize_process
from ._library import preload_libraries as preload_libraries  # public, not in __all__

__all__ = [
    "DevelStatus",
    "__version__",
    "devel_status",
    "find_libraries",
    "initialize_process",
    "is_devel_expanded",
]
