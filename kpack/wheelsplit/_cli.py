"""Command-line options of the wheel splitter, shared by ``split_python_wheels`` and
``kpack split-wheel`` (no heavy imports here: ``kpack`` builds its parser from this)."""

from __future__ import annotations

import argparse
from pathlib import Path

from kpack.archive import DEFAULT_LEVEL
from kpack.common.cli import (
    Parser,
    add_jobs,
    add_list_argument,
    add_verbosity,
    add_version,
    parse_size,
)
from kpack.databases import lazy_handler_names
from kpack.finalize import add_budget_argument, add_set_arguments

#: ``Parser``: one ``error:`` line and exit status 2 for a usage error (kpack.common.cli).
__all__ = ["Parser", "add_arguments"]


def add_arguments(
    parser: argparse.ArgumentParser, *, subcommand: bool = False, shards: bool = False
) -> None:
    """Every option of rocm-kpack's ``split_python_wheels``, spelled as there, and ours
    (``-V``/``--version``, ``-q``/``-v`` as every tool has them; ``subcommand``: those of
    ``kpack split-wheel``, where ``kpack -q`` may have set them before it). ``shards``:
    also ``--targets`` and ``--print-shards`` (``kpack split-wheel``'s own; rocm-kpack's
    command line has no such flags)."""
    add_version(parser)
    _add_io(parser, output_required=not shards)
    if shards:
        _add_shards(parser)
    _add_split(parser)
    _add_variants(parser)
    _add_limits(parser)
    add_budget_argument(parser)
    _add_finalize(parser)
    add_verbosity(parser, subcommand=subcommand)
    parser.add_argument(
        "--clang-offload-bundler",
        type=Path,
        metavar="PATH",
        help="accepted for rocm-kpack's command line and ignored: bundles are read in-process",
    )


def _add_io(parser: argparse.ArgumentParser, *, output_required: bool) -> None:
    parser.add_argument(
        "--input",
        type=Path,
        required=True,
        metavar="X.whl|DIR",
        help="the fat wheel, or an unpacked wheel directory (read, never written)",
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        required=output_required,
        metavar="DIR",
        help="where the split wheels go; a re-run replaces what an earlier split of the same "
        "input wrote there and leaves every other file alone"
        + ("" if output_required else " (required unless --print-shards)"),
    )
    parser.add_argument(
        "--output-format",
        choices=("wheel", "directory"),
        default="wheel",
        help="wheel: .whl files (default); directory: each wheel unpacked, named as the wheel "
        "without .whl",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace files in --output-dir that an earlier split of this input did not write",
    )
    parser.add_argument(
        "--report-dir",
        type=Path,
        metavar="DIR",
        help="where <name>-<version>-split-report.json and .md go "
        "(default: <output-dir>-split-reports beside --output-dir)",
    )
    parser.add_argument(
        "--tmp-dir",
        type=Path,
        metavar="DIR",
        help="where the unpacked input and the spools go (default: beside --output-dir)",
    )


def _add_shards(parser: argparse.ArgumentParser) -> None:
    add_list_argument(
        parser,
        "--targets",
        metavar="TARGET",
        help="a shard of the split: write the host wheel and only these targets' device "
        "wheels (named as the device wheels are: gfx942, gfx9-4-generic; gfx90a:xnack+ is "
        "gfx90a's); kpack assemble-wheel-shards merges the shards",
    )
    parser.add_argument(
        "--print-shards",
        type=int,
        metavar="N",
        help="print a JSON plan of at most N shards balanced by device bytes (each: the "
        "arguments it adds to --input and --output-dir, the input it reads) and split nothing",
    )


def _add_split(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--wheel-type", metavar="TYPE", help="preset from manifests/wheel_types.yaml (torch-fat)"
    )
    parser.add_argument(
        "--overlay-root",
        metavar="DIR/",
        help="split only fat binaries under DIR (torch/; archives in DIR.kpack/); default, "
        "or '.': every fat binary in the wheel, archives in .kpack/ of each one's top-level "
        "directory. A fat binary left unsplit is an error unless --keep-fat names it",
    )
    parser.add_argument(
        "--keep-fat",
        action="append",
        default=[],
        metavar="GLOB",
        help="ship fat binaries matching GLOB (their path in the wheel or installed, fnmatch) "
        "fat and unsplit, on purpose (repeatable)",
    )
    parser.add_argument(
        "--device-package-prefix", metavar="PREFIX", help="device wheels: PREFIX-<bundle key>"
    )
    parser.add_argument(
        "--device-requires-dist",
        action="extend",
        nargs="*",
        default=[],
        metavar="REQ",
        help="a Requires-Dist of every device wheel (repeatable), a PEP 508 requirement; "
        "@GFXARCH@ becomes the wheel's target (rocm-sdk-device-@GFXARCH@ == 7.1), and such "
        "a line goes only to wheels of one real target (not generic, family or sub-family)",
    )
    parser.add_argument(
        "--databases",
        nargs="*",
        metavar="HANDLER",
        choices=lazy_handler_names(),  # the manifest is read if the option is given
        help="database handlers (default: the wheel type's, else all): %(choices)s",
    )
    parser.add_argument(
        "--compression",
        choices=("none", "zstd"),
        default="zstd",
        help="compression of the .kpack archives (zstd)",
    )
    parser.add_argument(
        "--compression-level",
        type=int,
        default=DEFAULT_LEVEL,
        metavar="N",
        help=f"zstd level 1-22 ({DEFAULT_LEVEL}; rocm-kpack: 3)",
    )
    add_jobs(parser, "worker processes")


def _add_variants(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--generate-variant-wheel",
        action="store_true",
        help="also write variant wheels (LABEL and null) and the variants.json index",
    )
    parser.add_argument(
        "--variant-label",
        default="variant",
        metavar="LABEL",
        help="label of the variant wheel, ...-LABEL.whl (variant, as rocm-kpack)",
    )
    parser.add_argument(
        "--variant-schema",
        choices=("0.1.1", "0.2.0"),
        default="0.1.1",
        help="variant.json schema: 0.1.1 (PEP 825) or 0.2.0 (variantlib 0.2.2)",
    )


def _add_finalize(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--finalize",
        action="store_true",
        help="first make the wheel a member of the rocm-sdk set (as kpack finalize-wheel): "
        "the host and device wheels then carry its version and pins",
    )
    add_set_arguments(parser, required=False)


def _add_limits(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-expansion-ratio",
        type=float,
        default=1000.0,
        metavar="R",
        help="refuse a wheel member (over 1 MiB unpacked) that expands more than R:1 (1000)",
    )
    parser.add_argument(
        "--max-unpacked-size",
        type=parse_size,
        default=64 * 10**9,
        metavar="SIZE",
        help="refuse a wheel whose members unpack to more than SIZE (64GB = 64*10^9 bytes; "
        "500MB; 64GiB)",
    )
