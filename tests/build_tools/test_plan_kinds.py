"""The builder's plan: kinds and the template context."""

from __future__ import annotations

import dataclasses

import pytest

from build_tools.assemble import TemplateContext
from build_tools.manifests import PackageKind
from build_tools.plan import PlanKind


def test_plan_kinds_cover_every_manifest_kind() -> None:
    assert {PlanKind.of(k) for k in PackageKind} | {PlanKind.SELECTOR} == set(PlanKind)


def test_the_template_context_is_frozen_and_scoped_per_package() -> None:
    ctx = TemplateContext(
        "7.0",
        "",
        True,
        None,
        ("gfx942",),
        ("gfx942",),
        (),
        (),
        (),
        (),
        {"gfx9-4-generic": ("gfx942",)},
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.version = "8.0"  # type: ignore[misc]
    core, devel = ctx.variables("core", None), ctx.variables("devel", "gfx942")
    assert {k for k in core if core[k] != devel[k]} == {"this_package_entry", "this_target_family"}
