"""rocm-kpack's ``database_handlers`` names over :mod:`kpack.databases` (the handlers are
declared in kpack's ``databases.yaml``)."""

from __future__ import annotations

from collections.abc import Sequence

from kpack.databases import Handler, handler_names, load_handlers

__all__ = ["Handler", "get_database_handlers", "list_available_handlers"]


def list_available_handlers() -> list[str]:
    """Names ``--split-databases`` accepts (``rocblas``, ``hipblaslt``, ...)."""
    return list(handler_names())


def get_database_handlers(names: Sequence[str]) -> list[Handler]:
    """The named handlers; an unknown name is a :class:`kpack.errors.UsageError`."""
    return list(load_handlers(names))
