"""Locating and preloading the shared libraries of the installed packages."""

from __future__ import annotations

import ctypes
import os
import re
import sys
import warnings
from pathlib import Path

from . import _dist_info as di
from ._layout import package_dir

PRELOAD_ENV = "ROCM_SDK_PRELOAD_LIBRARIES"

_ALL_CDLLS: dict[str, ctypes.CDLL] = {}


def _is_windows() -> bool:
    return sys.platform == "win32"


def _install_hint(logical_names: set[str]) -> str:
    extras = sorted(n for n in logical_names if n not in ("core", "meta"))
    target = f"rocm[{','.join(extras)}]" if extras else "rocm"
    return f"pip install '{target}'"


def _platform_package_dir(entry: di.LibraryEntry) -> Path | None:
    """The installed platform package providing ``entry``; None if not installed."""
    package = di.ALL_PACKAGES.get(entry.package)
    if package is None:
        return None
    family = di.determine_target_family() if package.target_specific else None
    return package_dir(package.platform_package_name(family))


def _find_one(entry: di.LibraryEntry, root: Path) -> Path | None:
    if _is_windows():
        if not entry.dll_pattern:
            return None
        directory, pattern = root / entry.windows_relpath, entry.dll_pattern
    else:
        directory, pattern = root / entry.posix_relpath, entry.so_pattern
    matches = sorted(directory.glob(pattern))
    if matches:
        return matches[0]
    if entry.optional:
        return None
    raise FileNotFoundError(
        f"rocm library {entry.shortname!r}: no file matches {pattern!r} in {directory}"
    )


def _lookup(shortnames: tuple[str, ...]) -> list[tuple[str, Path | None]]:
    """(shortname, path or None when skipped) for each name, in order."""
    found: list[tuple[str, Path | None]] = []
    missing: dict[str, set[str]] = {}
    for shortname in shortnames:
        entry = di.ALL_LIBRARIES.get(shortname)
        if entry is None:
            raise ModuleNotFoundError(f"unknown rocm library {shortname!r}")
        root = _platform_package_dir(entry)
        if root is None:
            missing.setdefault(entry.package, set()).add(shortname)
            continue
        found.append((shortname, _find_one(entry, root)))
    if missing:
        names = ", ".join(sorted(n for names in missing.values() for n in names))
        raise ModuleNotFoundError(
            f"the rocm packages providing {names} are not installed; install them with: "
            f"{_install_hint(set(missing))}"
        )
    return found


def find_libraries(*shortnames: str) -> list[Path]:
    """Absolute paths of the named libraries (see ``_dist_info.ALL_LIBRARIES``).

    Libraries without a file for this platform (optional ones, or Windows
    entries without a DLL pattern) are left out. Raises ModuleNotFoundError for
    unknown names or packages that are not installed (naming the ``rocm[...]``
    extra), FileNotFoundError if a required file is missing.
    """
    return [path for _, path in _lookup(shortnames) if path is not None]


def preload_libraries(*shortnames: str, rtld_global: bool = True) -> None:
    """Load the named libraries with ``ctypes.CDLL`` and keep the handles."""
    mode = ctypes.RTLD_GLOBAL if rtld_global else ctypes.RTLD_LOCAL
    for shortname, path in _lookup(shortnames):
        if shortname in _ALL_CDLLS or path is None:
            continue
        _ALL_CDLLS[shortname] = ctypes.CDLL(str(path), mode=mode)


def _env_preload(rtld_global: bool) -> None:
    value = os.environ.get(PRELOAD_ENV)
    if value is None:
        return
    names = [n.strip() for n in re.split(r"[,;]", value) if n.strip()]
    if not names:
        return
    try:
        preload_libraries(*names, rtld_global=rtld_global)
    except Exception as exc:
        raise RuntimeError(
            f"could not preload the libraries of {PRELOAD_ENV}={value!r}: {exc}. "
            "Fix or unset this environment variable."
        ) from exc


def version_pattern(check_version: str | re.Pattern[str]) -> re.Pattern[str]:
    """A compiled pattern; in strings '*' matches anything, the rest literally."""
    if isinstance(check_version, re.Pattern):
        return check_version
    if isinstance(check_version, str):
        body = ".*".join(re.escape(part) for part in check_version.split("*"))
        return re.compile(f"^{body}$")
    kind = type(check_version).__name__
    raise TypeError(f"check_version must be a str or re.Pattern, not {kind}")


def _check_version(check_version: str | re.Pattern[str], fail: bool) -> None:
    pattern = version_pattern(check_version)
    if pattern.match(di.__version__):
        return
    message = (
        f"the program expects a ROCm version matching {pattern.pattern!r}, but the "
        f"installed ROCm packages have version {di.__version__}"
    )
    if fail:
        raise RuntimeError(message)
    warnings.warn(f"{message}; this may cause unexpected behaviour", UserWarning, stacklevel=3)


def initialize_process(
    *,
    preload_shortnames: list[str] | None = None,
    rtld_global: bool = True,
    env_override: bool = True,
    check_version: str | re.Pattern[str] | None = None,
    fail_on_version_mismatch: bool = False,
    **kwargs: object,
) -> None:
    """Set up a process that uses the ROCm libraries of these packages.

    Keyword arguments this version does not know are accepted and ignored, as TheRock's
    ``rocm_sdk`` does, so frameworks built against a newer one keep working.

    Preloads ``preload_shortnames`` and, with ``env_override``, the names in env
    ``ROCM_SDK_PRELOAD_LIBRARIES`` (',' or ';' separated). With ``check_version``
    (a string where '*' is a wildcard, or a compiled pattern) a version mismatch
    warns, or raises RuntimeError with ``fail_on_version_mismatch``.
    """
    _add_layered_archives()
    if preload_shortnames:
        preload_libraries(*preload_shortnames, rtld_global=rtld_global)
    if env_override:
        _env_preload(rtld_global)
    if check_version:
        _check_version(check_version, fail_on_version_mismatch)
    _warn_uncovered_gpus()


KPACK_PATH_ENV = "ROCM_KPACK_PATH"
KPACK_PATH_PREFIX_ENV = "ROCM_KPACK_PATH_PREFIX"


def _add_layered_archives() -> None:
    """Device wheels installed in another site dir than the libraries (a venv layered over
    a base install with ``--system-site-packages``) are not on the libraries' search paths:
    hand their archives to the runtime through ROCM_KPACK_PATH_PREFIX as ``@GFXARCH@``
    patterns, before the HIP runtime loads. ROCM_KPACK_PATH, set by the user, means only
    those files: left alone."""
    if os.environ.get(KPACK_PATH_ENV):
        return
    from ._coverage import layered_archives
    from ._kpack_installed import archive_target

    current = [p for p in os.environ.get(KPACK_PATH_PREFIX_ENV, "").split(os.pathsep) if p]
    patterns: list[str] = []
    for archive in layered_archives():  # names hold ':' (gfx90a:xnack+): list them as patterns
        target = archive_target(archive.name)
        if target is None:
            continue
        stem = archive.name[: -len(f"{target}.kpack")]
        pattern = str(archive.with_name(stem + "@GFXARCH@.kpack"))
        if os.pathsep not in pattern and pattern not in current and pattern not in patterns:
            patterns.append(pattern)
    if patterns:
        os.environ[KPACK_PATH_PREFIX_ENV] = os.pathsep.join([*current, *patterns])


#: set to 1 to skip initialize_process's check of this machine's GPUs
NO_GPU_CHECK_ENV = "ROCM_SDK_NO_GPU_CHECK"
_GPU_CHECK_DONE: list[bool] = []


def _warn(message: str) -> None:
    """One line on stderr: ``warnings.warn`` would add the caller's source line (two lines
    from a script file), and a warning filter of the application could turn it into an
    exception in the middle of its import."""
    print(f"rocm_sdk: warning: {message}", file=sys.stderr, flush=True)


def _warn_uncovered_gpus() -> None:
    """Once per process: one warning line per GPU of this machine without installed device
    code, before the first kernel launch fails with hipErrorInvalidImage. Reads KFD's sysfs
    (or the forcing variable) only: no process is started."""
    if _GPU_CHECK_DONE or os.environ.get(NO_GPU_CHECK_ENV) == "1":
        return
    _GPU_CHECK_DONE.append(True)
    from ._coverage import coverage

    try:
        gpus = di.detect_gpus(programs=False)
    except ValueError as exc:
        _warn(f"GPU detection: {exc}")
        return
    for entry in coverage(gpus):
        if not entry.served_by:
            _warn(
                f"GPU {entry.gpu.target} has no {entry.missing}, so its kernels will "
                f"not load; {entry.fix} (set {NO_GPU_CHECK_ENV}=1 to silence)"
            )
