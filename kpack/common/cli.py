"""The conventions every command-line tool shares (``kpack``, ``build-python-packages``,
``assemble-shards``): its version, ``-q``/``-v``, list flags, sizes and the output line.

- ``-V`` prints the project's version (``--version`` too, where that name is free; the
  builder and the assembler keep ``--version V`` for the package version TheRock passes,
  and print the tool's version for a bare ``--version`` given alone).
- ``-q`` prints errors and the output line only; ``-v`` logs progress, ``-vv`` debug;
  ``-q``/``-v``/``-V`` are taken before a subcommand and after it (``kpack -q inspect F``).
- ``-j`` defaults to the CPU count (the CPUs this process may run on) in every tool.
- List flags take comma-separated values, the spelling TheRock's own call sites and help
  use (``--linux-amdgpu-families=gfx94X-dcgpu,gfx110X-all``); ``;`` (TheRock's workflow
  values), space-separated values (TheRock's CMake expands lists that way) and repeating
  the flag are accepted too.
- Sizes are decimal (kB, MB, GB: powers of 1000), as the reports and the live display show;
  :func:`parse_size` reads a size flag the same way (``500MB`` = 500·10⁶; ``GiB`` is binary).
- stdout holds one list (a table drawn by :mod:`kpack.common.tables`, fitted to the width)
  and, last, the absolute output path of a run that writes; progress
  (:mod:`kpack.common.progress`), notes and errors go to stderr.
- A usage error (an unknown flag, a value of the wrong type or out of its choices, a missing
  argument) is one ``error:`` line and exit status 2 (:class:`Parser`, through the boundary
  of :mod:`kpack.common.boundary`), as argparse has it.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from kpack.errors import UsageError

__all__ = [
    "DIST_NAME",
    "Parser",
    "add_jobs",
    "add_list_argument",
    "add_verbosity",
    "add_version",
    "configure_logging",
    "default_jobs",
    "format_over",
    "format_size",
    "output_line",
    "parse_size",
    "split_list",
    "tool_version",
    "verbosity_conflict",
]

#: The distribution that ships every tool.
DIST_NAME = "rocm-python-packaging"

_PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
_VERSION_RE = re.compile(r'^version\s*=\s*"([^"]+)"', re.MULTILINE)
_SEPARATORS = re.compile(r"[,;\s]+")


def tool_version() -> str:
    """The installed project's version; in a checkout that is not installed, the one its
    ``pyproject.toml`` declares (``unknown`` when neither is there)."""
    from importlib import metadata  # only -V asks: importing it costs a tool's start 15 ms

    try:
        return metadata.version(DIST_NAME)
    except metadata.PackageNotFoundError:
        pass
    try:
        found = _VERSION_RE.search(_PYPROJECT.read_text(encoding="utf-8"))
    except OSError:
        found = None
    return found.group(1) if found else "unknown"


class Parser(argparse.ArgumentParser):
    """``argparse`` whose errors (an unknown flag, a value of the wrong type or out of its
    choices, a missing argument) are a :class:`~kpack.errors.UsageError`: one ``error:`` line
    naming the command and the argument, without argparse's usage block; the boundary gives
    it exit status 2. Subcommand parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


class _ShowVersion(argparse.Action):
    """``-V``: print ``PROG VERSION`` and exit 0."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, argparse.SUPPRESS, nargs=0, default=argparse.SUPPRESS)
        self.help = kwargs.get("help")

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        print(f"{parser.prog} {tool_version()}")
        parser.exit()


class _ValueOrVersion(argparse.Action):
    """``--version V`` stores V; a bare ``--version`` given alone prints the tool's version,
    and anywhere else is an error (a package version was forgotten, not asked for)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        self.alone: bool = kwargs.pop("alone")
        super().__init__(option_strings, dest, nargs="?", **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        if values is not None:
            setattr(namespace, self.dest, values)
            return
        if self.alone:
            print(f"{parser.prog} {tool_version()}")
            parser.exit()
        raise argparse.ArgumentError(
            self,
            f"expected a value ({self.metavar or 'V'}); given alone, {option_string} prints "
            "the tool's version",
        )


def add_version(
    parser: argparse.ArgumentParser,
    *,
    value_help: str | None = None,
    argv: Sequence[str] | None = None,
    **value_kwargs: Any,
) -> None:
    """``-V`` (and ``--version``) printing the tool's version. With ``value_help``,
    ``--version`` keeps taking a value (``dest="version"``) and prints the tool's version only
    when it is the whole command line ``argv``."""
    if value_help is None:
        parser.add_argument(
            "-V", "--version", action=_ShowVersion, help="print the tool's version and exit"
        )
        return
    parser.add_argument("-V", action=_ShowVersion, help="print the tool's version and exit")
    parser.add_argument(
        "--version",
        action=_ValueOrVersion,
        alone=list(sys.argv[1:] if argv is None else argv) == ["--version"],
        help=f"{value_help} (a bare --version, alone, prints the tool's version)",
        **value_kwargs,
    )


def add_verbosity(parser: argparse.ArgumentParser, *, subcommand: bool = False) -> None:
    """``-v`` (repeatable) and ``-q``, exclusive of each other. ``subcommand``: a
    subcommand's copy, which leaves what its command's own ``-q``/``-v`` set alone when not
    given (argparse would reset it to the default)."""
    default: dict[str, Any] = {"default": argparse.SUPPRESS} if subcommand else {}
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "-v",
        "--verbose",
        action="count",
        help="log progress (-vv: debug)",
        **(default or {"default": 0}),
    )
    group.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print errors and the output path only (no progress, notices or tables)",
        **default,
    )


def verbosity_conflict(args: argparse.Namespace) -> str | None:
    """The usage error of ``-q`` and ``-v`` given together (one before a subcommand, one
    after it), if they are."""
    if getattr(args, "quiet", False) and getattr(args, "verbose", 0):
        return "-q/--quiet and -v/--verbose exclude each other"
    return None


def default_jobs() -> int:
    """``-j``'s default in every tool: the CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1  # pragma: no cover - not Linux


def add_jobs(parser: argparse.ArgumentParser, what: str) -> None:
    """``-j N``/``--jobs N`` (``what``: worker processes, threads...), default the CPU
    count."""
    parser.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=default_jobs(),
        metavar="N",
        help=f"{what} (default: the CPU count)",
    )


def configure_logging(args: argparse.Namespace, fmt: str = "%(levelname)s: %(message)s") -> None:
    """Logging for ``-q``/``-v``/``-vv`` (``-q``: errors only)."""
    verbose: int = getattr(args, "verbose", 0)
    if getattr(args, "quiet", False):
        level = logging.ERROR
    else:
        level = logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format=fmt)


def split_list(values: Iterable[str] | str | None) -> tuple[str, ...]:
    """The items of a list flag, in order, each once: ``a,b``, ``a;b``, ``a b``, and the
    flag repeated all give ``(a, b)``; empty or blank values give nothing."""
    if values is None:
        return ()
    if isinstance(values, str):
        values = [values]
    items = (p for v in values for p in _SEPARATORS.split(v))
    return tuple(dict.fromkeys(p for p in items if p))


class _ListAction(argparse.Action):
    """Items of a list flag added to those before it (see :func:`split_list`), each
    checked against ``choices`` when there are any."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        self.allowed: tuple[str, ...] | None = kwargs.pop("allowed", None)
        kwargs.setdefault("nargs", "+")
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        items = split_list(values if isinstance(values, list) else [str(values)])
        if self.allowed is not None:
            bad = [i for i in items if i not in self.allowed]
            if bad:
                raise argparse.ArgumentError(
                    self,
                    f"invalid choice: {', '.join(map(repr, bad))} (choose from "
                    f"{', '.join(self.allowed)})",
                )
        before = getattr(namespace, self.dest, None) or []
        setattr(namespace, self.dest, list(dict.fromkeys([*before, *items])))


def add_list_argument(
    parser: Any,
    *flags: str,
    metavar: str,
    help: str,
    choices: Sequence[str] | None = None,
    spaces: bool = True,
    **kwargs: Any,
) -> None:
    """A list flag: comma-separated items, ``;`` too, and repeatable; the namespace holds
    the items as a list (``[]`` for a blank value, the default if not given). ``choices``
    are checked item by item. ``spaces``: the flag also takes several values (not for a
    command with positional arguments after its flags, which those would swallow)."""
    also = "';', spaces or the flag repeated" if spaces else "';' or the flag repeated"
    parser.add_argument(
        *flags,
        action=_ListAction,
        nargs="+" if spaces else None,
        metavar=metavar,
        allowed=tuple(choices) if choices is not None else None,
        help=f"{help} (comma-separated; also {also})",
        **kwargs,
    )


def format_size(n: float) -> str:
    """Bytes in decimal units: ``512 B``, ``1.5 kB``, ``12.3 MB``, ``1.2 GB``, ``3.0 TB``
    (``-1.5 MB`` for a negative difference)."""
    if n < 0:
        return f"-{format_size(-n)}"
    if n < 1000:
        return f"{n:.0f} B"
    for unit in ("kB", "MB", "GB"):
        n /= 1000
        if n < 999.95:
            return f"{n:.1f} {unit}"
    return f"{n / 1000:.1f} TB"


def format_over(size: int, limit: int) -> str:
    """``70.1 GB, over the limit of 64.0 GB``: a size against its limit, in decimal units;
    with the bytes of both where the units would show them equal."""
    shown, most = format_size(size), format_size(limit)
    if shown == most:
        shown, most = f"{shown} ({size} bytes)", f"{most} ({limit} bytes)"
    return f"{shown}, over the limit of {most}"


_SIZE_RE = re.compile(r"(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(?P<unit>[a-z]*)")
_SIZE_UNITS = {
    "": 1,
    "b": 1,
    **{p + s: 1000**i for i, p in enumerate("kmgt", 1) for s in ("", "b")},
    **{p + "ib": 1024**i for i, p in enumerate("kmgt", 1)},
}


def parse_size(text: str) -> int:
    """A size flag's value in bytes: a number with an optional unit, decimal as every size
    the tools print (``500MB`` = 500·10⁶, ``1.5G`` = 1.5·10⁹, ``64kB``; ``B`` optional, case
    ignored) or binary when spelled so (``64GiB`` = 64·2³⁰). Raises
    :class:`argparse.ArgumentTypeError` (a usage error as an argparse ``type=``) for anything
    else, zero included, and for sizes of 2⁶³ bytes or more."""
    found = _SIZE_RE.fullmatch(text.strip().lower())
    scale = _SIZE_UNITS.get(found.group("unit")) if found else None
    if found is None or scale is None:
        raise argparse.ArgumentTypeError(
            f"not a size: {text!r} (a number of bytes, or with a unit: 500MB, 1.5GB, 64GiB)"
        )
    value = float(found.group("number")) * scale
    if not 1 <= value < 1 << 63:
        raise argparse.ArgumentTypeError(f"size must be at least 1 byte and below 8 EiB: {text!r}")
    return int(value)


def output_line(path: Path) -> str:
    """The last line of a run that writes: where its output went, absolute."""
    return str(Path(path).absolute())
