"""One target-id grammar on both sides of the runtime boundary.

The builder and splitter (``kpack.targets``) and the installed runtime
(``rocm_sdk._kpack``, stdlib-only: it cannot import kpack) must accept exactly the same
target ids: what one writes into archive names and TOCs the other reads back. The grammar is
LLVM's (AMDGPUUsage, "Target ID"): a processor, then ``:feature+`` / ``:feature-`` parts
whose features are lower-case names, each at most once, in any order; the project adds a
length bound (64) and never lets ``_``, ``/``, ``\\`` or white space in.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kpack.targets import MAX_TARGET_ID, is_isa_target, is_target_id
from tests.templates.tpl_kit import importable, rocm_sdk_tree
from tests.templates.tpl_rendering import context

VALID = (
    "gfx90a",
    "gfx942",
    "gfx1100",
    "gfx1250-strict",
    "gfx9-4-generic",
    "gfx11-generic",
    "gfx12-5-generic",
    "gfx90a:xnack+",
    "gfx90a:xnack-",
    "gfx906:sramecc-",
    "gfx942:sramecc+:xnack-",
    "gfx942:xnack-:sramecc+",  # LLVM's non-canonical order
    "gfx9-4-generic:xnack-",
    "gfx9-4-generic:sramecc-:xnack+",
    "gfxzz",  # a processor this project does not know yet is still read
    "gfx" + "9" * (MAX_TARGET_ID - 3),
)

INVALID = (
    "",
    "gfx",
    "942",
    "GFX942",
    "gfx942:",
    "gfx942::xnack+",
    "gfx942:xnack",
    "gfx942:+",
    "gfx942:xnack+:",
    "gfx942:XNACK+",
    "gfx942:Xnack+",
    "gfx942:xnack_on+",
    "gfx942:my_feature+",  # `_` ends the prefix of <P>_<target>.kpack
    "gfx942:sram-ecc+",
    "gfx942:xnack2+",
    "gfx942:xnack+-",
    "gfx942:xnack*",
    "gfx942:xnack+:xnack-",  # a feature at most once
    "gfx942:xnack+:xnack+",
    "gfx942:sramecc+:xnack-:sramecc-",
    "gfx-942",
    "gfx9--generic",
    "gfx942-",
    "gfx942 ",
    " gfx942",
    "gfx942:xnack+\n",
    "gfx942\x00",
    "gfx942/..",
    "../gfx942",
    "gfx942\\x",
    "gfx\uff19\uff14\uff12",  # fullwidth digits
    "gfx942:xnáck+",
    "gfx" + "9" * (MAX_TARGET_ID - 2),
    "gfx942" + ":xnack+" * 10,
)


@pytest.fixture(scope="module")
def runtime_is_target_id(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], bool]:
    """The runtime's ``is_target_id``, from the rendered ``rocm`` sdist tree."""
    root = rocm_sdk_tree(context("kpack", ("gfx942",)), tmp_path_factory.mktemp("grammar"))
    with importable(root / "src"):
        from rocm_sdk._kpack import is_target_id as runtime
    return runtime


def test_the_table_is_what_llvm_allows() -> None:
    assert not set(VALID) & set(INVALID)
    assert len(VALID[-1]) == MAX_TARGET_ID and len(INVALID[-2]) == MAX_TARGET_ID + 1


@pytest.mark.parametrize("target", VALID)
def test_both_accept(target: str, runtime_is_target_id: Callable[[str], bool]) -> None:
    assert is_target_id(target)
    assert runtime_is_target_id(target)


@pytest.mark.parametrize("target", INVALID)
def test_both_refuse(target: str, runtime_is_target_id: Callable[[str], bool]) -> None:
    assert not is_target_id(target)
    assert not runtime_is_target_id(target)
    assert not is_isa_target(target)


@pytest.mark.parametrize("target", VALID + INVALID)
def test_an_isa_target_is_a_target_id(target: str) -> None:
    """``--gpu-targets`` and artifact directory names: a stricter processor, the same
    features."""
    if is_isa_target(target):
        assert is_target_id(target)


def test_isa_targets_share_the_features() -> None:
    assert is_isa_target("gfx942:sramecc+:xnack-")
    assert is_isa_target("gfx9-4-generic:xnack+")
    assert not is_isa_target("gfxzz")
    assert not is_isa_target("gfx942:xnack+:xnack-")
