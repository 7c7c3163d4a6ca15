"""Plan a whole build: which packages, which files, which edits — nothing is written.

Stages: select artifacts per package -> merge into a namespace -> re-layout (§6) ->
derive RPATHs and plan ELF edits (§7) -> devel members (§8) -> rendered files. The
result is a frozen :class:`BuildPlan` that ``--dry-run`` prints and ``apply`` writes.

This face re-exports its parts: the plan's values and package names (``_model``), the
runtime packages laid out (``_runtime``), their payloads with the ELF edits
(``_payload``), the devel tree (``_devel``) and the checked library registry
(``_registry``).
"""

from __future__ import annotations

from ._devel import devel_members, devel_namespace
from ._model import (
    BuildPlan,
    PackagePlan,
    PlanKind,
    RuntimePackage,
    dist_name,
    platform_name,
    pure_name,
)
from ._payload import launcher_for, runtime_payload
from ._registry import library_registry
from ._runtime import device_targets, needs_elf_scan, plan_runtime

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
