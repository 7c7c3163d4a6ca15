"""``python -m kpack``: the ``kpack`` command."""

from __future__ import annotations

import sys

from kpack.cli import main

sys.exit(main())
