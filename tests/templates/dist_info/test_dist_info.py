"""The generated _dist_info.py: values, naming, target family selection, reproducibility."""

from __future__ import annotations

import importlib.util
import os
import random
import stat
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.templates.tpl_rendering import MALICIOUS, SAMPLE_CONTEXTS, TEMPLATES, context, render

REPO = Path(__file__).resolve().parents[3]


def load(tmp_path: Path, ctx: dict[str, Any], name: str = "_dist_info") -> ModuleType:
    path = tmp_path / f"{name}.py"
    path.write_text(render("common/_dist_info.py.j2", ctx), encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"tpl_{name}_{id(ctx)}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through it
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for var in (
        "ROCM_SDK_TARGET_FAMILY",
        "ROCM_SDK_VERBOSE",
        "ROCM_SDK_NO_DEVEL_EXPANSION",
        "ROCM_BOOTSTRAP_DISABLE_DETECTION",
        "ROCM_BOOTSTRAP_FORCE_GFX_ARCH",
        "HSA_XNACK",
        "HSA_ENABLE_SRAMECC",
    ):
        monkeypatch.delenv(var, raising=False)
    # this machine's own GPUs (if any) never take part: detection sees an empty topology
    monkeypatch.setenv("ROCM_SDK_KFD_TOPOLOGY", "/nonexistent/kfd/topology/nodes")
    return monkeypatch


def fake_offload_arch(directory: Path, body: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "offload-arch"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return directory


def use_offload_arch(monkeypatch: pytest.MonkeyPatch, di: ModuleType, directory: Path) -> None:
    """Make the fake the one found first (in the place of the scripts directory)."""
    monkeypatch.setattr(di, "_scripts_dir", lambda: str(directory))


@pytest.mark.parametrize("name", sorted(SAMPLE_CONTEXTS))
def test_values_roundtrip(tmp_path: Path, name: str) -> None:
    ctx = SAMPLE_CONTEXTS[name]
    di = load(tmp_path, ctx)
    assert di.__version__ == ctx["version"]
    assert ctx["nonce"] == di.PY_PACKAGE_SUFFIX_NONCE
    assert di.KPACK_MODE is ctx["kpack_mode"]
    assert sorted(ctx["available_target_families"]) == di.AVAILABLE_TARGET_FAMILIES
    assert ctx["default_target_family"] == di.DEFAULT_TARGET_FAMILY
    assert di.THIS_PACKAGE_ENTRY == "meta"
    assert sorted(di.ALL_PACKAGES) == sorted(p["logical_name"] for p in ctx["packages"])
    assert list(di.ALL_LIBRARIES) == sorted(lib["shortname"] for lib in ctx["libraries"])
    hipconfig = di.CONSOLE_SCRIPTS["hipconfig"]
    assert hipconfig.probe_args == ("--version",) and hipconfig.expand_devel is True
    assert di.CONSOLE_SCRIPTS["amd-smi"].probe_args is None
    assert di.ALL_LIBRARIES["rocdxg"].optional is True
    assert di.ALL_LIBRARIES["rocm_sysdeps_liblzma"].posix_relpath == "lib/rocm_sysdeps/lib"


def test_malicious_values_stay_inert(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    di = load(tmp_path, SAMPLE_CONTEXTS["malicious"])
    assert not (tmp_path / "pwned").exists()
    assert di.__version__ == MALICIOUS
    assert di.PY_PACKAGE_SUFFIX_NONCE == MALICIOUS
    assert di.AVAILABLE_TARGET_FAMILIES == [MALICIOUS]
    # Also rendered through every other template that takes these values.
    for template in ("metadata/METADATA.j2", "metadata/PKG-INFO.j2"):
        text = render(
            template,
            {
                "name": "rocm",
                "version": MALICIOUS,
                "summary": "s\nX: y",
                "description": "",
                "requires_dist": [],
                "provides_extra": [],
                "dynamic": [],
            },
        )
        assert "\nX: y" not in text


def test_legacy_naming(tmp_path: Path) -> None:
    di = load(tmp_path, context("legacy", ("gfx94X-dcgpu", "gfx120X-all"), nonce="_v7"))
    libs = di.ALL_PACKAGES["libraries"]
    assert libs.is_target_specific
    assert libs.dist_name("gfx94X-dcgpu") == "rocm-sdk-libraries-gfx94X-dcgpu"
    assert libs.pure_package_name("gfx94X-dcgpu") == "rocm_sdk_libraries_gfx94X-dcgpu"
    assert libs.platform_package_name("gfx94X-dcgpu") == "_rocm_sdk_libraries_gfx94X_dcgpu_v7"
    assert libs.requirement("gfx120X-all") == "rocm-sdk-libraries-gfx120X-all==7.1.0"
    assert di.platform_package_name("core") == "_rocm_sdk_core_v7"
    assert di.pure_package_name("devel") == "rocm_sdk_devel"
    assert di.dist_package_name("profiler") == "rocm-profiler"
    assert libs.get_py_package_name("gfx94X-dcgpu") == "_rocm_sdk_libraries_gfx94X_dcgpu_v7"
    with pytest.raises(ValueError, match="target specific"):
        libs.dist_name()
    with pytest.raises(ValueError):
        di.platform_package_name("meta")


def test_kpack_naming(tmp_path: Path) -> None:
    di = load(tmp_path, SAMPLE_CONTEXTS["kpack"])
    device = di.ALL_PACKAGES["device"]
    assert device.dist_name("gfx942:xnack+") == "rocm-sdk-device-gfx942"
    assert device.pure_package_name("gfx942") is None
    assert device.platform_package_name("gfx942") == "_rocm_sdk_libraries_v7"
    assert di.platform_package_name("libraries") == "_rocm_sdk_libraries_v7"
    assert not di.ALL_PACKAGES["libraries"].is_target_specific
    assert di.base_target("gfx942:sramecc+:xnack-") == "gfx942"


def test_device_package_uses_libraries_py_package_name(tmp_path: Path) -> None:
    ctx = {
        **SAMPLE_CONTEXTS["kpack"],
        "this_package_entry": "device",
        "this_target_family": "gfx942",
        "libraries_py_package_name": "_rocm_sdk_libraries_v7",
    }
    di = load(tmp_path, ctx)
    assert di.LIBRARIES_PY_PACKAGE_NAME == "_rocm_sdk_libraries_v7"
    assert di.THIS_TARGET_FAMILY == "gfx942"
    assert di.platform_package_name("device", "gfx942") == "_rocm_sdk_libraries_v7"


def test_env_target_family(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    di = load(tmp_path, SAMPLE_CONTEXTS["legacy2"])
    clean_env.setenv("ROCM_SDK_TARGET_FAMILY", "gfx120X-all")
    assert di.determine_target_family() == "gfx120X-all"
    assert di.resolve_target_family() == ("gfx120X-all", "env")
    clean_env.setenv("ROCM_SDK_TARGET_FAMILY", "gfx94X-dcgpu")
    assert di.determine_target_family() == "gfx120X-all"  # cached


def test_env_target_family_unavailable(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    di = load(tmp_path, SAMPLE_CONTEXTS["kpack"])
    clean_env.setenv("ROCM_SDK_TARGET_FAMILY", "gfx1100")
    with pytest.raises(ValueError, match="gfx1100"):
        di.determine_target_family()
    clean_env.setenv("ROCM_SDK_TARGET_FAMILY", "gfx942:xnack+")
    assert di.determine_target_family() == "gfx942:xnack+"


def test_discovery_visits_arches_in_printed_order(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    di = load(tmp_path, context("legacy", ("gfx94X-dcgpu", "gfx110X-all", "gfx120X-all")))
    bindir = fake_offload_arch(tmp_path / "bin", 'printf "gfx1201\\ngfx942\\ngfx1100\\n"\n')
    use_offload_arch(clean_env, di, bindir)
    assert di.query_offload_arch() == ["gfx1201", "gfx942", "gfx1100"]
    assert di.resolve_target_family() == ("gfx120X-all", "discovered")


def test_discovery_prefers_legacy_family_then_bare_arch(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    di = load(tmp_path, context("kpack", ("gfx942", "gfx1201")))
    bindir = fake_offload_arch(tmp_path / "bin", "echo gfx90a; echo gfx942; echo gfx1201\n")
    use_offload_arch(clean_env, di, bindir)
    assert di.determine_target_family() == "gfx942"
    assert di.candidate_target_families("gfx942")[:5] == [
        "gfx94X-all",
        "gfx94X-dgpu",
        "gfx94X-igpu",
        "gfx94X-dcgpu",
        "gfx942",
    ]


def test_discovery_disables_devel_expansion(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    di = load(tmp_path, context("kpack", ("gfx942", "gfx1201")))
    body = 'if [ "$ROCM_SDK_NO_DEVEL_EXPANSION" = 1 ]; then echo gfx1201; else echo gfx942; fi\n'
    use_offload_arch(clean_env, di, fake_offload_arch(tmp_path / "bin", body))
    assert di.determine_target_family() == "gfx1201"
    assert "ROCM_SDK_NO_DEVEL_EXPANSION" not in os.environ


def test_discovery_scripts_dir_comes_first_on_path(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    di = load(tmp_path, context("kpack", ("gfx942", "gfx1201")))
    later = fake_offload_arch(tmp_path / "later", "echo gfx942\n")
    first = fake_offload_arch(tmp_path / "first", "echo gfx1201\n")
    clean_env.setenv("PATH", f"{later}{os.pathsep}{os.environ['PATH']}")
    use_offload_arch(clean_env, di, first)
    assert di.determine_target_family() == "gfx1201"


def test_discovery_errors_fall_back_quietly(
    tmp_path: Path, clean_env: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    di = load(tmp_path, context("kpack", ("gfx942", "gfx1201")))
    use_offload_arch(clean_env, di, fake_offload_arch(tmp_path / "bin", "echo boom >&2; exit 3\n"))
    assert di.resolve_target_family() == ("gfx1201", "default")
    assert capfd.readouterr().err == ""


def test_discovery_verbose_diagnostics(
    tmp_path: Path, clean_env: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    di = load(tmp_path, context("kpack", ("gfx942",)))
    use_offload_arch(clean_env, di, fake_offload_arch(tmp_path / "bin", "echo boom >&2; exit 3\n"))
    clean_env.setenv("ROCM_SDK_VERBOSE", "1")
    assert di.query_offload_arch() == []
    assert "exited 3" in capfd.readouterr().err


def test_missing_offload_arch(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    di = load(tmp_path, context("legacy", ("gfx94X-dcgpu",)))
    use_offload_arch(clean_env, di, tmp_path / "empty")
    clean_env.setenv("PATH", str(tmp_path / "empty"))
    assert di.resolve_target_family() == ("gfx94X-dcgpu", "default")


def test_no_default_raises(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    ctx = {**context("kpack", ()), "default_target_family": None}
    di = load(tmp_path, ctx)
    use_offload_arch(clean_env, di, tmp_path / "empty")
    clean_env.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ValueError, match="no default target family"):
        di.determine_target_family()


def test_output_is_sorted_whatever_the_input_order(tmp_path: Path) -> None:
    ctx = SAMPLE_CONTEXTS["kpack"]
    shuffled = {**ctx}
    rng = random.Random(7)
    for key in ("available_target_families", "packages", "libraries", "console_scripts"):
        items = list(ctx[key])
        rng.shuffle(items)
        shuffled[key] = items
    assert render("common/_dist_info.py.j2", shuffled) == render("common/_dist_info.py.j2", ctx)


RENDER_ALL = r"""
import sys
sys.path.insert(0, sys.argv[1])
from tests.templates.tpl_rendering import SAMPLE_CONTEXTS, render
for name in sorted(SAMPLE_CONTEXTS):
    sys.stdout.write(render("common/_dist_info.py.j2", SAMPLE_CONTEXTS[name]))
"""


def test_byte_identical_across_hash_seeds() -> None:
    outputs = set()
    for seed in ("0", "1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        proc = subprocess.run(
            [sys.executable, "-c", RENDER_ALL, str(REPO)], env=env, capture_output=True, check=True
        )
        outputs.add(proc.stdout)
    assert len(outputs) == 1


def test_rendered_module_passes_ruff(tmp_path: Path) -> None:
    ruff = subprocess.run([sys.executable, "-m", "ruff", "--version"], capture_output=True)
    if ruff.returncode != 0:
        pytest.skip("ruff is not installed")
    for name, ctx in SAMPLE_CONTEXTS.items():
        (tmp_path / f"di_{name}.py").write_text(render("common/_dist_info.py.j2", ctx))
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--select", "E9,F", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (TEMPLATES / "common" / "_dist_info.py.j2").is_file()


@pytest.mark.parametrize(
    ("context", "value", "expected"),
    [
        ("kpack", "gfx942:sramecc+:xnack-", "gfx942"),  # what offload-arch prints
        ("kpack", "gfx942", "gfx942"),
        ("legacy2", "gfx1201", "gfx120X-all"),
        ("legacy2", "gfx942:xnack+", "gfx94X-dcgpu"),
    ],
)
def test_env_target_with_features_or_bare_arch_resolves_to_its_family(
    tmp_path: Path, clean_env: pytest.MonkeyPatch, context: str, value: str, expected: str
) -> None:
    di = load(tmp_path, SAMPLE_CONTEXTS[context])
    assert (expected in di.AVAILABLE_TARGET_FAMILIES and value != expected) or value == expected
    clean_env.setenv("ROCM_SDK_TARGET_FAMILY", value)
    assert di.resolve_target_family() == (expected, "env")


def test_discovery_falls_back_to_the_generic_target(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    """A gfx1151 agent (no gfx1151 device package) runs gfx11-generic code, as the ROCm
    runtime would; a gfx942 agent gets its own ISA first, then its generic."""
    di = load(tmp_path, context("kpack", ("gfx942", "gfx9-4-generic", "gfx11-generic")))
    use_offload_arch(clean_env, di, fake_offload_arch(tmp_path / "bin", "echo gfx1151\n"))
    assert di.resolve_target_family() == ("gfx11-generic", "discovered")
    assert di.device_targets_for("gfx1151") == ["gfx11-generic"]
    assert di.device_targets_for("gfx942:sramecc+:xnack-") == ["gfx942", "gfx9-4-generic"]
    assert di.device_targets_for("gfx950") == ["gfx9-4-generic"]
    assert di.device_targets_for("gfx90a") == []
    assert di.generic_target("gfx1036") == "gfx10-3-generic"
    assert di.generic_target("gfx9-4-generic") is None
    assert "gfx1153" in di.served_processors() and "gfx1030" not in di.served_processors()


def test_env_processor_served_only_by_a_generic(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    di = load(tmp_path, context("kpack", ("gfx90a", "gfx12-generic")))
    clean_env.setenv("ROCM_SDK_TARGET_FAMILY", "gfx1201")
    assert di.resolve_target_family() == ("gfx12-generic", "env")
    di.CACHED_TARGET_FAMILY = None
    clean_env.setenv("ROCM_SDK_TARGET_FAMILY", "gfx1100")
    with pytest.raises(ValueError, match="gfx1100"):
        di.resolve_target_family()
