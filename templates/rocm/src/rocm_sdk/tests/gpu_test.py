"""This machine's GPUs have device code: an install that cannot run on the user's GPU must
never look healthy.

The GPUs come from the shared detector (``ROCM_BOOTSTRAP_FORCE_GFX_ARCH``, KFD's sysfs
topology, then ``offload-arch``), each with its agent's ISA: the processor and the features
the runtime gives it (xnack on only with HSA_XNACK=1, sramecc from the KFD node). The
verdict is :func:`rocm_sdk._coverage.coverage`'s, the one ``rocm-sdk targets`` prints and
``initialize_process`` warns from. Kpack-split sets then go further: every kernel of every
transformed host library must resolve for the agent the way the runtime looks it up (its ISA,
then its generic target); so must those of the host packages (torch) of installed device
wheels of the wheel splitter (``amd-torch-device-gfx90a``), in any set. Legacy sets: the
installed libraries package must be one of the GPU's family (or, for a GPU this build names
no family for, compiled for it: the build's ``dist_amdgpu_targets``). A failure names the
GPU, what is missing and the command that changes it.
"""

from __future__ import annotations

import unittest
from collections.abc import Callable
from pathlib import Path

from .. import _dist_info as di
from .._agent import agent_isas, lookup_strings
from .._coverage import GpuCoverage, coverage, layered_archives, splitter_hosts
from .._kpack_check import KpackChecker
from .._kpack_report import Failure, format_failures
from . import utils

NO_GPU = (
    "no GPU detected (KFD's sysfs topology has no GPU node and offload-arch found none), so "
    "whether the installed device code covers this machine's GPUs could not be checked; "
    f"{di.FORCE_GFX_ARCH_ENV}=gfxNNN checks a GPU you name"
)


def _detected() -> list[di.DetectedGpu]:
    gpus = di.detect_gpus()
    seen: dict[str, di.DetectedGpu] = {}
    for gpu in gpus:
        seen.setdefault(gpu.target, gpu)
    return list(seen.values())


def fix_for(target: str) -> str:
    """The command that installs ``target``'s device code, or why none exists."""
    owner = di.package_owner(target)
    if not di.device_targets_for(owner):
        built = ", ".join(sorted(di.AVAILABLE_TARGET_FAMILIES)) or "none"
        return f"this ROCm {di.__version__} build has no code for {owner} (it has: {built})"
    return f"pip install 'rocm[device-{owner}]=={di.__version__}'"


def _fixes(
    failures: list[Failure],
    hosts: dict[Path, str],
    rel: Callable[[Path], str],
    target: str,
    served: bool,
) -> str:
    """The installs that fix ``failures``: ours (reinstalled where the verdict found our
    device packages serving the GPU, so a damaged or partial install is replaced), or the
    host's extra for binaries of a host package of the wheel splitter
    (``pip install 'torch[device-gfx90a]'``)."""
    roots = {rel(path): name for path, name in hosts.items()}
    owner = di.package_owner(target)
    ours = (
        f"pip install --force-reinstall 'rocm[device-{owner}]=={di.__version__}'"
        if served
        else fix_for(target)
    )
    fixes = []
    for failure in failures:
        host = next((n for r, n in roots.items() if failure.binary.startswith(r + "/")), None)
        fixes.append(f"pip install '{host}[device-{owner}]'" if host else ours)
    return "; ".join(dict.fromkeys(fixes))


def _gpu_lines(
    gpu: di.DetectedGpu,
    verdict: GpuCoverage | None,
    failures: list[Failure],
    hosts: dict[Path, str],
    rel: Callable[[Path], str],
    total: int,
) -> list[str]:
    """The failure lines of one GPU: the package-level verdict when it is not served (then
    its kernels' failures in our libraries say nothing more), and the host libraries that
    miss kernels for its agent."""
    lines = []
    if verdict is not None and not verdict.served_by:
        lines.append(f"{gpu.target} (found by {gpu.source}) has no {verdict.missing}; fix: "
                     f"{verdict.fix}")  # fmt: skip
        roots = tuple(rel(path) + "/" for path in hosts)
        failures = [f for f in failures if f.binary.startswith(roots)]
    if failures:
        shown = " or ".join(agent_isas(gpu))
        agent = f" {shown} in" if shown != gpu.target else ""
        lines.append(
            f"{gpu.target} (found by {gpu.source}) has no device code for{agent} "
            f"{len(failures)} of {total} host libraries; fix: "
            f"{_fixes(failures, hosts, rel, gpu.target, bool(verdict and verdict.served_by))}"
        )
        lines += format_failures(failures[:5])
        if len(failures) > 5:
            lines.append(f"  … and {len(failures) - 5} more")
    return lines


class GpuCoverageTest(unittest.TestCase):
    gpus: list[di.DetectedGpu]
    detection_error: str | None = None

    @classmethod
    def setUpClass(cls) -> None:
        """Detected once; without a GPU the class is skipped (one skip line, not one per
        test)."""
        try:
            cls.gpus = _detected()
        except ValueError as exc:
            cls.gpus, cls.detection_error = [], str(exc)
            return
        if not cls.gpus:
            raise unittest.SkipTest(NO_GPU)

    def setUp(self) -> None:
        if self.detection_error is not None:
            self.fail(self.detection_error)

    def testDeviceCodeForEveryDetectedGpu(self) -> None:
        """Kpack-split: each detected GPU finds every kernel of the installed libraries, and
        of every host package with device wheels of the wheel splitter (torch)."""
        libraries = utils.platform_dir("libraries") if di.KPACK_MODE else None
        core = utils.platform_dir("core")
        hosts = splitter_hosts()
        if libraries is None and not hosts:
            if not di.KPACK_MODE:
                self.skipTest("legacy package set: see testLibrariesForEveryDetectedGpu")
            self.skipTest("the libraries package is not installed (pip install 'rocm[libraries]')")
        dirs = [*([libraries, *([core] if core else [])] if libraries else []), *hosts]
        lines = []
        site = libraries.parent if libraries else next(iter(hosts)).parent
        verdicts = {e.gpu.target: e for e in coverage(self.gpus)} if libraries else {}
        with KpackChecker(
            site, None, di.generic_target, layered_archives(), di.package_owner
        ) as checker:
            refs, unreadable = checker.transformed(dirs)
            if unreadable:
                lines += format_failures(unreadable)
            for gpu in self.gpus:
                failures = checker.check_gpu(refs, agent_isas(gpu), lookup_strings)
                lines += _gpu_lines(gpu, verdicts.get(gpu.target), failures, hosts, checker.rel,
                                    len(refs))  # fmt: skip
        if lines:
            self.fail("\n".join(lines))

    def testLibrariesForEveryDetectedGpu(self) -> None:
        """Legacy: the installed libraries package is one for each detected GPU's family."""
        if di.KPACK_MODE:
            self.skipTest("kpack-split package set: see testDeviceCodeForEveryDetectedGpu")
        installed = [f for f in di.AVAILABLE_TARGET_FAMILIES if utils.platform_dir("libraries", f)]
        if not installed:
            self.skipTest("no libraries package is installed (pip install 'rocm[libraries]')")
        lines, unknown = [], []
        for entry in coverage(self.gpus):
            if entry.served_by:
                continue
            if not entry.checked:  # no family named for it, no list of compiled targets
                unknown.append(entry.gpu.target)
                continue
            lines.append(
                f"{entry.gpu.target} (found by {entry.gpu.source}) is not served by the "
                f"installed libraries ({', '.join(installed)}); fix: {entry.fix}"
            )
        if lines:
            self.fail("\n".join(lines))
        if unknown:
            self.skipTest(
                f"no target family of this build is named for {', '.join(unknown)}, so whether "
                f"the installed libraries ({', '.join(installed)}) serve it could not be checked"
            )
