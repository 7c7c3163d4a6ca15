"""The builder's plan: kinds and the template context."""

from __future__ import annotations

import dataclasses

import pytest

from build_tools.manifests import PackageKind
from build_tools.plan import DistKind
from build_tools.plan._context import TemplateContext


def test_dist_kinds_cover_every_manifest_kind() -> None:
    assert {DistKind.of(k) for k in PackageKind} | {DistKind.SELECTOR} == set(DistKind)


def test_the_template_context_is_frozen_and_scoped_per_package() -> None:
    ctx = TemplateContext(
        version="7.0",
        nonce="",
        kpack_mode=True,
        default_target_family=None,
        available_target_families=("gfx942",),
        linux_target_families=("gfx942",),
        windows_target_families=(),
        packages=(),
        libraries=(),
        scripts=(),
        generic_targets={"gfx9-4-generic": ("gfx942",)},
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.version = "8.0"  # type: ignore[misc]
    core, devel = ctx.variables("core", None), ctx.variables("devel", "gfx942")
    assert {k for k in core if core[k] != devel[k]} == {"this_package_entry", "this_target_family"}
