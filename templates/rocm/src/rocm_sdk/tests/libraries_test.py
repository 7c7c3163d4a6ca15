"""rocm-sdk-libraries: package layout and shared libraries."""

from __future__ import annotations

import os
import unittest
from pathlib import Path

from . import utils


class LibrariesTest(unittest.TestCase):
    libraries_dir: Path

    @classmethod
    def setUpClass(cls) -> None:
        libraries_dir = utils.platform_dir("libraries")
        if libraries_dir is None:
            family = utils.resolved_family()
            raise unittest.SkipTest(
                f"the libraries package for target family {family!r} is not installed "
                "(pip install 'rocm[libraries]')"
            )
        cls.libraries_dir = libraries_dir

    def testRegularPackages(self) -> None:
        self.assertIsNotNone(utils.pure_dir("libraries"), "the pure libraries package is missing")

    def testSiblings(self) -> None:
        pure = utils.pure_dir("libraries")
        assert pure is not None
        self.assertTrue(os.path.samefile(pure.parent, self.libraries_dir.parent))

    def testSharedLibrariesLoad(self) -> None:
        """Each library loads on its own RPATH, with nothing preloaded.

        Preloading amdhip64 (as TheRock's test does) would hide a wrong RPATH: the loader
        reuses an already-loaded library by its SONAME, so a library that would find a
        system copy on its own would still look fine.
        """
        providers = utils.provider_index(utils.installed_platform_dirs())
        libs = utils.shared_libraries(self.libraries_dir)
        utils.assert_libraries_load(self, libs, providers)

    def testPreloadLibraries(self) -> None:
        utils.assert_preloads(self, "libraries")
