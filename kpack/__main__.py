"""``python -m kpack``: the ``kpack`` command line."""

from __future__ import annotations

import sys

from kpack.cli import main

if __name__ == "__main__":
    sys.exit(main())
