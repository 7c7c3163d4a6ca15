"""The selector's choice is visible: the wheel pip/uv build from the rocm sdist records the
target family it resolved, and where from (env, offload-arch, the default)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from tests.templates.backend.test_hooks import CALL_HOOK, build, metadata_of
from tests.templates.tpl_kit import fake_install, rocm_sdk_tree
from tests.templates.tpl_rendering import SAMPLE_CONTEXTS, context


def test_the_built_wheel_records_its_target_family(tmp_path: Path) -> None:
    ctx = SAMPLE_CONTEXTS["legacy1"]
    family = ctx["available_target_families"][0] if "available_target_families" in ctx else None
    wheel, members = build(tmp_path / "a", ctx, family=family or "gfx94X-dcgpu")
    chosen = json.loads(members["rocm_sdk/_selection.json"])
    assert chosen["target_family"] == (family or "gfx94X-dcgpu")
    assert chosen["source"] == "env"
    _, _, text = metadata_of(members)
    assert f"resolved for GPU target family `{chosen['target_family']}`" in text
    assert "ROCM_SDK_TARGET_FAMILY" in text and "--no-cache-dir" in text
    with zipfile.ZipFile(wheel) as zf:
        record = zf.read(next(n for n in zf.namelist() if n.endswith("RECORD"))).decode()
    assert "rocm_sdk/_selection.json," in record


KPACK = context("kpack", ("gfx90a", "gfx1030"), version="7.1.0")


def _build(tmp_path: Path, ctx: dict[str, Any], **env: str) -> dict[str, bytes]:
    """The wheel pip builds from the rocm sdist on a machine whose GPUs ``env`` names
    (rocm-bootstrap's variables or a fake KFD topology; never this machine's own)."""
    tree = rocm_sdk_tree(ctx, tmp_path / "rocm")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ROCM_")}
    clean |= {"ROCM_SDK_KFD_TOPOLOGY": "/nonexistent", "PATH": "/usr/bin:/bin", **env}
    clean["SOURCE_DATE_EPOCH"] = "1700000000"
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-c", CALL_HOOK, "build_wheel", str(out)],
        cwd=tree, env=clean, capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    with zipfile.ZipFile(out / json.loads(proc.stdout.splitlines()[-1])) as zf:
        return {info.filename: zf.read(info) for info in zf.infolist()}


def _targets(tmp_path: Path, members: dict[str, bytes]) -> str:
    """``rocm-sdk targets``'s stderr with the built wheel and a core package installed."""
    site = tmp_path / "site"
    for name, data in members.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_bytes(data)
    doc = json.dumps({"dist_amdgpu_targets": "gfx90a;gfx1030"}).encode()
    fake_install(site, "rocm-sdk-core", "7.1.0", {
        "_rocm_sdk_core/__init__.py": b"", "_rocm_sdk_core/share/therock/dist_info.json": doc,
    })  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ROCM_", "PYTHON"))}
    env |= {"PYTHONPATH": str(site), "ROCM_BOOTSTRAP_DISABLE_DETECTION": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "rocm_sdk", "targets"], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


def test_no_gpu_the_device_extra_records_that_it_installed_nothing(tmp_path: Path) -> None:
    """rocm[device] where no GPU is visible: the wheel's description, _selection.json and
    rocm-sdk targets say that the 'device' extra installed no device code, why, and the
    command that installs a GPU's; not 'resolved for gfx1030'."""
    members = _build(tmp_path, KPACK, ROCM_BOOTSTRAP_DISABLE_DETECTION="1")
    chosen = json.loads(members["rocm_sdk/_selection.json"])
    assert chosen["device_extra"] == [] and chosen["source"] == "default"
    fix = "pip install 'rocm[device-gfx1030]==7.1.0'"
    assert chosen["device_fix"] == fix and chosen["device_targets"] == ["gfx1030", "gfx90a"]
    _, _, text = metadata_of(members)
    assert (
        "Its `device` extra installed no device code (the build's default, no GPU being found "
        f"on this machine); to install a GPU's: `{fix}` (this build has gfx1030, gfx90a)."
        in " ".join(text.split())
    ), text
    assert "resolved for GPU target family" not in text
    line = (
        "rocm: the 'device' extra of the rocm package installed no device code when pip or uv "
        "built it (the build's default, no GPU being found on this machine); "
        f"{fix} installs a GPU's (this build has gfx1030, gfx90a); that is a record, not this "
        "machine's state"
    )
    assert line in _targets(tmp_path, members).splitlines()


@pytest.mark.parametrize(
    ("env", "found"),
    [
        ({"ROCM_BOOTSTRAP_FORCE_GFX_ARCH": "gfx90a"}, "gfx90a (found by forced)"),
        ({"KFD": "90010"}, "gfx90a (found by kfd)"),
    ],
)
def test_the_record_says_how_the_gpu_was_found(
    tmp_path: Path, env: dict[str, str], found: str
) -> None:
    """Not 'the GPUs offload-arch found' when KFD or the forcing variable found them."""
    if "KFD" in env:
        node = tmp_path / "kfd" / "1"
        node.mkdir(parents=True)
        (node / "properties").write_text(f"simd_count 64\ngfx_target_version {env.pop('KFD')}\n")
        env["ROCM_SDK_KFD_TOPOLOGY"] = str(tmp_path / "kfd")
    members = _build(tmp_path, KPACK, **env)
    chosen = json.loads(members["rocm_sdk/_selection.json"])
    assert chosen["device_extra"] == ["rocm-sdk-device-gfx90a"]
    _, _, text = metadata_of(members)
    assert f"family `gfx90a` (from this machine's GPUs: {found})." in text
    assert "offload-arch" not in text
    assert (
        "rocm: the rocm package chose target family gfx90a when pip or uv built it (from this "
        f"machine's GPUs: {found}); that is a record, not this machine's state"
    ) in _targets(tmp_path, members)


def _device_extra(members: dict[str, bytes]) -> list[str]:
    """The distributions the built wheel's METADATA requires for the 'device' extra, read
    with packaging (not our writer's code)."""
    requires, _extras, _text = metadata_of(members)
    out = []
    for text in requires:
        req = Requirement(text)
        if req.marker is not None and req.marker.evaluate({"extra": "device"}):
            out.append(req.name)
    return out


def test_rocm_device_on_a_machine_with_two_gpu_kinds_installs_both(tmp_path: Path) -> None:
    """Two GPU kinds found: 'rocm[device]' pulls both's device code, not the first's only;
    the family the user names stays the only one."""
    both = _build(tmp_path / "a", KPACK, ROCM_BOOTSTRAP_FORCE_GFX_ARCH="gfx1030,gfx90a:xnack-")
    expected = ["rocm-sdk-device-gfx1030", "rocm-sdk-device-gfx90a"]
    assert json.loads(both["rocm_sdk/_selection.json"])["device_extra"] == expected
    assert _device_extra(both) == expected
    chosen = _build(tmp_path / "b", KPACK, ROCM_BOOTSTRAP_FORCE_GFX_ARCH="gfx1030,gfx90a",
                    ROCM_SDK_TARGET_FAMILY="gfx90a")  # fmt: skip
    assert _device_extra(chosen) == ["rocm-sdk-device-gfx90a"]


def test_no_device_extra_hint_once_the_user_chose_a_gpus_code(tmp_path: Path) -> None:
    """Built where no GPU was visible (its 'device' extra installed nothing), then the user
    installed 'rocm[device-gfx90a]': rocm-sdk targets no longer hints at the build's first
    target."""
    members = _build(tmp_path, KPACK, ROCM_BOOTSTRAP_DISABLE_DETECTION="1")
    assert "installs a GPU's" in _targets(tmp_path / "before", members)
    fake_install(tmp_path / "after" / "site", "rocm-sdk-device-gfx90a", "7.1.0", {})
    stderr = _targets(tmp_path / "after", members)
    assert "installs a GPU's" not in stderr and "device-gfx1030" not in stderr, stderr
