"""The selector's choice is visible: the wheel pip/uv build from the rocm sdist records the
target family it resolved, and where from (env, offload-arch, the default)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from test_tpl_backend import build, metadata_of
from tpl_rendering import SAMPLE_CONTEXTS


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
