"""Put this directory first on ``PYTHONPATH`` and the top-level modules named in
``KPACK_TEST_BLOCKED_MODULES`` (comma-separated) fail to import, as if not installed, in the
process and in every Python process it starts (pools, subprocesses): a venv without the
optional accelerators (``deflate``, ``isal``, ``rich``), as TheRock's build venv is, made
from the project's own."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

BLOCKED = frozenset(filter(None, os.environ.get("KPACK_TEST_BLOCKED_MODULES", "").split(",")))


class _Blocker:
    @staticmethod
    def find_spec(
        name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


if BLOCKED:
    sys.meta_path.insert(0, _Blocker())
