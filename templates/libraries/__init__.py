"""rocm-sdk-libraries: the ROCm math and communication libraries.

The files live in the sibling platform package; use
``rocm_sdk.find_libraries()`` to locate them.
"""

from __future__ import annotations

from ._dist_info import __version__

__all__ = ["__version__"]
