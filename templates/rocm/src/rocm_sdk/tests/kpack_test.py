"""Kpack-split device code: every transformed binary finds its kernels (kpack.md §7).

Runs when the arch-neutral libraries package and at least one ``rocm-sdk-device-*``
wheel are installed. See :mod:`rocm_sdk._kpack_check` for what is checked.
"""

from __future__ import annotations

import unittest
from pathlib import Path

from .. import _dist_info as di
from .._coverage import layered_archives, layered_wheels, splitter_hosts
from .._kpack_archive import zstandard_decompress
from .._kpack_check import KpackChecker
from .._kpack_installed import DeviceWheel, find_device_wheels
from .._kpack_report import format_failures
from . import utils


def _device_hint() -> str:
    """A command that changes the outcome: 'rocm[device]' installs nothing on a machine
    without a visible GPU, so name a target then."""
    try:
        detected = bool(di.detect_gpus(programs=False))
    except ValueError:
        detected = False
    if detected:
        return "pip install 'rocm[device]'"
    targets = sorted(di.AVAILABLE_TARGET_FAMILIES)
    shown = ", ".join(targets[:6]) + (", ..." if len(targets) > 6 else "")
    example = targets[0] if targets else "gfxNNN"
    return (
        f"no GPU is visible, so 'rocm[device]' installs none: pip install "
        f"'rocm[device-{example}]' (this build has {shown})"
    )


class KpackTest(unittest.TestCase):
    site: Path
    host_dirs: list[Path]
    wheels: list[DeviceWheel]

    @classmethod
    def setUpClass(cls) -> None:
        if not di.KPACK_MODE:
            raise unittest.SkipTest("this package set keeps device code inside its libraries")
        libraries = utils.platform_dir("libraries")
        if libraries is None:
            raise unittest.SkipTest(
                "the libraries package is not installed (pip install 'rocm[libraries]')"
            )
        cls.site = libraries.parent
        found = [*find_device_wheels(cls.site), *layered_wheels()]
        cls.wheels = list({w.dist_info: w for w in found}.values())
        if not cls.wheels:
            raise unittest.SkipTest(
                "no rocm-sdk-device-* wheel is installed, so no device code to check; "
                + _device_hint()
            )
        core = utils.platform_dir("core")
        cls.host_dirs = [libraries, *([core] if core is not None else []), *splitter_hosts()]

    def testDeviceArchivesMatchTheirNames(self) -> None:
        """Each device wheel's .kpack files exist and list exactly their file name's target."""
        if not any(w.archives for w in self.wheels):
            self.skipTest("the installed device wheels ship no .kpack archives")
        with KpackChecker(self.site, None, owner_of=di.package_owner) as checker:  # no decoding
            failures = checker.check_device_archives(self.wheels)
        if failures:
            self.fail(
                "\n".join(
                    [f"{len(failures)} device archive problem(s):", *format_failures(failures)]
                )
            )

    def testKernelsFoundForInstalledTargets(self) -> None:
        """Each HIPK wrapper's kernel resolves, and decodes, for every installed target."""
        decompress = zstandard_decompress()
        with KpackChecker(
            self.site, decompress, di.generic_target, layered_archives(), di.package_owner
        ) as checker:
            report = checker.check(self.wheels, self.host_dirs)
        if report.failures:
            self.fail(report.message())
        if not report.binaries:
            self.skipTest("no kpack-transformed binary is installed")
