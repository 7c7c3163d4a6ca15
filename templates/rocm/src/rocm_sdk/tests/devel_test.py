"""rocm-sdk-devel: expansion, paths, shared libraries, mirroring of runtime files."""

from __future__ import annotations

import ctypes
import os
import unittest
from pathlib import Path

from .. import _dist_info as di
from .._devel import get_devel_root, locate_devel
from .._layout import find_dist_info, read_metadata_headers
from .._record import read_record_paths
from .._tar_links import keeps_symlink
from . import utils

EXCLUDED_TOP_LEVEL = {"__init__.py", "__pycache__", ".devel_links"}


class DevelTest(unittest.TestCase):
    root: Path

    @classmethod
    def setUpClass(cls) -> None:
        try:
            locate_devel()
        except ModuleNotFoundError as exc:
            raise unittest.SkipTest(str(exc)) from None
        cls.root = get_devel_root()

    def _path(self, option: str) -> Path:
        proc = utils.cli("path", option)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return Path(proc.stdout.strip())

    def testPathRoot(self) -> None:
        self.assertTrue(os.path.samefile(self._path("--root"), self.root))

    def testPathBin(self) -> None:
        self.assertTrue(self._path("--bin").is_dir())

    def testCMakeDir(self) -> None:
        record = find_dist_info(self.root.parent, di.ALL_PACKAGES["devel"].dist_name())
        assert record is not None
        prefix = f"{self.root.name}/lib/cmake/"
        if not any(p.startswith(prefix) for p in read_record_paths(record / "RECORD")):
            self.skipTest("this devel package ships no CMake files")
        self.assertTrue(self._path("--cmake").is_dir())

    def testSharedLibrariesLoad(self) -> None:
        providers = utils.provider_index([*utils.installed_platform_dirs(), self.root])
        utils.assert_libraries_load(self, utils.shared_libraries(self.root), providers)

    def testRuntimeFilesMirroredIntoDevel(self) -> None:
        """Every runtime file exists in devel as the same inode (testLibrariesMirroredIntoDevel);
        off Windows through a relative symlink unless it is a program (a program finds its
        prefix from /proc/self/exe: a hard link)."""
        dirs = [d for d in (utils.platform_dir("core"), utils.platform_dir("libraries")) if d]
        tree = os.path.realpath(self.root)
        for runtime in dirs:
            for path in utils.walk_files(runtime):
                rel = path.relative_to(runtime)
                if rel.parts[0] in EXCLUDED_TOP_LEVEL:
                    continue
                with self.subTest(file=f"{runtime.name}/{rel.as_posix()}"):
                    mirror = self.root / rel
                    self.assertTrue(mirror.exists(), f"{mirror} is missing")
                    self.assertTrue(os.path.samefile(mirror, path), f"{mirror} is another file")
                    if keeps_symlink(rel.as_posix(), os.path.realpath(path), tree):
                        self.assertTrue(mirror.is_symlink(), f"{mirror} is a hard link or copy")
                        self.assertFalse(os.readlink(mirror).startswith("/"), f"{mirror}")

    def testLibrariesHaveOneFileIdentity(self) -> None:
        """Each runtime shared library reaches devel through a relative symlink, never a
        hard link or a copy (a container layer turns hard links into copies, and two copies
        of one library then load into one process); loaded through both paths it is one
        object."""
        if os.name == "nt":
            self.skipTest("Windows devel trees use hard links (symlinks need privileges)")
        pairs = []
        runtimes = (utils.platform_dir("core"), utils.platform_dir("libraries"))
        for runtime in (d for d in runtimes if d is not None):
            for path in utils.shared_libraries(runtime):
                mirror = self.root / path.relative_to(runtime)
                if mirror.exists():
                    pairs.append((path, mirror))
        if not pairs:
            self.skipTest("no shared library is mirrored into devel")
        for _path, mirror in pairs:
            with self.subTest(library=mirror.name):
                self.assertTrue(mirror.is_symlink(), f"{mirror} is a hard link or a copy")
                self.assertFalse(os.readlink(mirror).startswith("/"), f"{mirror}: absolute link")
        loaded = 0
        for path, mirror in pairs:
            try:
                first = ctypes.CDLL(str(path))
            except OSError:
                continue  # needs a library this machine lacks: the load tests name it
            self.assertEqual(first._handle, ctypes.CDLL(str(mirror))._handle, mirror)
            loaded += 1
        self.assertGreater(loaded, 0, "no mirrored library could be loaded")

    def testVersionsAgree(self) -> None:
        site = self.root.parent
        devel = find_dist_info(site, di.ALL_PACKAGES["devel"].dist_name())
        core = find_dist_info(site, di.ALL_PACKAGES["core"].dist_name())
        assert devel is not None and core is not None
        self.assertEqual(read_metadata_headers(devel)["Version"],
                         read_metadata_headers(core)["Version"])
