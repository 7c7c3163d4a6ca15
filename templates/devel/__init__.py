"""rocm-sdk-devel: headers, CMake files and tools of the ROCm SDK.

The tree ships as ``_devel.tar`` (or ``_devel.tar.xz``) in this package and is
expanded into the sibling ``_rocm_sdk_devel<nonce>`` on first use: run
``rocm-sdk init`` or ``rocm-sdk path --root``.
"""

from __future__ import annotations

from ._dist_info import __version__

__all__ = ["__version__"]
