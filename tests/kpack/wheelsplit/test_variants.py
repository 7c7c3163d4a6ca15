"""Variant wheels of the wheel splitter, validated with variantlib 0.2.2 (test-only)."""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from variantlib.api import (
    VariantDescription,
    VariantDistInfo,
    VariantProperty,
    check_variant_supported,
    get_variant_environment_dict,
    validate_variant,
)
from variantlib.errors import ValidationError
from variantlib.variants_json import VariantsJson

from kpack import wheelsplit as spw
from kpack.errors import UsageError
from kpack.wheelsplit._variant import SCHEMAS, check_label
from tests.kpack.wheel_fixtures import ROCRAND_LIB, make_fat_wheel

pytestmark = pytest.mark.real

PLAIN = "torch-2.9.0-py3-none-linux_x86_64.whl"
_MARKER = re.compile(r'^(?P<req>[^;]+); "(?P<prop>[^"]+)" in variant_properties$')


@pytest.fixture(scope="module", params=["0.1.1", "0.2.0"])
def split(
    request: pytest.FixtureRequest,
    debian_package: Callable[[str], Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, str]:
    base = tmp_path_factory.mktemp("variants")
    wheel = make_fat_wheel(base / "in", debian_package("librocrand1") / ROCRAND_LIB)
    options = spw.SplitOptions(
        "torch/", "amd-torch-device", ("rocblas",), variant=True, variant_label="rocm6",
        variant_schema=request.param,
    )  # fmt: skip
    spw.split_wheel(wheel, base / "out", options)
    return base / "out", request.param


def _member(wheel: Path, suffix: str) -> bytes:
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(suffix)]
        return z.read(name)


def _requires(wheel: Path) -> list[str]:
    text = _member(wheel, ".dist-info/METADATA").decode()
    return [
        line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("Requires-Dist")
    ]


def test_one_label_matching_the_file_name(split: tuple[Path, str]) -> None:
    out, schema = split
    for label in ("rocm6", "null"):
        wheel = out / f"torch-2.9.0-py3-none-linux_x86_64-{label}.whl"
        raw = _member(wheel, ".dist-info/variant.json")
        doc = json.loads(raw)
        assert doc["$schema"] == SCHEMAS[schema]
        assert list(doc["variants"]) == [label]
        info = VariantDistInfo(raw, expected_label=label)
        assert info.variant_label == label
        with pytest.raises(ValidationError):
            VariantDistInfo(raw, expected_label="other")
    rocm = json.loads(_member(out / "torch-2.9.0-py3-none-linux_x86_64-rocm6.whl", "variant.json"))
    values = rocm["variants"]["rocm6"]["amd"]["gfx_arch"]
    assert values == ["gfx1030", "gfx900", "gfx906", "gfx908", "gfx90a"]  # sorted, no gfx803
    assert not any(":" in v or "-" in v for v in values)


def test_index_json_lists_every_label(split: tuple[Path, str]) -> None:
    out, _ = split
    raw = (out / "torch-2.9.0-variants.json").read_bytes()
    index = VariantsJson(json.loads(raw))
    assert sorted(index.variants) == ["null", "rocm6"]
    assert index.variants["null"].properties == []


def test_properties_validate_against_the_provider(split: tuple[Path, str]) -> None:
    out, _ = split
    raw = _member(out / "torch-2.9.0-py3-none-linux_x86_64-rocm6.whl", "variant.json")
    info = VariantDistInfo(raw)
    result = validate_variant(info.variant_desc, variant_info=info)
    assert result.is_valid(), result
    bogus = VariantDescription([VariantProperty("amd", "gfx_arch", "gfx803")])
    assert not validate_variant(bogus, variant_info=info).is_valid()


def test_markers_only_in_the_variant_wheel(split: tuple[Path, str]) -> None:
    out, _ = split
    for name in out.glob("*.whl"):
        has_markers = any("variant_properties" in r for r in _requires(name))
        assert has_markers == name.name.endswith("-rocm6.whl"), name.name
    assert not any("amd-torch-device" in r and "extra" not in r for r in _requires(out / PLAIN))


def test_one_device_dependency_per_detected_gpu(
    split: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out, _ = split
    wheel = out / "torch-2.9.0-py3-none-linux_x86_64-rocm6.whl"
    info = VariantDistInfo(_member(wheel, "variant.json"))
    monkeypatch.setenv("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", "gfx90a")
    supported = check_variant_supported(variant_info=info)
    assert supported is not None
    env = get_variant_environment_dict(supported)
    active = []
    for req in _requires(wheel):
        found = _MARKER.match(req)
        if found and found["prop"] in env["variant_properties"]:
            active.append(found["req"])
    assert active == ["amd-torch-device-gfx90a==2.9.0"]


@pytest.mark.parametrize("label", ["null", "Rocm", "a-b", "x" * 17, ""])
def test_bad_labels(label: str) -> None:
    with pytest.raises(UsageError):
        check_label(label)
