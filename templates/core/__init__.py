"""rocm-sdk-core: the ROCm runtime, compilers and tools.

The files live in the sibling platform package ``_rocm_sdk_core<nonce>``; use
``rocm_sdk.find_libraries()`` to locate libraries and the console scripts to
run the tools.
"""

from __future__ import annotations

from ._dist_info import __version__

__all__ = ["__version__"]
