"""Command-line options of ``kpack finalize-wheel`` and of ``split-wheel --finalize`` (no
heavy imports here: ``kpack`` builds its parser from this)."""

from __future__ import annotations

import argparse
from pathlib import Path

from kpack.common.cli import add_list_argument, parse_size

__all__ = ["add_arguments", "add_budget_argument", "add_set_arguments"]


def add_set_arguments(parser: argparse.ArgumentParser, *, required: bool) -> None:
    """``--rocm-version``, ``--rocm-set`` and ``--expected-gpu-target``."""
    parser.add_argument(
        "--rocm-version",
        required=required,
        metavar="V",
        help="the version of the rocm-sdk set the wheel joins (7.10.0, 7.10.0rc1, "
        "7.10.0a20251124, 7.10.0.dev0+abc): the wheel's version gets +rocmV (+devrocmV for a "
        "dev build) and it requires rocm-sdk-core == V",
    )
    parser.add_argument(
        "--rocm-set",
        type=Path,
        required=required,
        metavar="DIR",
        help="the set's wheels (the builder's output dir, or a --find-links dir): where each "
        "ROCm library installs is read from them",
    )
    add_list_argument(
        parser,
        "--expected-gpu-target",
        default=[],
        metavar="T",
        spaces=False,
        help="GPU targets the wheel's device code must serve, exactly (gfx942, "
        "gfx90a:xnack-, gfx11-generic): code for any other target, or none for one of these, "
        "is an error",
    )


def add_budget_argument(parser: argparse.ArgumentParser) -> None:
    """``--max-wheel-size SIZE``: the budget of every wheel written."""
    parser.add_argument(
        "--max-wheel-size",
        type=parse_size,
        metavar="SIZE",
        help="fail, before publishing anything, if a wheel is larger than SIZE (500MB = "
        "500*10^6 bytes; 1.5GB; 2GiB)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Every option of ``kpack finalize-wheel``."""
    parser.add_argument("wheels", nargs="*", type=Path, metavar="WHEEL", help="wheels to finalize")
    parser.add_argument(
        "--input-dir",
        type=Path,
        metavar="DIR",
        help="finalize every *.whl in DIR too (TheRock's finalize scripts take their wheels so)",
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        required=True,
        metavar="DIR",
        help="where the finalized wheels go; a re-run replaces what an earlier run wrote there",
    )
    add_set_arguments(parser, required=True)
    add_budget_argument(parser)
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace files in --output-dir that kpack finalize-wheel did not write",
    )
