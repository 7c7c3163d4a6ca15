"""``split_python_wheels``: rocm-kpack's wheel splitter, served by :mod:`kpack.wheelsplit`
(TheRock's PyTorch workflows run ``python -m rocm_kpack.tools.split_python_wheels``)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

if __package__ in (None, ""):  # run as a file: make the package importable by name
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import rocm_kpack  # noqa: F401  (puts kpack on the path in a checkout)

from kpack.wheelsplit import main as wheelsplit_main

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    return wheelsplit_main(argv, prog="python -m rocm_kpack.tools.split_python_wheels")


if __name__ == "__main__":
    sys.exit(main())
