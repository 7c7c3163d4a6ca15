"""rocm-sdk-core: package layout, shared libraries, console scripts."""

from __future__ import annotations

import os
import unittest
from pathlib import Path

from .. import _dist_info as di
from .._layout import package_dir
from . import utils


class CoreTest(unittest.TestCase):
    core_dir: Path

    @classmethod
    def setUpClass(cls) -> None:
        core_dir = utils.platform_dir("core")
        if core_dir is None:
            raise AssertionError("rocm-sdk-core is not installed; reinstall rocm")
        cls.core_dir = core_dir

    def testRegularPackages(self) -> None:
        for name in ("rocm_sdk", di.ALL_PACKAGES["core"].pure_package_name(),
                     di.ALL_PACKAGES["core"].platform_package_name()):
            with self.subTest(package=name):
                self.assertIsNotNone(package_dir(str(name)), f"{name} is not a regular package")

    def testSiblings(self) -> None:
        rocm_sdk_dir = package_dir("rocm_sdk")
        assert rocm_sdk_dir is not None
        self.assertTrue(os.path.samefile(rocm_sdk_dir.parent, self.core_dir.parent))

    def testSharedLibrariesLoad(self) -> None:
        providers = utils.provider_index(utils.installed_platform_dirs())
        utils.assert_libraries_load(self, utils.shared_libraries(self.core_dir), providers)

    def testConsoleScripts(self) -> None:
        utils.assert_console_scripts(self, "core")

    def testPreloadLibraries(self) -> None:
        utils.assert_preloads(self, "core")
