"""The rocm_sdk command line, preloading and version checks."""

from __future__ import annotations

import importlib.metadata
import os
import re
import unittest

import rocm_sdk

from .. import _dist_info as di
from .._layout import normalize_dist_name, without_post_release
from . import utils


def _preloadable_core_libraries() -> list[str]:
    """Core library short names whose file is installed (amdhip64, hiprtc first)."""
    names = []
    for name, entry in sorted(di.ALL_LIBRARIES.items()):
        if entry.package != "core":
            continue
        try:
            if rocm_sdk.find_libraries(name):
                names.append(name)
        except (ModuleNotFoundError, FileNotFoundError):
            continue
    return sorted(names, key=lambda n: (n not in ("amdhip64", "hiprtc"), n))


class CliTest(unittest.TestCase):
    def testHelp(self) -> None:
        proc = utils.cli("--help")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("usage:", proc.stdout)

    def testVersion(self) -> None:
        proc = utils.cli("version")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.strip(), di.__version__)
        self.assertIn(".", proc.stdout)

    def testTargets(self) -> None:
        proc = utils.cli("targets")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("gfx", proc.stdout)


class PreloadTest(unittest.TestCase):
    def testPreloadAmdhip64(self) -> None:
        if "amdhip64" not in _preloadable_core_libraries():
            self.skipTest("amdhip64 is not a library of this installation")
        proc = utils.run_python("import rocm_sdk; rocm_sdk.preload_libraries('amdhip64')")
        self.assertEqual(proc.returncode, 0, proc.stderr)

    def _env_preload(self, separator: str, count: int) -> None:
        names = _preloadable_core_libraries()[:count]
        if len(names) < count:
            self.skipTest(f"fewer than {count} core libraries are installed")
        env = dict(os.environ, ROCM_SDK_PRELOAD_LIBRARIES=f" {separator} ".join(names) + separator)
        code = (
            "import rocm_sdk; rocm_sdk.initialize_process(); "
            "print(sorted(rocm_sdk._library._ALL_CDLLS))"
        )
        proc = utils.run_python(code, env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.strip(), repr(sorted(names)))

    def testEnvPreloadOne(self) -> None:
        self._env_preload(",", 1)

    def testEnvPreloadCommaList(self) -> None:
        self._env_preload(",", 2)

    def testEnvPreloadSemicolonList(self) -> None:
        self._env_preload(";", 2)

    def testAbsentLibrariesAsTheRockReportsThem(self) -> None:
        """A known library whose file this build does not ship: [] when optional,
        FileNotFoundError otherwise (its package being installed)."""
        checked = 0
        for name, entry in sorted(di.ALL_LIBRARIES.items()):
            if name in di.SHIPPED_LIBRARIES or entry.package != "core":
                continue
            if entry.optional:
                self.assertEqual(rocm_sdk.find_libraries(name), [], name)
            else:
                with self.assertRaises(FileNotFoundError, msg=name):
                    rocm_sdk.find_libraries(name)
            checked += 1
        if not checked:
            self.skipTest("every core library of the registry ships in this build")

    def testInitializeProcessIgnoresUnknownKeywords(self) -> None:
        rocm_sdk.initialize_process(env_override=False, some_future_option=True)

    def testEnvPreloadUnknownRaises(self) -> None:
        env = dict(os.environ, ROCM_SDK_PRELOAD_LIBRARIES="no-such-library")
        proc = utils.run_python("import rocm_sdk; rocm_sdk.initialize_process()", env=env)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("RuntimeError", proc.stderr)


class VersionCheckTest(unittest.TestCase):
    def _check(self, pattern: str | re.Pattern[str], fail: bool = True) -> None:
        rocm_sdk.initialize_process(
            env_override=False, check_version=pattern, fail_on_version_mismatch=fail
        )

    def testExact(self) -> None:
        self._check(di.__version__)

    def testWildcard(self) -> None:
        self._check("*")
        self._check(di.__version__.split(".")[0] + ".*")

    def testCompiledPattern(self) -> None:
        self._check(re.compile(".+"))

    def testMismatchRaises(self) -> None:
        with self.assertRaises(RuntimeError):
            self._check("0.0.0-not-this-version")

    def testMismatchWarns(self) -> None:
        with self.assertWarns(UserWarning):
            self._check("0.0.0-not-this-version", fail=False)

    def testCompiledMismatchRaisesAndWarns(self) -> None:
        with self.assertRaises(RuntimeError):
            self._check(re.compile("^not-a-version$"))
        with self.assertWarns(UserWarning):
            self._check(re.compile("^not-a-version$"), fail=False)


class DistributionVersionsTest(unittest.TestCase):
    def testAllRocmDistributionsHaveOneVersion(self) -> None:
        versions: dict[str, str] = {}
        for dist in importlib.metadata.distributions():
            name = normalize_dist_name(dist.metadata["Name"] or "")
            if name == "rocm" or name.startswith(("rocm_sdk", "rocm_profiler")):
                versions.setdefault(name, dist.version)
        self.assertIn("rocm_sdk_core", versions)
        distinct = {without_post_release(v) for v in versions.values()}
        self.assertEqual(len(distinct), 1, f"versions differ: {versions}")
