"""One feature-aware verdict on this machine's GPUs (issue 33): ``rocm-sdk targets``,
``initialize_process()`` and ``rocm-sdk test`` agree on every simulated GPU, and are right
about its features.

Machines are fake KFD topologies (``ROCM_SDK_KFD_TOPOLOGY``); the installation is Debian's
librocrand transformed by our engine, with device wheels carrying chosen code objects (real
ones, or gfx90a:xnack-'s relabeled: the checks compare bytes and sizes, not ISAs). The oracle
is written here, apart from the runtime: the agent's ISA as ROCr decides it (sramecc from
the node's HSA_CAP_SRAM_EDCSUPPORTED bit, xnack on only with HSA_XNACK=1, on processors that
rocm-bootstrap says support xnack), and the loader's rule (a feature a code object names
must be the agent's). Every fix a command prints is applied, and must change the verdict.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from rocm_bootstrap import _platform as rb_platform
from rocm_bootstrap import detect as rb_detect
from rocm_bootstrap.targets import XnackMode, lookup_target

from kpack.archive import KernelInput, write_kpack
from kpack.transform import extract_kernels
from tests.templates.dist_info.test_dist_info import load
from tests.templates.rocm_sdk.test_kpack_check import BINARY, KEY, LIBS, VERSION, Inputs, inputs
from tests.templates.tpl_kit import fake_install
from tests.templates.tpl_rendering import context

__all__ = ["inputs"]  # the module fixture, used by name

pytestmark = pytest.mark.real

#: kfd_topology.h: HSA_CAP_SRAM_EDCSUPPORTED, SRAM ECC enabled on the GFX block
SRAM_EDC = 1 << 26
#: processors with the sramecc target feature (LLVM AMDGPUUsage's processor table)
SRAMECC = {"gfx906", "gfx908", "gfx90a", "gfx940", "gfx941", "gfx942", "gfx950"}
GFX90A, GFX1030 = 90010, 100300


def _topology(root: Path, gpus: list[tuple[int, int]]) -> Path:
    """Node 0 a CPU, then one node per (gfx_target_version, capability)."""
    nodes = [(0, 0, 0), *((64, version, cap) for version, cap in gpus)]
    for number, (simds, version, cap) in enumerate(nodes):
        (root / str(number)).mkdir(parents=True)
        text = f"cpu_cores_count 0\nsimd_count {simds}\ngfx_target_version {version}\n"
        (root / str(number) / "properties").write_text(text + f"capability {cap}\n")
    return root


def oracle_isa(processor: str, capability: int | None, env: Mapping[str, str]) -> str:
    """The agent's ISA as ROCr names it, by the rules above (not the runtime's code)."""
    parts = [processor]
    if processor in SRAMECC and capability is not None:
        on = env.get("HSA_ENABLE_SRAMECC", "1" if capability & SRAM_EDC else "0") == "1"
        parts.append("sramecc+" if on else "sramecc-")
    if lookup_target(processor).xnack == XnackMode.SUPPORTED:
        parts.append("xnack+" if env.get("HSA_XNACK") == "1" else "xnack-")
    return ":".join(parts)


def oracle_loads(code: str, isa: str) -> bool:
    """The loader's rule: same processor, and every feature the code object names is the
    agent's (no generic target serves gfx90a or gfx1030 in this build)."""
    processor, *features = code.split(":")
    agent, *active = isa.split(":")
    return processor == agent and all(f in active for f in features)


# --- the installation --------------------------------------------------------------------


def _archive(inputs: Inputs, target: str, dest: Path) -> bytes:
    """rand_lib's archive for ``target``: the engine's, or gfx90a:xnack-'s code relabeled."""
    if ("zstd-per-kernel", target) in inputs.archives:
        return inputs.archives[("zstd-per-kernel", target)].read_bytes()
    data = next(k for k in extract_kernels(inputs.original) if k.target == "gfx90a:xnack-")
    write_kpack(dest, [KernelInput(KEY, target, data.read())], group_name="rand_lib",
                gfx_arch_family=target)  # fmt: skip
    return dest.read_bytes()


def install_device(inputs: Inputs, site: Path, base: str, targets: tuple[str, ...]) -> None:
    files = {
        f"{LIBS}/.kpack/rand_lib_{t}.kpack": _archive(inputs, t, site.parent / f"{t}.kpack")
        for t in targets
    }
    fake_install(site, f"rocm-sdk-device-{base}", VERSION, files)


def make_site(inputs: Inputs, root: Path, code: Mapping[str, tuple[str, ...]]) -> Path:
    """rocm_sdk, core (TheRock's dist_info.json), the libraries package with the transformed
    librocrand, and one device wheel per base target carrying ``code[base]``."""
    site = root / "site"
    shutil.copytree(inputs.rocm_src / "rocm_sdk", site / "rocm_sdk")
    doc = b'{"dist_amdgpu_targets": "gfx90a;gfx1030"}'
    fake_install(site, "rocm-sdk-core", VERSION, {
        "_rocm_sdk_core/__init__.py": b"", "_rocm_sdk_core/share/therock/dist_info.json": doc,
    })  # fmt: skip
    fake_install(site, "rocm-sdk-libraries", VERSION, {f"{LIBS}/__init__.py": b""})
    (site / LIBS / "lib").mkdir()
    shutil.copy2(inputs.transformed, site / BINARY)
    for base, targets in code.items():
        install_device(inputs, site, base, targets)
    return site


# --- the three commands ------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    served: bool
    missing: str | None = None  # what the command says is missing
    fix: str | None = None


def _run(site: Path, argv: list[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ROCM_", "HSA_", "PYTHON"))}
    base |= {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", **env}
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=base,
                          timeout=120)  # fmt: skip


_NOT_SERVED = re.compile(r"NO (.*? installed(?: \([^)]*\))?); (.*)")


def targets_verdicts(site: Path, env: Mapping[str, str]) -> dict[str, Verdict]:
    """``rocm-sdk targets``: stdout the build's target list only, a line per GPU on stderr."""
    proc = _run(site, ["-m", "rocm_sdk", "targets"], env)
    assert proc.returncode == 0 and proc.stdout == "gfx90a;gfx1030\n", proc
    out = {}
    for line in proc.stderr.splitlines():
        found = re.fullmatch(r"rocm: GPU (\S+) \(found by \w+\): (.*)", line)
        if found is None:
            continue
        gpu, text = found.groups()
        if text.startswith("device code from "):
            out[gpu] = Verdict(True)
        else:
            parts = _NOT_SERVED.fullmatch(text)
            assert parts is not None, line
            out[gpu] = Verdict(False, *parts.groups())
    return out


def check_init(site: Path, env: Mapping[str, str], verdicts: Mapping[str, Verdict]) -> None:
    """initialize_process() (called twice): one warning per unserved GPU, with the same
    missing code and fix; silence for served ones."""
    code = "import rocm_sdk; rocm_sdk.initialize_process(); rocm_sdk.initialize_process()"
    proc = _run(site, ["-c", code], env)
    assert proc.returncode == 0, proc.stderr
    expected = [
        f"rocm_sdk: warning: GPU {gpu} has no {v.missing}, so its kernels will not load; "
        f"{v.fix} (set ROCM_SDK_NO_GPU_CHECK=1 to silence)"
        for gpu, v in verdicts.items()
        if not v.served
    ]
    assert proc.stderr.splitlines() == expected, proc.stderr


def check_selftest(site: Path, env: Mapping[str, str], verdicts: Mapping[str, Verdict]) -> None:
    """The GPU self-test of ``rocm-sdk test``: fails exactly when a GPU is not served,
    saying what is missing and the same fix."""
    proc = _run(site, ["-m", "unittest", "-v", "rocm_sdk.tests.gpu_test"], env)
    failed = [gpu for gpu, v in verdicts.items() if not v.served]
    assert (proc.returncode != 0) == bool(failed), proc.stderr
    for gpu in failed:
        v = verdicts[gpu]
        assert f"{gpu} (found by " in proc.stderr
        assert f") has no {v.missing}; fix: {v.fix}" in proc.stderr, proc.stderr


def verdicts(site: Path, env: Mapping[str, str]) -> dict[str, Verdict]:
    """The three commands' verdicts, checked to agree; targets' returned."""
    found = targets_verdicts(site, env)
    check_init(site, env, found)
    check_selftest(site, env, found)
    return found


# --- simulated machines ------------------------------------------------------------------


@dataclass(frozen=True)
class Machine:
    name: str
    gpus: list[tuple[int, int]]  # KFD nodes: (gfx_target_version, capability)
    code: dict[str, tuple[str, ...]]  # installed device wheels: base -> archive targets
    env: dict[str, str]
    fix: str | None  # what the unserved GPU's fix must name (None: all served)


MACHINES = [
    Machine("xnack+ code, xnack off", [(GFX90A, SRAM_EDC)], {"gfx90a": ("gfx90a:xnack+",)},
            {}, "HSA_XNACK=1"),
    Machine("xnack- code, xnack on", [(GFX90A, SRAM_EDC)], {"gfx90a": ("gfx90a:xnack-",)},
            {"HSA_XNACK": "1"}, "HSA_XNACK=0"),
    Machine("both xnack variants", [(GFX90A, SRAM_EDC)],
            {"gfx90a": ("gfx90a:xnack+", "gfx90a:xnack-")}, {}, None),
    Machine("code for any xnack, xnack on", [(GFX90A, 0)], {"gfx90a": ("gfx90a",)},
            {"HSA_XNACK": "1"}, None),
    Machine("sramecc- code on an ECC GPU", [(GFX90A, SRAM_EDC)],
            {"gfx90a": ("gfx90a:sramecc-",)}, {}, "HSA_ENABLE_SRAMECC=0"),
    Machine("sramecc- code, ECC off", [(GFX90A, 0)], {"gfx90a": ("gfx90a:sramecc-",)}, {},
            None),
    Machine("two GPU kinds", [(GFX1030, 0), (GFX90A, SRAM_EDC)],
            {"gfx90a": ("gfx90a:xnack+",), "gfx1030": ("gfx1030",)}, {}, "HSA_XNACK=1"),
    Machine("a GPU without its device wheel", [(GFX1030, 0)], {"gfx90a": ("gfx90a:xnack-",)},
            {}, f"pip install 'rocm[device-gfx1030]=={VERSION}'"),
]  # fmt: skip


def _apply(fix: str, env: dict[str, str], install: Callable[[str], None]) -> dict[str, str]:
    """The environment after running what ``fix`` names: a variable setting, or the
    install of a device package."""
    setting = re.search(r"run with (\w+)=(\S+)", fix)
    if setting is not None:
        return {**env, setting.group(1): setting.group(2)}
    package = re.search(r"pip install 'rocm\[device-(\w+)\]", fix)
    assert package is not None, fix
    install(package.group(1))
    return env


@pytest.mark.parametrize("machine", MACHINES, ids=[m.name for m in MACHINES])
def test_the_three_commands_agree_and_are_right(
    inputs: Inputs, tmp_path: Path, machine: Machine
) -> None:
    site = make_site(inputs, tmp_path, machine.code)
    env = {**machine.env, "ROCM_SDK_KFD_TOPOLOGY": str(_topology(tmp_path / "kfd", machine.gpus))}
    found = verdicts(site, env)
    processors = [f"gfx{v // 10000}{v // 100 % 100:x}{v % 100:x}" for v, _cap in machine.gpus]
    assert sorted(found) == sorted(processors)
    for processor, (_version, cap) in zip(processors, machine.gpus, strict=True):
        isa = oracle_isa(processor, cap, env)
        code = machine.code.get(processor, ())
        assert found[processor].served == any(oracle_loads(c, isa) for c in code), isa
    unserved = [v for v in found.values() if not v.served]
    assert bool(unserved) == (machine.fix is not None)
    for v in unserved:  # the fix names the right command, and it changes the outcome
        assert machine.fix is not None and v.fix is not None and machine.fix in v.fix, v
        fixed_env = _apply(v.fix, env, lambda base: install_device(
            inputs, site, base, (base,)))  # fmt: skip
        assert all(x.served for x in verdicts(site, fixed_env).values())


def test_a_forced_value_with_features_is_taken_as_given(inputs: Inputs, tmp_path: Path) -> None:
    """What offload-arch prints, forced: its xnack- stands whatever HSA_XNACK says; the fix
    names the variable for the real GPU and the forced value that checks it."""
    site = make_site(inputs, tmp_path, {"gfx90a": ("gfx90a:xnack+",)})
    forced = {"ROCM_BOOTSTRAP_FORCE_GFX_ARCH": "gfx90a:sramecc+:xnack-", "HSA_XNACK": "1"}
    found = verdicts(site, forced)
    verdict = found["gfx90a:sramecc+:xnack-"]
    assert not verdict.served
    assert verdict.missing == (
        "device code for gfx90a:sramecc+:xnack- installed (rocm-sdk-device-gfx90a has "
        "gfx90a:xnack+)"
    )
    assert verdict.fix == (
        "it loads with xnack on (HSA_XNACK=1 on that GPU; check it with "
        "ROCM_BOOTSTRAP_FORCE_GFX_ARCH=gfx90a:sramecc+:xnack+)"
    )
    served = verdicts(site, {"ROCM_BOOTSTRAP_FORCE_GFX_ARCH": "gfx90a:sramecc+:xnack+"})
    assert served["gfx90a:sramecc+:xnack+"].served
    # a bare forced value: xnack as the runtime sets it, sramecc unknown (either counts)
    bare = verdicts(site, {"ROCM_BOOTSTRAP_FORCE_GFX_ARCH": "gfx90a", "HSA_XNACK": "1"})
    assert bare["gfx90a"].served
    assert not verdicts(site, {"ROCM_BOOTSTRAP_FORCE_GFX_ARCH": "gfx90a"})["gfx90a"].served


# --- detection against rocm-bootstrap's --------------------------------------------------

#: KFD gfx_target_version of processors rocm-bootstrap knows, with and without ECC
KNOWN = [90010, 90402, 90500, 100300, 110000, 110501, 120001, 120500, 90008, 100100]


def _node(gpu: rb_detect.DetectedGpu) -> int:
    return int(gpu.node_id)


@pytest.mark.parametrize("xnack", ["", "0", "1", "yes"])
def test_detection_matches_rocm_bootstrap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, xnack: str
) -> None:
    """The same processors as rocm-bootstrap's detector, by node number; an xnack feature
    exactly where rocm-bootstrap says the processor supports xnack (off unless HSA_XNACK is
    exactly 1, as ROCr reads it; gfx1250's always-on xnack is no target feature: ROCr names
    its agent bare), and sramecc as the node's capability says."""
    gpus = [(v, SRAM_EDC if i % 2 else 0) for i, v in enumerate(KNOWN)]
    root = _topology(tmp_path / "kfd", gpus)
    monkeypatch.setattr(rb_platform, "KFD_TOPOLOGY", root)
    for name in ("ROCM_BOOTSTRAP_DISABLE_DETECTION", "ROCM_BOOTSTRAP_FORCE_GFX_ARCH",
                 "HSA_ENABLE_SRAMECC"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ROCM_SDK_KFD_TOPOLOGY", str(root))
    monkeypatch.setenv("HSA_XNACK", xnack)
    theirs = rb_detect.detect_gpus()
    di = load(tmp_path, context("kpack", ("gfx90a",)))
    ours = di.detect_gpus()
    # rocm-bootstrap lists nodes in name order ('10' before '2'), we in number order
    assert [g.target for g in ours] == [g.target.name for g in sorted(theirs, key=_node)]
    for gpu, (_version, cap) in zip(ours, gpus, strict=True):
        assert gpu.source == "kfd" and gpu.unknown == ()
        support = lookup_target(gpu.target).xnack
        assert (":xnack" in gpu.isa) == (support == XnackMode.SUPPORTED), gpu
        assert gpu.isa == oracle_isa(gpu.target, cap, {"HSA_XNACK": xnack}), gpu


def test_an_archive_missing_kernels_fails_the_self_test_with_a_reinstall(
    inputs: Inputs, tmp_path: Path
) -> None:
    """The device wheel is there and its archive names the agent's target, but lacks the
    library's kernel: targets and initialize_process (package level) see it served; the
    self-test, which resolves every kernel, fails and names the reinstall."""
    site = make_site(inputs, tmp_path, {})
    data = next(k for k in extract_kernels(inputs.original) if k.target == "gfx90a:xnack-")
    archive = tmp_path / "partial.kpack"
    write_kpack(archive, [KernelInput("other#0", "gfx90a:xnack-", data.read())],
                group_name="rand_lib", gfx_arch_family="gfx90a:xnack-")  # fmt: skip
    fake_install(site, "rocm-sdk-device-gfx90a", VERSION,
                 {f"{LIBS}/.kpack/rand_lib_gfx90a:xnack-.kpack": archive.read_bytes()})  # fmt: skip
    env = {"ROCM_SDK_KFD_TOPOLOGY": str(_topology(tmp_path / "kfd", [(GFX90A, SRAM_EDC)]))}
    assert targets_verdicts(site, env) == {"gfx90a": Verdict(True)}
    check_init(site, env, {"gfx90a": Verdict(True)})
    proc = _run(site, ["-m", "unittest", "rocm_sdk.tests.gpu_test"], env)
    assert proc.returncode != 0
    assert (
        "gfx90a (found by kfd) has no device code for gfx90a:sramecc+:xnack- in 1 of 1 host "
        f"libraries; fix: pip install --force-reinstall 'rocm[device-gfx90a]=={VERSION}'"
    ) in proc.stderr, proc.stderr
