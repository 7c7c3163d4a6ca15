"""The wheel splitter's device wheels and package owners: ``gfx1250-strict`` code joins the
``gfx1250`` wheel, and every per-processor device wheel requires the device wheels of the
same split that hold the rest of its processor's code (rocm-systems#10685)."""

from __future__ import annotations

import shutil
import zipfile
from email.parser import BytesHeaderParser
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from kpack import wheelsplit as spw
from tests.build_tools.conftest import install
from tests.conftest import require
from tests.kpack.bundle_fixtures import sample_bundle
from tests.kpack.transform_fixtures import synthetic
from tests.kpack.wheel_fixtures import make_fat_wheel

TARGETS = ["gfx1100", "gfx11-generic", "gfx1250", "gfx1250-strict", "gfx942"]


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require(shutil.which("gcc") is not None, "gcc is not installed")
    base = tmp_path_factory.mktemp("owners")
    library = synthetic(base, "torch", sample_bundle(TARGETS), [0])
    wheel = make_fat_wheel(base / "in", library)
    options = spw.SplitOptions(
        overlay_root="torch/", device_package_prefix="amd-torch-device", databases=()
    )
    spw.split_wheel(wheel, base / "out", options)
    return base / "out"


def _members(wheel: Path) -> tuple[list[str], dict[str, str]]:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        meta = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
    requires = BytesHeaderParser().parsebytes(meta).get_all("Requires-Dist", [])
    return names, {r.name: str(r.specifier) for r in map(Requirement, requires)}


def _device(out: Path, key: str) -> Path:
    return out / f"amd_torch_device_{key}-2.9.0-py3-none-linux_x86_64.whl"


def test_strict_code_joins_its_owner_wheel(out: Path) -> None:
    keys = sorted(p.name.split("-")[0].removeprefix("amd_torch_device_")
                  for p in out.glob("amd_torch_device_*.whl"))  # fmt: skip
    assert keys == ["gfx1100", "gfx11_generic", "gfx1250", "gfx942"]
    names, _ = _members(_device(out, "gfx1250"))
    assert {"torch/.kpack/torch_gfx1250.kpack", "torch/.kpack/torch_gfx1250-strict.kpack"} <= set(
        names
    )


def test_device_wheels_require_their_owners_pinned(out: Path) -> None:
    assert _members(_device(out, "gfx1100"))[1] == {
        "torch": "==2.9.0",
        "amd-torch-device-gfx11-generic": "==2.9.0",
    }
    # no gfx9-4-generic or gfx12-5-generic code in this split: nothing more to require
    assert _members(_device(out, "gfx942"))[1] == {"torch": "==2.9.0"}
    assert _members(_device(out, "gfx1250"))[1] == {"torch": "==2.9.0"}
    assert _members(_device(out, "gfx11_generic"))[1] == {"torch": "==2.9.0"}


def test_installing_the_leaf_pulls_its_generic_target(out: Path, tmp_path: Path) -> None:
    site = install(out, tmp_path / "venv", "amd-torch-device-gfx1100==2.9.0")
    installed = sorted(p.name.split("-")[0] for p in site.glob("*.dist-info"))
    assert {"amd_torch_device_gfx1100", "amd_torch_device_gfx11_generic", "torch"} <= set(installed)
    assert (site / "torch/.kpack/torch_gfx11-generic.kpack").is_file()
