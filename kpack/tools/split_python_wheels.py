"""``python -m kpack.tools.split_python_wheels``: the documented entry of the wheel splitter
(:mod:`kpack.wheelsplit`)."""

from __future__ import annotations

import sys

from kpack.wheelsplit import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
