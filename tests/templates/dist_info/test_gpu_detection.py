"""GPU detection without ROCm, shared by the rocm sdist's build backend and the runtime: KFD's
sysfs topology read as rocm-bootstrap reads it, its variables honoured as it honours them, then
offload-arch; ROCM_SDK_TARGET_FAMILY still first. Expected processors come from the spec's
table of gfx_target_version values (shared/spec/gpu-detection.md), not from the code."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from kpack.owners import owner_table
from tests.templates.dist_info.test_dist_info import (
    clean_env,
    fake_offload_arch,
    load,
    use_offload_arch,
)
from tests.templates.tpl_rendering import context

__all__ = ["clean_env"]  # the fixture, used by name

KPACK = context("kpack", ("gfx90a", "gfx1030", "gfx1100", "gfx1250", "gfx942"))


def _topology(root: Path, nodes: dict[str, dict[str, int]]) -> Path:
    """A fake .../topology/nodes tree: one dir per node with its properties file."""
    for name, props in nodes.items():
        node = root / name
        node.mkdir(parents=True)
        lines = [f"{key} {value}" for key, value in props.items()]
        (node / "properties").write_text("cpu_cores_count 8\n" + "\n".join(lines) + "\n")
    return root


def _gpu(version: int) -> dict[str, int]:
    return {"simd_count": 104, "gfx_target_version": version, "gpu_id": 4321}


@pytest.mark.parametrize(
    ("version", "processor"),
    [
        (90010, "gfx90a"),
        (90402, "gfx942"),
        (100300, "gfx1030"),
        (110000, "gfx1100"),
        (110501, "gfx1151"),
        (120001, "gfx1201"),
        (120500, "gfx1250"),
    ],
)
def test_kfd_versions_name_their_processors(tmp_path: Path, version: int, processor: str) -> None:
    di = load(tmp_path, KPACK)
    assert di.gfx_target_name(version) == processor


def test_kfd_topology_skips_cpus_and_keeps_node_order(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    di = load(tmp_path, KPACK)
    nodes = _topology(
        tmp_path / "nodes",
        {
            "0": {"simd_count": 0, "gfx_target_version": 0},  # the CPU
            "10": _gpu(100300),
            "2": _gpu(90010),
            "3": {"simd_count": 64, "gfx_target_version": 0},  # no version: skipped
        },
    )
    clean_env.setenv("ROCM_SDK_KFD_TOPOLOGY", str(nodes))
    found = di.detect_gpus()
    assert [(g.target, g.source) for g in found] == [("gfx90a", "kfd"), ("gfx1030", "kfd")]
    assert di.determine_target_family() == "gfx90a"


def test_kfd_comes_before_offload_arch(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    di = load(tmp_path, KPACK)
    use_offload_arch(clean_env, di, fake_offload_arch(tmp_path / "bin", "echo gfx1100\n"))
    clean_env.setenv("ROCM_SDK_KFD_TOPOLOGY", str(_topology(tmp_path / "n", {"1": _gpu(90402)})))
    assert di.determine_target_family() == "gfx942"
    clean_env.setenv("ROCM_SDK_KFD_TOPOLOGY", str(tmp_path / "absent"))
    di.CACHED_TARGET_FAMILY = None
    assert [(g.target, g.source) for g in di.detect_gpus()] == [("gfx1100", "offload-arch")]


def test_forced_targets_stand_in_for_the_machine(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    di = load(tmp_path, KPACK)
    clean_env.setenv("ROCM_SDK_KFD_TOPOLOGY", str(_topology(tmp_path / "n", {"1": _gpu(90402)})))
    clean_env.setenv("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", " gfx1030, gfx1030,,gfx90a:xnack+ ")
    assert [g.target for g in di.detect_gpus()] == ["gfx1030", "gfx1030", "gfx90a:xnack+"]
    assert {g.source for g in di.detect_gpus()} == {"forced"}
    assert di.determine_target_family() == "gfx1030"


def test_disabling_wins_over_forcing_and_takes_exactly_1(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    di = load(tmp_path, KPACK)
    clean_env.setenv("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", "gfx942")
    clean_env.setenv("ROCM_BOOTSTRAP_DISABLE_DETECTION", "true")  # not rocm-bootstrap's "1"
    assert [g.target for g in di.detect_gpus()] == ["gfx942"]
    clean_env.setenv("ROCM_BOOTSTRAP_DISABLE_DETECTION", "1")
    assert di.detect_gpus() == []
    assert di.resolve_target_family()[1] == "default"


def test_the_family_variable_still_comes_first(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    di = load(tmp_path, KPACK)
    clean_env.setenv("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", "gfx942")
    clean_env.setenv("ROCM_SDK_TARGET_FAMILY", "gfx1100")
    assert di.resolve_target_family() == ("gfx1100", "env")


def test_gfx1250_strict_is_owned_by_gfx1250(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    di = load(tmp_path, KPACK)
    assert di.package_owner("gfx1250-strict") == "gfx1250"
    assert di.package_owner("gfx90a:xnack-") == "gfx90a"
    clean_env.setenv("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", "gfx1250-strict")
    assert di.determine_target_family() == "gfx1250"
    # the owner table is data, the builder's (manifests/target_owners.yaml)
    assert dict(owner_table().owners) == di.PACKAGE_OWNERS
    assert di.device_targets_for("gfx1250-strict") == di.device_targets_for("gfx1250")


@pytest.mark.parametrize("value", ["gfx942;rm -rf /", "../gfx942", "942", "gfx942\nx"])
def test_a_forced_value_that_is_no_target_list_is_one_error(
    tmp_path: Path, clean_env: pytest.MonkeyPatch, value: str
) -> None:
    di = load(tmp_path, KPACK)
    clean_env.setenv("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", value)
    with pytest.raises(ValueError, match="ROCM_BOOTSTRAP_FORCE_GFX_ARCH=") as info:
        di.detect_gpus()
    assert "\n" not in str(info.value)


def test_a_huge_properties_file_is_read_capped(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    di: ModuleType = load(tmp_path, KPACK)
    node = tmp_path / "nodes" / "1"
    node.mkdir(parents=True)
    junk = "x 1\n" * (1 << 20)  # 4 MiB of lines before the real ones
    (node / "properties").write_text(junk + "simd_count 64\ngfx_target_version 90010\n")
    clean_env.setenv("ROCM_SDK_KFD_TOPOLOGY", str(tmp_path / "nodes"))
    assert di.detect_gpus() == []  # past the cap: not read, so no GPU claimed from it


def test_a_family_named_for_the_processor_is_found(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    """TheRock names some families for one processor (gfx90a-dcgpu, gfx950-dcgpu)."""
    di = load(tmp_path, context("legacy", ("gfx90a-dcgpu", "gfx94X-dcgpu")))
    clean_env.setenv("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", "gfx90a")
    assert di.determine_target_family() == "gfx90a-dcgpu"


#: The shape of rocminfo's agent listing (ROCm 6/7): a CPU agent named by its model, GPU
#: agents named by their processor, each followed by ISA lines that are not agent names.
ROCMINFO = """\
ROCk module is loaded
=====================
HSA Agents
==========
*******
Agent 1
*******
  Name:                    AMD EPYC 7763 64-Core Processor
  Marketing Name:          AMD EPYC 7763 64-Core Processor
  Device Type:             CPU
*******
Agent 2
*******
  Name:                    gfx90a
  Uuid:                    GPU-1234
  Marketing Name:          AMD Instinct MI210
  Device Type:             GPU
  ISA Info:
    ISA 1
      Name:                    amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-
*******
Agent 3
*******
  Name:                    gfx1100
  Device Type:             GPU
*******
Agent 4
*******
  Name:                    gfx90a
  Device Type:             GPU
*** Done ***
"""


def _fake(directory: Path, name: str, body: str) -> Path:
    fake_offload_arch(directory, "")  # the directory, with an offload-arch that prints nothing
    script = directory / name
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return directory


def test_rocminfo_agents_name_the_gpus(tmp_path: Path) -> None:
    di = load(tmp_path, KPACK)
    assert di.parse_rocminfo(ROCMINFO.encode()) == ["gfx90a", "gfx1100"]
    assert di.parse_rocminfo(b"") == []


def test_rocminfo_is_asked_when_offload_arch_finds_nothing(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    di = load(tmp_path, KPACK)
    clean_env.setenv("ROCM_SDK_KFD_TOPOLOGY", str(tmp_path / "absent"))
    (tmp_path / "rocminfo.txt").write_text(ROCMINFO)
    bindir = _fake(tmp_path / "bin", "rocminfo", f"exec /bin/cat {tmp_path / 'rocminfo.txt'}\n")
    use_offload_arch(clean_env, di, bindir)
    clean_env.setenv("PATH", str(bindir))
    found = [(g.target, g.source) for g in di.detect_gpus()]
    assert found == [("gfx90a", "rocminfo"), ("gfx1100", "rocminfo")]
    (bindir / "offload-arch").write_text("#!/bin/sh\necho gfx942\n")
    assert [(g.target, g.source) for g in di.detect_gpus()] == [("gfx942", "offload-arch")]


def test_a_failing_rocminfo_finds_no_gpu(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    di = load(tmp_path, KPACK)
    clean_env.setenv("ROCM_SDK_KFD_TOPOLOGY", str(tmp_path / "absent"))
    bindir = _fake(tmp_path / "bin", "rocminfo", "echo '  Name: gfx90a'\nexit 1\n")
    use_offload_arch(clean_env, di, bindir)
    clean_env.setenv("PATH", str(bindir))
    assert di.detect_gpus() == []


#: kfd_topology.h's HSA_CAP_SRAM_EDCSUPPORTED
SRAM_EDC = 0x04000000


def test_each_gpu_carries_its_agents_isa(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    """The agent's ISA as the ROCm runtime names it: sramecc from the node's capability bit
    (HSA_ENABLE_SRAMECC=0/1 overrides it), xnack on only with HSA_XNACK=1, each only on a
    processor that has the feature; a node without a capability leaves sramecc unknown."""
    di = load(tmp_path, KPACK)
    nodes = {
        "1": {**_gpu(90010), "capability": SRAM_EDC | 0x4000},
        "2": {**_gpu(110000), "capability": SRAM_EDC},
        "3": {**_gpu(90402), "capability": 0},
        "4": _gpu(90010),
    }
    clean_env.setenv("ROCM_SDK_KFD_TOPOLOGY", str(_topology(tmp_path / "n", nodes)))

    def isas() -> list[tuple[str, str, tuple[str, ...]]]:
        return [(g.target, g.isa, g.unknown) for g in di.detect_gpus()]

    assert isas() == [
        ("gfx90a", "gfx90a:sramecc+:xnack-", ()),
        ("gfx1100", "gfx1100", ()),
        ("gfx942", "gfx942:sramecc-:xnack-", ()),
        ("gfx90a", "gfx90a:xnack-", ("sramecc",)),
    ]
    clean_env.setenv("HSA_XNACK", "1")
    clean_env.setenv("HSA_ENABLE_SRAMECC", "0")
    assert [isa for _t, isa, _u in isas()] == [
        "gfx90a:sramecc-:xnack+", "gfx1100", "gfx942:sramecc-:xnack+", "gfx90a:sramecc-:xnack+"
    ]  # fmt: skip
    clean_env.setenv("HSA_XNACK", "true")  # ROCr reads "0" and "1" only
    assert isas()[0][1] == "gfx90a:sramecc-:xnack-"


def test_a_forced_targets_features_are_taken_as_given(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    """Named features stand (HSA_XNACK does not change them); unnamed ones the processor has
    follow the runtime's rules, sramecc unknown without a KFD node."""
    di = load(tmp_path, KPACK)
    clean_env.setenv("HSA_XNACK", "1")
    clean_env.setenv("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", "gfx942:sramecc+:xnack-,gfx90a,gfx1030")
    assert [(g.isa, g.unknown) for g in di.detect_gpus()] == [
        ("gfx942:sramecc+:xnack-", ()),
        ("gfx90a:xnack+", ("sramecc",)),
        ("gfx1030", ()),
    ]
