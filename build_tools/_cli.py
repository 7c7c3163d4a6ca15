"""The builder's command-line tools share the one error boundary of :mod:`kpack.common.boundary`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kpack.common.boundary import guarded

__all__ = ["guarded_main"]


def guarded_main(run: Callable[[Sequence[str] | None], int], argv: Sequence[str] | None) -> int:
    """Run a CLI; errors, machine failures and signals as :func:`kpack.common.boundary.guarded`."""
    return guarded(run, argv)
