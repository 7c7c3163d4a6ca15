"""rocm-profiler: the ROCm profiling tools (rocprofiler-systems, rocprofiler-compute).

The files live in the sibling platform package ``_rocm_profiler<nonce>``; the
console scripts run them.
"""

from __future__ import annotations

from ._dist_info import __version__

__all__ = ["__version__"]
