"""Console-script trampolines of rocm-sdk-core.

Every entry of ``_dist_info.CONSOLE_SCRIPTS`` whose package is ``core`` is
available here under its ``func`` name (entry point ``rocm_sdk_core._cli:<func>``).
It runs ``<root>/<relpath>`` with the same arguments, where root is:

- the expanded devel tree if rocm-sdk-devel is installed and expanded; device
  files of newly installed device wheels are linked into it first;
- otherwise the core platform package. If devel is installed but not expanded,
  scripts that allow it first run ``python -m rocm_sdk init --quiet``, unless
  the environment sets ROCM_SDK_NO_DEVEL_EXPANSION (target detection does).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from . import _dist_info as di

PACKAGE = "core"
DEVEL_TARBALLS = ("_devel.tar.xz", "_devel.tar")
_SITE = Path(__file__).resolve().parent.parent


def _platform_dir(logical_name: str) -> Path:
    return _SITE / di.ALL_PACKAGES[logical_name].platform_package_name()


def devel_state() -> str:
    """'absent', 'packed' (installed, not expanded) or 'expanded'."""
    entry = di.ALL_PACKAGES.get("devel")
    pure_name = entry.pure_package_name() if entry is not None else None
    if entry is None or pure_name is None or not (_SITE / pure_name / "__init__.py").is_file():
        return "absent"
    tarball = any((_SITE / pure_name / name).exists() for name in DEVEL_TARBALLS)
    if (_platform_dir("devel") / "__init__.py").is_file() and not tarball:
        return "expanded"
    return "packed"


def _expansion_disabled() -> bool:
    return os.environ.get(di.NO_DEVEL_EXPANSION_ENV, "").strip() not in ("", "0")


def _expand() -> None:
    command = [sys.executable, "-m", "rocm_sdk", "init", "--quiet"]
    if subprocess.run(command, check=False).returncode != 0:
        print(
            "warning: expanding rocm-sdk-devel failed; using the rocm-sdk-core files. "
            "Run 'rocm-sdk init' for details.",
            file=sys.stderr,
        )


def _reconcile_device_links() -> None:
    try:
        from rocm_sdk.internal import get_devel_root

        get_devel_root()
    except Exception as exc:  # running the tool matters more than the links
        print(f"warning: could not link device files into the devel tree: {exc}", file=sys.stderr)


def select_root(expand_devel: bool) -> Path:
    """The tree a script runs from (see the module docstring)."""
    state = devel_state()
    if state == "packed" and expand_devel and not _expansion_disabled():
        _expand()
        state = devel_state()
    if state == "expanded":
        _reconcile_device_links()
        return _platform_dir("devel")
    return _platform_dir(PACKAGE)


def _executable(root: Path, relpath: str) -> Path:
    path = root / relpath
    if sys.platform == "win32" and not path.exists():
        exe = path.with_name(path.name + ".exe")
        if exe.exists():
            return exe
    return path


def run(script: di.ConsoleScript) -> NoReturn:
    """Replace this process with the tool of ``script``."""
    exe = _executable(select_root(script.expand_devel), script.relpath)
    argv = [str(exe), *sys.argv[1:]]
    try:
        if sys.platform == "win32":
            sys.exit(subprocess.run(argv, check=False).returncode)
        os.execv(exe, argv)
    except OSError as exc:
        print(f"{script.name}: cannot run {exe}: {exc}", file=sys.stderr)
        sys.exit(127)


def _trampoline(script: di.ConsoleScript) -> Callable[[], None]:
    def trampoline() -> None:
        run(script)

    trampoline.__name__ = trampoline.__qualname__ = script.func
    trampoline.__doc__ = f"Run {script.relpath} of the ROCm SDK."
    return trampoline


def __getattr__(name: str) -> Callable[[], None]:
    for script in di.CONSOLE_SCRIPTS.values():
        if script.package == PACKAGE and script.func == name:
            return _trampoline(script)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    funcs = [s.func for s in di.CONSOLE_SCRIPTS.values() if s.package == PACKAGE]
    return sorted([*globals(), *funcs])
