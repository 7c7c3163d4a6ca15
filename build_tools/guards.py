"""Completeness guards of a kpack-split build (``packages.md`` §16)."""

from __future__ import annotations

from collections.abc import Sequence

from kpack.artifact_names import base_target
from kpack.errors import ArtifactError, PackagingError
from kpack.generic_targets import generic_table
from kpack.safepath import windows_name_problem

from .artifacts import Catalog, EntryKind
from .options import BuildOptions
from .plan import PackagePlan, PlanKind, device_targets

__all__ = [
    "check_no_symlinks",
    "check_required_packages",
    "check_targets_present",
    "check_windows_names",
]


def check_targets_present(catalog: Catalog, options: BuildOptions) -> None:
    """Every target the family flags expect must have per-target artifacts on disk.

    Checked per platform, and only for a platform whose family flag was given. A processor
    whose generic target has artifacts (``gfx9-4-generic`` for gfx942) is present: its
    users run that code.
    """
    found = set(device_targets(catalog))
    served = set(generic_table().served_processors(found))
    for flag, expected in (
        ("--linux-amdgpu-families", options.linux_targets),
        ("--windows-amdgpu-families", options.windows_targets),
    ):
        missing = sorted({base_target(t) for t in expected} - served)
        if missing:
            raise ArtifactError(
                f"missing fetched artifact targets: {', '.join(missing)} (expected by {flag}; "
                f"found: {', '.join(sorted(found)) or 'none'})",
                path=catalog.root,
            )


def check_required_packages(
    catalog: Catalog, options: BuildOptions, plans: Sequence[PackagePlan]
) -> None:
    """The plan must hold the sdist, core, libraries, a device wheel per expected target
    (of this shard) and devel when any dev artifact exists."""
    kinds = {p.kind.value for p in plans}
    missing = [k for k in ("meta", "core", "libraries") if k not in kinds]
    if any(a.id.component == "dev" for a in catalog.artifacts) and "devel" not in kinds:
        missing.append("devel")
    expected = {base_target(t) for t in (*options.linux_targets, *options.windows_targets)}
    if options.targets:
        expected &= set(options.targets)
    devices = {p.family for p in plans if p.kind is PlanKind.DEVICE and p.family}
    served = set(generic_table().served_processors(devices))
    missing += [f"device-{t}" for t in sorted(expected - served)]
    if missing:
        raise PackagingError(
            f"kpack-split build would lack required packages: {', '.join(missing)}",
            path=catalog.root,
        )


def check_windows_names(plans: Sequence[PackagePlan]) -> None:
    """In a Windows package set, every member name must be creatable on Windows.

    A ``.kpack`` archive for a feature-qualified target (``blas_lib_gfx90a:xnack+.kpack``)
    cannot be: the ``:`` opens an NTFS alternate data stream. Neither TheRock nor
    rocm-kpack defines a Windows spelling for such names (rocm-kpack's Windows runtime
    lookup is not implemented), so the build stops instead of shipping a file that would
    install wrong.
    """
    problems = [
        f"{plan.dist_name}: {file.arcname} ({why})"
        for plan in plans
        for file in plan.payload
        if (why := windows_name_problem(file.arcname)) is not None
    ]
    if problems:
        raise PackagingError(
            "a Windows package set holds names Windows file systems reject",
            problems=problems,
        )


def check_no_symlinks(catalog: Catalog) -> None:
    """A Windows artifact tree has no symlinks (TheRock's Windows build makes none, and
    neither wheels nor an unprivileged Windows user can create them): each one is named."""
    links = [
        f"{e.source} -> {e.link}"
        for a in catalog.artifacts
        for e in a.entries
        if e.kind is EntryKind.SYMLINK
    ]
    if links:
        raise ArtifactError(
            "symlinks in a Windows artifact tree (a Windows package set cannot hold them)",
            path=catalog.root,
            problems=links,
        )
