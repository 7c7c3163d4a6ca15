"""The builder's list on stdout: the packages it wrote, fitted to 80 columns.

One row per package, named by its project (under its family's directory in a multi-family
legacy ``dist/``), the version and wheel tag all share stated once in the title
(:mod:`kpack.common.dist_table`), with its file count, its size and, given
``--max-wheel-size``, its share of that budget (a wheel's; ``-`` for the sdist). With
``--no-build-packages``: the staged package trees and their file counts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import PurePosixPath
from typing import TypeVar

from kpack.common.budget import budget_column, percent_of
from kpack.common.cli import format_size
from kpack.common.dist_table import Listed, dist_table
from kpack.common.tables import Table
from kpack.targets import target_order

from .build import Built
from .plan import DistKind, PlannedPackage

__all__ = ["built_table", "in_target_order", "staged_table"]

T = TypeVar("T")


def built_table(built: Sequence[Built], budget: int | None) -> Table:
    """The packages written into ``dist/``, in plan order with the device wheels in their
    targets' natural order (gfx803 before gfx1030); ``budget``: ``--max-wheel-size``."""
    files = [
        Listed(
            path=PurePosixPath(b.path.as_posix()).relative_to("dist").as_posix(),
            cells=(
                str(b.package.file_count),
                format_size(b.size),
                *([] if budget is None else [percent_of(b.path.name, b.size, budget)]),
            ),
        )
        for b in in_target_order(built, lambda b: b.package)
    ]
    header = ("files", "size", *([] if budget is None else [budget_column(budget)]))
    return dist_table(
        title="Packages written", files=files, header=header, numeric=frozenset({0, 1, 2})
    )


def in_target_order(items: Sequence[T], package: Callable[[T], PlannedPackage]) -> list[T]:
    """``items`` with those of device wheels, in the places they hold, sorted by target
    (``package``: an item's package)."""
    devices = iter(
        sorted(
            (i for i in items if package(i).kind is DistKind.DEVICE),
            key=lambda i: target_order(package(i).family or ""),
        )
    )
    return [next(devices) if package(i).kind is DistKind.DEVICE else i for i in items]


def staged_table(built: Sequence[Built]) -> Table:
    """``--no-build-packages``: the package trees staged in ``--dest-dir``."""
    rows = tuple((b.path.as_posix(), str(b.package.file_count)) for b in built)
    header = ("directory", "files")
    return Table(title="Package trees staged", header=header, rows=rows, numeric=frozenset({1}))
