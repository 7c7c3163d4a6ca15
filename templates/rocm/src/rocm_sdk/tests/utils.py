"""Helpers of the installed self-tests: locating packages and load-testing libraries.

Everything is derived from what the installed packages contain; nothing here
lists library names.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import sysconfig
import unittest
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .. import _dist_info as di
from .._elf import ET_DYN, ElfError, is_elf, read_dynamic
from .._layout import package_dir

Inode = tuple[int, int]

# Kinds of shared objects that cannot be loaded on their own with dlopen.
NOT_LOADABLE = (
    (re.compile(r"^libclang_rt\."), "compiler runtime (sanitizer/profile) library"),
    (re.compile(r"\.cpython-|\.abi3\.so|^libpyro"), "Python extension module"),
    (re.compile(r"^libLLVMOffload"), "offload plugin that needs a GPU runtime context"),
    (re.compile(r"^libtest_"), "test fixture library"),
)
_SO_NAME = re.compile(r"\.so(\.|$)")
_MISSING = re.compile(r"([^\s:]+): cannot open shared object file")

LOAD_SCRIPT = r"""
import ctypes, json, sys
preload, target = json.loads(sys.argv[1]), sys.argv[2]
try:
    for path in preload:
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    ctypes.CDLL(target)
except OSError as exc:
    print(json.dumps({"error": str(exc)}))
    sys.exit(0)
try:
    with open("/proc/self/maps") as f:
        maps = sorted({l.split(None, 5)[5].strip() for l in f if len(l.split(None, 5)) == 6})
except OSError:
    maps = None
print(json.dumps({"maps": maps}))
"""


def resolved_family() -> str | None:
    try:
        return di.determine_target_family()
    except ValueError:
        return None


def platform_dir(logical_name: str, family: str | None = None) -> Path | None:
    """The installed platform package of a logical package, or None."""
    entry = di.ALL_PACKAGES.get(logical_name)
    if entry is None:
        return None
    if entry.target_specific and family is None and logical_name != "device":
        family = resolved_family()
        if family is None:
            return None
    try:
        return package_dir(entry.platform_package_name(family))
    except ValueError:
        return None


def pure_dir(logical_name: str, family: str | None = None) -> Path | None:
    entry = di.ALL_PACKAGES.get(logical_name)
    name = entry.pure_package_name(family or resolved_family()) if entry else None
    return package_dir(name) if name else None


def installed_platform_dirs() -> list[Path]:
    """Every installed platform package of this build (all families)."""
    dirs: list[Path] = []
    for entry in di.ALL_PACKAGES.values():
        if entry.logical_name in ("meta", "device"):
            continue
        families = di.AVAILABLE_TARGET_FAMILIES if entry.target_specific else [None]
        for family in families:
            path = platform_dir(entry.logical_name, family)
            if path is not None and path not in dirs:
                dirs.append(path)
    return dirs


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "rocm_sdk", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)


def run_python(
    code: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", code, *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


def _script_dirs(site: Path, record_hits: list[Path]) -> list[Path]:
    """Where an installer may have put console scripts for a distribution in ``site``."""
    dirs = [Path(p) for p in (sysconfig.get_path("scripts"),) if p]
    user = sysconfig.get_path("scripts", f"{os.name}_user")
    if user:
        dirs.append(Path(user))
    dirs += [site / "bin", site / "Scripts", *(p.parent for p in record_hits)]
    return list(dict.fromkeys(dirs))


def find_script(name: str) -> str | None:
    """The console script ``name`` that the installed distribution declaring it wrote.

    Looked for where installers put scripts for that distribution (the environment's and the
    user scheme's scripts dirs, ``<target>/bin`` after ``pip install --target``, the RECORD's
    entry), never on PATH, and accepted only when it launches the declared entry point: a
    system copy of the same command (``/usr/bin/hipconfig``) can never make a check pass.
    """
    names = [name + ".exe", name] if os.name == "nt" else [name]
    for ep in importlib.metadata.entry_points(group="console_scripts", name=name):
        dist = ep.dist
        if dist is None:
            continue
        site = Path(str(dist.locate_file("")))
        hits = [Path(str(dist.locate_file(f))) for f in dist.files or [] if f.name in names]
        needle = ep.value.split(":", 1)[0].encode()
        for directory in _script_dirs(site, hits):
            for candidate in names:
                path = directory / candidate
                try:
                    if path.is_file() and needle in path.read_bytes():
                        return str(path)
                except OSError:
                    continue
    return None


def _inode(path: Path | str) -> Inode | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def walk_files(root: Path) -> Iterable[Path]:
    """Files (not directories, not links to directories) under root, sorted."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            yield Path(dirpath, name)


def provider_index(dirs: Iterable[Path]) -> dict[str, set[Inode]]:
    """File name -> inodes of the copies the installed packages provide."""
    index: dict[str, set[Inode]] = {}
    for root in dirs:
        for path in walk_files(root):
            inode = _inode(path)
            if inode is not None:
                index.setdefault(path.name, set()).add(inode)
    return index


def shared_libraries(root: Path) -> list[Path]:
    """ELF shared objects (with '.so' in the name) under root, links excluded."""
    libs = []
    for path in walk_files(root):
        if path.is_symlink() or not _SO_NAME.search(path.name) or not is_elf(path):
            continue
        try:
            if read_dynamic(path).e_type == ET_DYN:
                libs.append(path)
        except ElfError:
            continue
    return libs


@dataclass(frozen=True)
class LoadOutcome:
    library: Path
    status: str  # "ok", "skip" or "fail"
    detail: str = ""


def _not_loadable(lib: Path) -> str | None:
    for pattern, reason in NOT_LOADABLE:
        if pattern.search(lib.name):
            return reason
    return None


def _verify_resolution(lib: Path, maps: list[str], providers: dict[str, set[Inode]]) -> str:
    mapped = {inode: path for path in maps if (inode := _inode(path)) is not None}
    wrong = []
    for needed in read_dynamic(lib).needed:
        expected = providers.get(needed)
        if not expected or expected & mapped.keys():
            continue
        elsewhere = [p for p in maps if os.path.basename(p) == needed] or ["<not mapped>"]
        wrong.append(f"{needed} -> {', '.join(elsewhere)}")
    if wrong:
        return "resolved outside the installed packages: " + "; ".join(wrong)
    return ""


def check_library(
    lib: Path, providers: dict[str, set[Inode]], preload: Iterable[Path] = ()
) -> LoadOutcome:
    """Load ``lib`` in a fresh interpreter and check where its dependencies came from."""
    reason = _not_loadable(lib)
    if reason:
        return LoadOutcome(lib, "skip", f"{lib.name}: {reason}")
    args = [json.dumps([str(p) for p in preload]), str(lib)]
    proc = subprocess.run([sys.executable, "-c", LOAD_SCRIPT, *args], capture_output=True,
                          text=True, timeout=600)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        detail = f"{lib}: loader exited {proc.returncode}: {proc.stderr[-2000:]}"
        return LoadOutcome(lib, "fail", detail)
    result = json.loads(lines[-1])
    if "error" in result:
        error = result["error"]
        missing = sorted({m for m in _MISSING.findall(error) if m != str(lib)})
        if missing and not any(os.path.basename(m) in providers for m in missing):
            detail = f"{lib.name}: missing system libraries: {', '.join(missing)}"
            return LoadOutcome(lib, "skip", detail)
        return LoadOutcome(lib, "fail", f"{lib}: {error}")
    if result["maps"] is None:
        return LoadOutcome(lib, "ok")
    problem = _verify_resolution(lib, result["maps"], providers)
    return LoadOutcome(lib, "fail" if problem else "ok", f"{lib}: {problem}" if problem else "")


def check_libraries(
    libs: list[Path], providers: dict[str, set[Inode]], preload: Iterable[Path] = ()
) -> list[LoadOutcome]:
    preload = list(preload)
    workers = max(1, min(8, os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda lib: check_library(lib, providers, preload), libs))


def assert_libraries_load(
    test: unittest.TestCase,
    libs: list[Path], providers: dict[str, set[Inode]], preload: Iterable[Path] = ()) -> None:
    """One subtest per library: pass, skip (only system libraries missing) or fail."""
    if not libs:
        test.skipTest("no shared libraries in this package")
    for outcome in check_libraries(libs, providers, preload):
        with test.subTest(library=outcome.library.name):
            if outcome.status == "skip":
                test.skipTest(outcome.detail)
            if outcome.status == "fail":
                test.fail(outcome.detail)


def assert_console_scripts(test: unittest.TestCase, package: str) -> None:
    """Each console script of ``package`` is installed and passes its probe."""
    scripts = [s for s in di.CONSOLE_SCRIPTS.values() if s.package == package]
    if not scripts:
        test.skipTest(f"the {package} package declares no console scripts")
    for script in scripts:
        with test.subTest(script=script.name):
            exe = find_script(script.name)
            if exe is None:
                test.fail(f"console script {script.name} is not installed")
            if script.probe_args is None:
                continue
            proc = subprocess.run([exe, *script.probe_args], capture_output=True, text=True,
                                  timeout=120)
            output = proc.stdout + proc.stderr
            test.assertEqual(proc.returncode, 0, f"{script.name} failed: {output[-2000:]}")
            if script.expect:
                test.assertIn(script.expect, output)


def assert_preloads(test: unittest.TestCase, package: str) -> None:
    """preload_libraries() works for every shipped library entry of ``package``."""
    shipped = set(di.SHIPPED_LIBRARIES)
    names = sorted(n for n, e in di.ALL_LIBRARIES.items() if e.package == package and n in shipped)
    if not names:
        test.skipTest(f"no library entries for the {package} package")
    code = "import json, sys, rocm_sdk; rocm_sdk.preload_libraries(*json.loads(sys.argv[1]))"
    proc = run_python(code, json.dumps(names))
    test.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
