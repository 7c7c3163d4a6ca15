"""``--device-requires-dist`` templates, applied as rocm-kpack's splitter applies them: a line
naming ``@GFXARCH@`` goes only to the wheels of real targets (rocm-bootstrap's
``PackagingLevel.TARGET``, the oracle here), every other line to every device wheel."""

from __future__ import annotations

import pytest
import rocm_bootstrap

from kpack.errors import UsageError
from kpack.generic_targets import generic_table
from kpack.wheelsplit._requires import check_requires, device_requires

TEMPLATES = ("rocm-sdk-device-@GFXARCH@ == 7.1", "rocm-sdk-core == 7.1")


def _upstream(key: str) -> list[str]:
    """rocm-kpack's rule, from rocm-bootstrap's bundle levels (it knows no generic keys)."""
    try:
        real = rocm_bootstrap.lookup_bundle(key).level is rocm_bootstrap.PackagingLevel.TARGET
    except ValueError:
        real = False
    return [t.replace("@GFXARCH@", key) for t in TEMPLATES if real or "@GFXARCH@" not in t]


@pytest.mark.parametrize(
    "key",
    sorted({b.key for b in rocm_bootstrap.all_bundles()} | set(generic_table().members)),
)
def test_every_bundle_key_gets_upstreams_lines(key: str) -> None:
    assert device_requires(TEMPLATES, key) == _upstream(key)


def test_the_kinds_of_keys() -> None:
    assert device_requires(TEMPLATES, "gfx942") == [
        "rocm-sdk-device-gfx942 == 7.1",
        "rocm-sdk-core == 7.1",
    ]
    for key in ("gfx9_4", "gfx9", "gfx9-4-generic", "gfx11-generic"):
        assert device_requires(TEMPLATES, key) == ["rocm-sdk-core == 7.1"], key


def test_templates_are_checked_up_front() -> None:
    assert check_requires(["  rocm-sdk-device-@GFXARCH@ == 7.1 "]) == TEMPLATES[:1]
    with pytest.raises(UsageError, match="not a PEP 508 requirement"):
        check_requires(["rocm-sdk-device-@GFXARCH@ =="])
