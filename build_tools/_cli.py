"""The one error boundary of the builder's command-line tools."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from kpack.errors import RocmPackagingError

__all__ = ["guarded_main"]


def guarded_main(run: Callable[[Sequence[str] | None], int], argv: Sequence[str] | None) -> int:
    """Run a CLI; a deliberate error becomes one ``error: ...`` line and exit status 1."""
    try:
        return run(argv)
    except RocmPackagingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
