"""Console-script trampolines of rocm-profiler (Linux only).

Every entry of ``_dist_info.CONSOLE_SCRIPTS`` whose package is ``profiler`` is
available here under its ``func`` name. It runs
``_rocm_profiler<nonce>/<relpath>`` with ``execve``, after putting the profiler's
``lib`` and the core package's ``lib/rocm_sysdeps/lib`` in front of
LD_LIBRARY_PATH and ``libexec/rocprofiler-compute`` in front of PYTHONPATH.

The wheel ships each library once, under its SONAME. On first use the
unversioned aliases (``lib/librocprof-sys*.so``, ``lib/libprofiler-hub*.so``)
are created as symlinks and appended to the rocm-profiler RECORD, so that
``pip uninstall`` removes them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from . import _dist_info as di

PACKAGE = "profiler"
ALIAS_PATTERNS = ("librocprof-sys*.so.*", "libprofiler-hub*.so.*")
_SITE = Path(__file__).resolve().parent.parent


def platform_dir(logical_name: str = PACKAGE) -> Path:
    return _SITE / di.ALL_PACKAGES[logical_name].platform_package_name()


def unversioned_name(name: str) -> str:
    """``libfoo.so.1.2`` -> ``libfoo.so``."""
    return name[: name.rindex(".so.") + 3]


def planned_aliases(lib_dir: Path) -> dict[str, str]:
    """alias name -> existing file name, for every versioned profiler library.

    Several versions of one library map to the shortest (its SONAME). Aliases
    that the wheel ships as real files are left alone.
    """
    candidates: dict[str, list[str]] = {}
    for pattern in ALIAS_PATTERNS:
        for path in lib_dir.glob(pattern):
            if path.is_file() and not path.is_symlink():
                candidates.setdefault(unversioned_name(path.name), []).append(path.name)
    plan = {}
    for alias, names in sorted(candidates.items()):
        alias_path = lib_dir / alias
        if alias_path.exists() and not alias_path.is_symlink():
            continue
        plan[alias] = min(names, key=lambda n: (len(n), n))
    return plan


def _alias_ok(lib_dir: Path, alias: str, target: str) -> bool:
    path = lib_dir / alias
    return path.is_symlink() and os.readlink(path) == target


def ensure_aliases() -> list[str]:
    """Create missing aliases and record them; return the RECORD paths of all aliases."""
    root = platform_dir()
    lib_dir = root / "lib"
    plan = planned_aliases(lib_dir)
    names = [f"{root.name}/lib/{alias}" for alias in plan]
    try:
        from rocm_sdk.internal import find_dist_info, locked_record, read_record_paths
    except ImportError:
        return names
    dist_info = find_dist_info(_SITE, di.ALL_PACKAGES[PACKAGE].dist_name())
    if dist_info is None or not (dist_info / "RECORD").is_file():
        return names  # not installed by a Python installer: leave the tree alone
    record = dist_info / "RECORD"
    done = all(_alias_ok(lib_dir, a, t) for a, t in plan.items())
    if done and set(names) <= set(read_record_paths(record)):
        return names
    try:
        with locked_record(record) as locked:
            for alias, target in plan.items():
                if not _alias_ok(lib_dir, alias, target):
                    tmp = lib_dir / f".{alias}.{os.getpid()}.tmp"
                    os.symlink(target, tmp)
                    os.replace(tmp, lib_dir / alias)
            locked.append(names)
    except OSError as exc:
        print(f"warning: cannot create the profiler library aliases: {exc}", file=sys.stderr)
    return names


def _prepend(env: dict[str, str], key: str, *paths: Path) -> None:
    parts = [str(p) for p in paths]
    if env.get(key):
        parts.append(env[key])
    env[key] = os.pathsep.join(parts)


def run(script: di.ConsoleScript) -> NoReturn:
    """Replace this process with the profiler tool of ``script``."""
    root = platform_dir()
    ensure_aliases()
    env = dict(os.environ)
    _prepend(env, "LD_LIBRARY_PATH", root / "lib", platform_dir("core") / "lib/rocm_sysdeps/lib")
    _prepend(env, "PYTHONPATH", root / "libexec" / "rocprofiler-compute")
    exe = root / script.relpath
    try:
        os.execve(exe, [str(exe), *sys.argv[1:]], env)
    except OSError as exc:
        print(f"{script.name}: cannot run {exe}: {exc}", file=sys.stderr)
        sys.exit(127)


def _trampoline(script: di.ConsoleScript) -> Callable[[], None]:
    def trampoline() -> None:
        run(script)

    trampoline.__name__ = trampoline.__qualname__ = script.func
    trampoline.__doc__ = f"Run {script.relpath} of the ROCm profiler."
    return trampoline


def __getattr__(name: str) -> Callable[[], None]:
    for script in di.CONSOLE_SCRIPTS.values():
        if script.package == PACKAGE and script.func == name:
            return _trampoline(script)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    funcs = [s.func for s in di.CONSOLE_SCRIPTS.values() if s.package == PACKAGE]
    return sorted([*globals(), *funcs])
