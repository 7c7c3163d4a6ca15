"""ROCm SDK for Python: locate and load the ROCm libraries of the installed packages.

The ``rocm`` distribution depends on ``rocm-sdk-core`` and offers extras for the
other packages (``rocm[libraries,devel,profiler]``). Run ``rocm-sdk --help`` for
the command line and ``rocm-sdk test`` for the installation self-tests.
"""

from __future__ import annotations

from ._dist_info import __version__
from ._library import find_libraries, initialize_process
from ._library import preload_libraries as preload_libraries  # public, not in __all__

__all__ = ["__version__", "find_libraries", "initialize_process"]
