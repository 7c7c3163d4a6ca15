"""The ``rocm-sdk`` command line (also ``python -m rocm_sdk``)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import NoReturn

from . import _dist_info as di
from ._errors import RocmSdkError
from ._jsonfile import read_json
from ._layout import package_dir
from ._limits import DEFAULT_LIMIT_TEXT, MAX_DEVEL_SIZE_ENV

DIST_INFO_JSON = Path("share", "therock", "dist_info.json")


def _path(args: argparse.Namespace) -> int:
    from ._devel import get_devel_root

    root = get_devel_root()
    if args.cmake:
        print(root / "lib" / "cmake")
    elif args.bin:
        print(root / "bin")
    else:
        print(root)
    return 0


def _version(args: argparse.Namespace) -> int:
    print(di.__version__)
    return 0


def _targets(args: argparse.Namespace) -> int:
    core = package_dir(di.ALL_PACKAGES["core"].platform_package_name())
    if core is None:
        raise RocmSdkError("rocm-sdk-core is not installed")
    path = core / DIST_INFO_JSON
    try:
        doc = read_json(path)
    except (OSError, ValueError) as exc:
        raise RocmSdkError(f"cannot read dist_amdgpu_targets from {path}: {exc}") from exc
    if not isinstance(doc, dict) or "dist_amdgpu_targets" not in doc:
        raise RocmSdkError(f"{path} has no dist_amdgpu_targets")
    value = doc["dist_amdgpu_targets"]
    targets = value if isinstance(value, list) else [value]
    names = [t for t in targets if isinstance(t, str) and t.isprintable()]
    if len(names) != len(targets):
        raise RocmSdkError(
            f"{path}: dist_amdgpu_targets is not a target list: {di.shown_value(str(value))}"
        )
    print(";".join(names))
    _report_gpus()
    _report_selection()
    return 0


def _report_gpus() -> None:
    """On stderr: this machine's GPUs, how each was found, and which installed packages
    serve it (or what to install)."""
    from ._coverage import coverage

    try:
        gpus = di.detect_gpus()
    except ValueError as exc:
        print(f"rocm: GPU detection: {exc}", file=sys.stderr)
        return
    if not gpus:
        print(
            "rocm: no GPU detected on this machine (KFD's sysfs topology has no GPU node and "
            f"offload-arch found none); {di.FORCE_GFX_ARCH_ENV}=gfxNNN names one",
            file=sys.stderr,
        )
        return
    for entry in coverage(gpus):
        where = f"rocm: GPU {_plain(entry.gpu.target)} (found by {entry.gpu.source}): "
        agent = f" for {' or '.join(entry.isas)}" if entry.isas else ""
        if entry.served_by:
            served = ", ".join(entry.served_by)
            print(f"{where}device code from {served}{agent}", file=sys.stderr)
        else:
            print(f"{where}NO {entry.missing}; {entry.fix}", file=sys.stderr)


def _plain(value: str) -> str:
    """``value`` as it is when it is a short printable word, else quoted, escaped and cut
    (one line whatever the file or variable holds)."""
    if len(value) <= 60 and value.isprintable() and not any(c.isspace() for c in value):
        return value
    return di.shown_value(value)


def _text(value: str) -> str:
    """``value`` as it is when it is printable text of a few hundred characters, else
    quoted, escaped and cut (one line whatever the file holds)."""
    if len(value) <= 300 and value.isprintable():
        return value
    return di.shown_value(value)


def _report_selection() -> None:
    """On stderr (stdout stays the bare target list): which target family the ``rocm``
    wheel was resolved for when pip or uv built it, and how to resolve it again."""
    path = Path(__file__).with_name("_selection.json")
    try:
        chosen = read_json(path)
    except (OSError, ValueError):
        return
    if not isinstance(chosen, dict) or not {"target_family", "source"} <= chosen.keys():
        return
    family, source = str(chosen["target_family"]), str(chosen["source"])
    how = _text(str(chosen.get("how", source)))
    if chosen.get("device_extra") == [] and _device_code_installed():
        pass  # the user chose a GPU's device code (device-<gfx>): the GPU lines say what serves
    elif chosen.get("device_extra") == []:  # kpack-split: rocm[device] installed nothing
        fix = _text(str(chosen.get("device_fix", "pip install 'rocm[device-gfxNNN]'")))
        built = chosen.get("device_targets")
        has = _text(", ".join(map(str, built))) if isinstance(built, list) and built else ""
        print(f"rocm: the 'device' extra of the rocm package installed no device code when "
              f"pip or uv built it ({how}); {fix} installs a GPU's"
              + (f" (this build has {has})" if has else "")
              + "; that is a record, not this machine's state", file=sys.stderr)
    else:
        print(f"rocm: the rocm package chose target family {_plain(family)} when pip or uv "
              f"built it (from {how}); that is a record, not this machine's state",
              file=sys.stderr)
    wanted = os.environ.get(di.TARGET_FAMILY_ENV, "").strip()
    if wanted and wanted != family:
        print(
            f"rocm: {di.TARGET_FAMILY_ENV}={_plain(wanted)} now, but pip/uv reuse the wheel "
            f"they built for {_plain(family)}; resolve again with: pip install "
            f"--force-reinstall --no-deps --no-cache-dir rocm=={di.__version__} (uv: "
            "--reinstall --no-cache)",
            file=sys.stderr,
        )


def _device_code_installed() -> bool:
    """Whether a device package of ours is installed (the user chose a GPU's code)."""
    from ._coverage import device_sites
    from ._kpack_installed import find_device_wheels

    return any(find_device_wheels(site, splitter=False) for site in device_sites())


def _init(args: argparse.Namespace) -> int:
    from ._devel import get_devel_root

    if args.check:
        return _check_devel(quiet=args.quiet)
    root = get_devel_root(verify=True)
    if not args.quiet:
        print(f"Devel contents expanded to '{root}'")
    return 0


#: ``rocm-sdk init --check``'s status when the devel tree is not ready (not expanded,
#: incomplete, or rocm-sdk-devel not installed); 0 when it is expanded and complete.
EXIT_NOT_READY = 1


def _check_devel(*, quiet: bool) -> int:
    """One line on stdout (the answer; stderr when not ready), nothing changed."""
    from ._devel_status import devel_status

    status = devel_status()
    if status.ok:
        if not quiet:
            print(f"rocm-sdk: {status.describe()}")
        return 0
    print(f"rocm-sdk: {status.describe()}", file=sys.stderr)
    return EXIT_NOT_READY


def _test(args: argparse.Namespace) -> int:
    from .tests import run_all

    return run_all()


EXPANSION_NOTE = (
    f"The devel tarball may expand to {DEFAULT_LIMIT_TEXT}; {MAX_DEVEL_SIZE_ENV}=<bytes> sets "
    "another limit."
)


#: The most characters of a usage error shown (an argument may be a megabyte long).
_SHOWN_ERROR = 300


#: The exit status of a usage error: argparse's, and TheRock's ``rocm-sdk`` (argparse) has it.
EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """A usage error (an unknown command or flag, a missing or extra argument) is one
    ``rocm-sdk: error:`` line and exit status 2, as argparse and TheRock's ``rocm-sdk`` exit
    (without argparse's usage block); every other error of the command exits 1. Subcommand
    parsers are of this class."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("rocm-sdk").strip()
        shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
        if len(shown) > _SHOWN_ERROR:
            shown = f"{shown[:_SHOWN_ERROR]}... ({len(shown)} characters)"
        where = f"{command}: " if command else ""
        self.exit(EXIT_USAGE, f"rocm-sdk: error: {where}{shown} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rocm-sdk", description="ROCm SDK for Python", epilog=EXPANSION_NOTE
    )
    parser.add_argument("--version", action="version", version=di.__version__,
                        help="print the version of the installed ROCm packages and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    path = sub.add_parser("path", help="print a path of the devel tree (expands it if needed)",
                          epilog=EXPANSION_NOTE)
    which = path.add_mutually_exclusive_group(required=True)
    which.add_argument("--cmake", action="store_true", help="the CMake package directory")
    which.add_argument("--root", action="store_true", help="the root of the devel tree")
    which.add_argument("--bin", action="store_true", help="the bin directory of the devel tree")
    path.set_defaults(func=_path)
    sub.add_parser("version", help="print the ROCm package version").set_defaults(func=_version)
    sub.add_parser("targets", help="print the GPU targets of this build").set_defaults(
        func=_targets
    )
    init = sub.add_parser("init", help="expand the devel package and link device files",
                          epilog=EXPANSION_NOTE)
    init.add_argument("--quiet", action="store_true", help="print nothing on success")
    init.add_argument("--check", action="store_true",
                      help="change nothing: say whether the devel tree is expanded and complete "
                      "(exit status 0) or not (1, with the command that fixes it)")
    init.set_defaults(func=_init)
    sub.add_parser("test", help="run the installation self-tests").set_defaults(func=_test)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="rocm-sdk: %(levelname)s: %(message)s")
    try:
        return int(args.func(args))
    except (RocmSdkError, ModuleNotFoundError, FileNotFoundError, ValueError, OSError) as exc:
        print(f"rocm-sdk: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
