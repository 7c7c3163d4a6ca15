"""Command-line options of the wheel splitter, shared by ``split_python_wheels`` and
``kpack split-wheel`` (no heavy imports here: ``kpack`` builds its parser from this)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import NoReturn

from kpack.databases import handler_names
from kpack.errors import UsageError

__all__ = ["Parser", "add_arguments"]


class Parser(argparse.ArgumentParser):
    """``argparse`` whose errors (an unknown flag, a value of the wrong type or out of its
    choices, a missing argument) are a :class:`UsageError`: one ``error:`` line naming the
    command and the argument, exit status 1, like every other bad input. Subcommand
    parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", type=Path, required=True, metavar="X.whl", help="fat wheel")
    parser.add_argument("--output-dir", type=Path, required=True, metavar="DIR")
    parser.add_argument(
        "--wheel-type", metavar="TYPE", help="preset from manifests/wheel_types.yaml (torch-fat)"
    )
    parser.add_argument("--overlay-root", metavar="DIR/", help="directory to split, e.g. torch/")
    parser.add_argument(
        "--device-package-prefix", metavar="PREFIX", help="device wheels: PREFIX-<bundle key>"
    )
    parser.add_argument(
        "--databases",
        nargs="*",
        metavar="HANDLER",
        choices=handler_names(),
        help="database handlers (default: the wheel type's, else all): "
        + ", ".join(handler_names()),
    )
    parser.add_argument("--compression", choices=("none", "zstd"), default="zstd")
    parser.add_argument("--compression-level", type=int, default=3, metavar="N", help="zstd 1-22")
    parser.add_argument("-j", "--jobs", type=int, default=1, metavar="N", help="worker processes")
    parser.add_argument(
        "--generate-variant-wheel",
        action="store_true",
        help="also write variant wheels (LABEL and null) and the variants.json index",
    )
    parser.add_argument("--variant-label", default="rocm", metavar="LABEL", help="(rocm)")
    parser.add_argument(
        "--variant-schema", choices=("0.1.1", "0.2.0"), default="0.1.1",
        help="variant.json schema: 0.1.1 (PEP 825) or 0.2.0 (variantlib 0.2.2)",
    )  # fmt: skip
    parser.add_argument(
        "--max-expansion-ratio", type=float, default=1000.0, metavar="R",
        help="refuse a wheel member (over 1 MiB unpacked) that expands more than R:1 (1000)",
    )  # fmt: skip
    parser.add_argument(
        "--max-unpacked-size", type=_size, default=64 << 30, metavar="SIZE",
        help="refuse a wheel whose members unpack to more than SIZE bytes (64G; K/M/G/T suffixes)",
    )  # fmt: skip
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="log progress (-vv: debug)"
    )


def _size(text: str) -> int:
    """``123``, ``64G``, ``1.5T`` -> bytes (powers of 1024)."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    value = text.strip().upper().removesuffix("B")
    scale = units.get(value[-1:], 1)
    if value[-1:] in units:
        value = value[:-1]
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}") from None
    if not 0 < number * scale < 1 << 63:  # refuses nan and inf too
        raise argparse.ArgumentTypeError(f"size must be positive and below 8E: {text!r}")
    return int(number * scale)
