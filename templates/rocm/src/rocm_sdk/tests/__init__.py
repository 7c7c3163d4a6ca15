"""Self-tests of an installed ROCm package set, run by ``rocm-sdk test``.

Each module tests one package; tests of packages that are not installed are
skipped with the reason.
"""

from __future__ import annotations

import unittest

MODULES = (
    "base_test",
    "core_test",
    "libraries_test",
    "kpack_test",
    "gpu_test",
    "devel_test",
    "profiler_test",
)


def run_all(verbosity: int = 3) -> int:
    """Run every self-test module; 0 if all passed, else 1."""
    names = [f"{__name__}.{module}" for module in MODULES]
    suite = unittest.defaultTestLoader.loadTestsFromNames(names)
    result = unittest.TextTestRunner(verbosity=verbosity).run(suite)
    return 0 if result.wasSuccessful() else 1
