"""rocm-profiler: package layout, shared libraries, library aliases, console scripts."""

from __future__ import annotations

import importlib
import os
import sys
import unittest
from pathlib import Path

from . import utils


class ProfilerTest(unittest.TestCase):
    profiler_dir: Path

    @classmethod
    def setUpClass(cls) -> None:
        if sys.platform == "win32":
            raise unittest.SkipTest("the profiler package exists only on Linux")
        profiler_dir = utils.platform_dir("profiler")
        if profiler_dir is None:
            raise unittest.SkipTest("rocm-profiler is not installed (pip install 'rocm[profiler]')")
        cls.profiler_dir = profiler_dir

    def testSiblings(self) -> None:
        pure = utils.pure_dir("profiler")
        self.assertIsNotNone(pure, "the rocm_profiler package is missing")
        assert pure is not None
        self.assertTrue(os.path.samefile(pure.parent, self.profiler_dir.parent))

    def testSharedLibrariesLoad(self) -> None:
        providers = utils.provider_index(utils.installed_platform_dirs())
        utils.assert_libraries_load(self, utils.shared_libraries(self.profiler_dir), providers)

    def testUnversionedAliases(self) -> None:
        pure = utils.pure_dir("profiler")
        assert pure is not None
        cli = importlib.import_module(f"{pure.name}._cli")
        cli.ensure_aliases()
        lib_dir = self.profiler_dir / "lib"
        versioned = [p for pattern in cli.ALIAS_PATTERNS for p in sorted(lib_dir.glob(pattern))
                     if not p.is_symlink()]
        if not versioned:
            self.skipTest("no versioned profiler libraries")
        for path in versioned:
            with self.subTest(library=path.name):
                alias = lib_dir / cli.unversioned_name(path.name)
                self.assertTrue(alias.exists(), f"{alias} is missing")

    def testConsoleScripts(self) -> None:
        utils.assert_console_scripts(self, "profiler")
