"""``kpack``: inspect, extract, split, verify and resolve HIP device code.

Thin layer: argparse, logging setup and printing; the conventions every tool shares
(``-V``, ``-q``/``-v``, list flags) come from :mod:`kpack.common.cli`. The work lives in
:mod:`kpack.split`, :mod:`kpack.resolve`, :mod:`kpack.bundle`, :mod:`kpack.archive` and
:mod:`kpack.transform`. Any :class:`~kpack.errors.RocmPackagingError` becomes one
``error: ...`` line on stderr and exit status 1 (2 for a usage error).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from kpack.common.boundary import guarded
from kpack.common.cli import (
    Parser,
    add_jobs,
    add_list_argument,
    add_verbosity,
    add_version,
    configure_logging,
    verbosity_conflict,
)

__all__ = ["add_split_artifacts_arguments", "main"]

log = logging.getLogger(__name__)

#: ``kpack --help``'s description: plain text (the module docstring is reST).
DESCRIPTION = "kpack: inspect, extract, split, verify and resolve HIP device code."


def _command(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    """The command ``name`` of ``kpack.cli.<module>``, imported when it runs: each command
    pays at start-up for its own modules only (``split-wheel`` none of ``inspect``'s)."""

    def run(args: argparse.Namespace) -> int:
        command = getattr(importlib.import_module(f"kpack.cli.{module}"), name)
        return int(command(args))

    run.__name__ = run.__qualname__ = name
    return run


cmd_inspect = _command("_inspect", "cmd_inspect")
cmd_extract = _command("_inspect", "cmd_extract")
cmd_split = _command("_split", "cmd_split")
cmd_verify = _command("_split", "cmd_verify")
cmd_resolve = _command("_split", "cmd_resolve")


def cmd_finalize(args: argparse.Namespace) -> int:
    """``kpack finalize-wheel`` (:func:`kpack.finalize.run`), imported when it runs."""
    from kpack.finalize import run

    return run(args)


def cmd_split_wheel(args: argparse.Namespace) -> int:
    """``kpack split-wheel`` (:func:`kpack.wheelsplit.run`), imported when it runs."""
    from kpack.wheelsplit import run

    return run(args)


def cmd_assemble(args: argparse.Namespace) -> int:
    """``kpack assemble-wheel-shards`` (:func:`kpack.wheelsplit.run_assemble`)."""
    from kpack.wheelsplit import run_assemble

    return run_assemble(args)


def _parser(command: str | None = None) -> argparse.ArgumentParser:
    """``kpack``'s parser. Every subcommand is listed (``kpack --help``); given a
    ``command`` (``""``: none), only that one's options are added: a subcommand's options
    import the modules that declare them (the split's compression levels, the database
    handlers' names, the finalizer's flags), which the other commands' runs should not pay
    for."""
    common = Parser(add_help=False)
    add_version(common)
    add_verbosity(common, subcommand=True)
    parser = Parser(prog="kpack", description=DESCRIPTION)
    add_version(parser)
    add_verbosity(parser)  # before the subcommand or after it (its copy leaves these alone)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text, own_conventions, add_options in _SUBCOMMANDS:
        p = sub.add_parser(name, parents=[] if own_conventions else [common], help=help_text)
        if command is None or command == name:
            add_options(p)
    return parser


def _subcommand(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names: its first word that is not an option (``kpack``'s own
    options take no value)."""
    return next((a for a in argv if not a.startswith("-")), None)


def _add_inspect(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, help="an ELF or PE binary, an offload bundle or a .kpack")
    p.set_defaults(func=cmd_inspect)


def _add_extract(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, help="an ELF or PE binary, an offload bundle or a .kpack")
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        required=True,
        help="output directory; a re-run replaces what kpack extract wrote there before and "
        "leaves other files alone",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace files in the output directory that kpack extract did not write",
    )
    p.add_argument(
        "--target", help="only this target id (a bare gfxNNN also selects its feature variants)"
    )
    p.set_defaults(func=cmd_extract)


def _add_verify(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "binary",
        type=Path,
        help="a transformed host binary (ELF or PE); a directory or a wheel: check that "
        "every ELF executable in it keeps its program headers where old kernels find them",
    )
    p.add_argument(
        "--archive",
        type=Path,
        action="append",
        metavar="A",
        help="archive to check against (repeatable; default: from the marker)",
    )
    p.add_argument(
        "--search-root",
        type=Path,
        metavar="DIR",
        help="find the marker's archives anywhere below DIR",
    )
    p.set_defaults(func=cmd_verify)


def _add_resolve(p: argparse.ArgumentParser) -> None:
    p.add_argument("binary", type=Path, help="a transformed host binary (ELF or PE)")
    add_list_argument(
        p,
        "--arch",
        required=True,
        metavar="ISA",
        spaces=False,
        help="agent ISAs, e.g. gfx942:sramecc+:xnack-; each one's LLVM generic target "
        "(gfx9-4-generic:sramecc+:xnack-) is tried next, as the runtime does",
    )
    p.add_argument(
        "--no-generic",
        action="store_true",
        help="look the ISA up alone, without its generic target",
    )
    p.set_defaults(func=cmd_resolve)


def _add_finalize(p: argparse.ArgumentParser) -> None:
    from kpack.finalize import add_arguments

    add_arguments(p)
    p.set_defaults(func=cmd_finalize)


def _add_split_wheel(p: argparse.ArgumentParser) -> None:
    from kpack.wheelsplit import add_arguments

    add_arguments(p, subcommand=True, shards=True)
    p.set_defaults(func=cmd_split_wheel)


def _add_assemble(p: argparse.ArgumentParser) -> None:
    from kpack.wheelsplit import add_assemble_arguments

    add_assemble_arguments(p)
    p.set_defaults(func=cmd_assemble)


def add_split_artifacts_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``kpack split-artifacts`` (rocm-kpack's ``split_artifacts`` command
    line, which ``rocm_kpack.tools.split_artifacts`` parses with them), and the command
    itself as ``func``."""
    from kpack.archive import DEFAULT_LEVEL
    from kpack.databases import handler_names

    p.set_defaults(func=cmd_split)
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--artifact-dir",
        type=Path,
        help="one artifact directory, or one of TheRock's artifact archives (.tar.zst, .tar.xz, "
        ".tar), read in one pass without extracting",
    )
    source.add_argument(
        "--batch-artifact-parent-dir",
        type=Path,
        help="split every artifact below DIR, directory or archive (except *_generic)",
    )
    p.add_argument(
        "--output-dir",
        type=Path,
        required=True,
        help="where P_generic and each P_<target> artifact dir go",
    )
    p.add_argument("--artifact-prefix", help="P = {name}_{component} (default: from the dir name)")
    add_list_argument(
        p,
        "--split-databases",
        metavar="HANDLER",
        choices=handler_names(),
        help="database handlers: " + ", ".join(handler_names()),
    )
    add_list_argument(
        p,
        "--gpu-targets",
        metavar="TARGET",
        help="only produce per-arch outputs for these targets' base arches",
    )
    p.add_argument(
        "--compression",
        choices=("none", "zstd"),
        default="zstd",
        help="how kernels are stored in the .kpack archives (zstd)",
    )
    level_help = f"zstd level 1-22 ({DEFAULT_LEVEL}; rocm-kpack: 3)"
    p.add_argument("--compression-level", type=int, metavar="N", help=level_help)
    add_jobs(p, "worker processes")
    p.add_argument("--force", action="store_true", help="replace existing output dirs")
    tmp_help = "where temporary files go (rocm-kpack's option; default: TMPDIR)"
    p.add_argument("--tmp-dir", type=Path, metavar="DIR", help=tmp_help)
    bundler_help = "accepted for rocm-kpack's command line and ignored: bundles are read in-process"
    p.add_argument("--clang-offload-bundler", type=Path, metavar="PATH", help=bundler_help)


_AddOptions = Callable[[argparse.ArgumentParser], None]
#: Each subcommand: name, help, whether it adds -V/-q/-v itself, the function adding its
#: options (and ``func``, the command).
_SUBCOMMANDS: tuple[tuple[str, str, bool, _AddOptions], ...] = (
    ("inspect", "describe a fat binary, bundle or .kpack", False, _add_inspect),
    ("extract", "write code objects as files", False, _add_extract),
    (
        "split-artifacts",
        "split fat artifacts into P_generic and per-target P_<target>",
        False,
        add_split_artifacts_arguments,
    ),
    ("verify", "check a transformed binary against its archives", False, _add_verify),
    ("resolve", "print what the runtime would load for an agent ISA", False, _add_resolve),
    (
        "finalize-wheel",
        "make a wheel built against ROCm a member of the rocm-sdk set of a version",
        False,
        _add_finalize,
    ),
    (
        "split-wheel",
        "split a fat Python wheel into a host wheel and device wheels",
        True,
        _add_split_wheel,
    ),
    (
        "assemble-wheel-shards",
        "merge the shards of a wheel split (split-wheel --targets) into the whole split",
        True,
        _add_assemble,
    ),
)


def _run(argv: Sequence[str] | None) -> int:
    parser = _parser(_subcommand(sys.argv[1:] if argv is None else argv) or "")
    args = parser.parse_args(argv)
    conflict = verbosity_conflict(args)
    if conflict is not None:
        parser.error(conflict)
    configure_logging(args, fmt="%(levelname)s %(name)s: %(message)s")
    return int(args.func(args))


def main(argv: Sequence[str] | None = None) -> int:
    return guarded(_run, argv, one_line=True)


if __name__ == "__main__":
    sys.exit(main())
