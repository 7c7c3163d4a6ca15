"""What the builder plans: which packages, from which files, in which layout, with which
RPATHs and metadata — nothing is written.

:func:`plan_packages` takes the scanned tree (:mod:`build_tools.artifacts`) to a checked
:class:`BuildPlan`, which ``--dry-run`` prints and :func:`build_tools.build.apply_plan`
writes. Its stages, each a function of the values before it:

- ``_pipeline``: split-plan the fat artifacts (:mod:`build_tools.kpack_split`), plan, check;
- ``_scopes``: the whole build, one scope (kpack) or one per family (legacy);
- ``_runtime``: each runtime package's artifacts selected (``_globs``), merged into one
  namespace (``_namespace``) and laid out without symlinks (``_layout``, §6);
- ``_payload``: its files, with RPATHs derived (``_rpath``, §7) and ELF edits planned;
- ``_devel``: the devel tarball's members (§8);
- ``_context``, ``_registry``, ``_egg_info``: the template variables, the checked library
  registry, the ``rocm`` sdist's requirements;
- ``_packages``: one complete :class:`PlannedPackage` per wheel (and the sdist);
- ``_checks``, ``_families``: what a plan must pass before apply;
- ``_model``: the values (:class:`PlanInputs`, :class:`RuntimePackage`,
  :class:`PlannedPackage`, :class:`BuildPlan`) and package names.
"""

from __future__ import annotations

from ._model import BuildPlan, DistKind, PlannedPackage, RuntimePackage
from ._pipeline import plan_packages
from ._scopes import plan_build

__all__ = [
    "BuildPlan",
    "DistKind",
    "PlannedPackage",
    "RuntimePackage",
    "plan_build",
    "plan_packages",
]
