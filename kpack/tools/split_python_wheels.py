"""``python -m kpack.tools.split_python_wheels``: the documented entry of the wheel splitter
(:mod:`kpack.wheelsplit`). It takes rocm-kpack's ``split_python_wheels`` command line as
TheRock's PyTorch workflows write it; ``rocm_kpack.tools.split_python_wheels`` calls the same
:func:`main`, with its own ``prog``."""

from __future__ import annotations

import sys

from kpack.wheelsplit import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
