"""Plan a whole build: which packages, which files, which edits — nothing is written.

Stages: select artifacts per package -> merge into a namespace -> re-layout (§6) ->
derive RPATHs and plan ELF edits (§7) -> devel members (§8) -> rendered files. The
result is a frozen :class:`BuildPlan` that ``--dry-run`` prints and ``apply`` writes.
"""

from __future__ import annotations

from ._runtime import (
    BuildPlan,
    PackagePlan,
    PlanKind,
    RuntimePackage,
    devel_members,
    devel_namespace,
    device_targets,
    dist_name,
    launcher_for,
    library_registry,
    needs_elf_scan,
    plan_runtime,
    platform_name,
    pure_name,
    runtime_payload,
)

__all__ = [
    "BuildPlan",
    "PackagePlan",
    "PlanKind",
    "RuntimePackage",
    "devel_members",
    "devel_namespace",
    "device_targets",
    "dist_name",
    "launcher_for",
    "library_registry",
    "needs_elf_scan",
    "plan_runtime",
    "platform_name",
    "pure_name",
    "runtime_payload",
]
