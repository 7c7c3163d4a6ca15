"""``rocm_kpack`` as TheRock imports it: from ``<repo>/python`` (``PYTHONPATH=<kpack>/python``),
whether or not the project is installed."""

from __future__ import annotations

import sys
from pathlib import Path

PYTHON_DIR = str(Path(__file__).resolve().parents[2] / "python")
if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)
