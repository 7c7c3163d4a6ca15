"""The checks a build passes before anything is written: the tree against the options
(targets present, no symlinks in a Windows tree), and the planned packages (installable
member names, Windows names, the packages a kpack-split build requires: ``packages.md``
§16). Each names every problem at once."""

from __future__ import annotations

from collections.abc import Sequence

from kpack.common.safepath import case_collisions, is_utf8, shown_name, windows_name_problem
from kpack.errors import ArtifactError, PackagingError
from kpack.generic_targets import generic_table
from kpack.targets import base_target, target_order

from ..artifacts import Catalog, EntryKind
from ..options import BuildOptions
from ..payload import PayloadFile, TarKind
from ._model import DistKind, PlannedPackage
from ._runtime import device_targets

__all__ = [
    "check_member_names",
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
        missing = sorted({base_target(t) for t in expected} - served, key=target_order)
        if missing:
            raise ArtifactError(
                f"missing fetched artifact targets: {', '.join(missing)} (expected by {flag}; "
                f"found: {', '.join(sorted(found, key=target_order)) or 'none'})",
                path=catalog.root,
            )


def check_required_packages(
    catalog: Catalog, options: BuildOptions, plans: Sequence[PlannedPackage]
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
    if options.only == "common":  # the device shards of the plan build them
        expected = set()
    devices = {p.family for p in plans if p.kind is DistKind.DEVICE and p.family}
    served = set(generic_table().served_processors(devices))
    missing += [f"device-{t}" for t in sorted(expected - served)]
    if missing:
        raise PackagingError(
            f"kpack-split build would lack required packages: {', '.join(missing)}",
            path=catalog.root,
        )


def check_windows_names(plans: Sequence[PlannedPackage]) -> None:
    """In a Windows package set, every member name must be creatable on Windows.

    A ``.kpack`` archive for a feature-qualified target (``blas_lib_gfx90a:xnack+.kpack``)
    cannot be: the ``:`` opens an NTFS alternate data stream. Neither TheRock nor
    rocm-kpack defines a Windows spelling for such names (rocm-kpack's Windows runtime
    lookup is not implemented), so the build stops instead of shipping a file that would
    install wrong.
    """
    problems = [
        f"{plan.dist_name}: {name} ({why})"
        for plan in plans
        for name in _member_names(plan)
        if (why := windows_name_problem(name)) is not None
    ]
    if problems:
        raise PackagingError(
            "a Windows package set holds names Windows file systems reject",
            problems=problems,
        )


def _member_names(plan: PlannedPackage) -> list[str]:
    """Every name one package installs: its files and its devel tarball's members."""
    return [*(f.arcname for f in plan.payload), *(e.arcname for e in plan.devel_tar)]


def _source(file: PayloadFile | None) -> str:
    if file is None:
        return ""
    path = file.input_path
    return f" (from {shown_name(str(path))})" if path is not None else ""


def check_member_names(plans: Sequence[PlannedPackage], *, windows: bool) -> None:
    """Every name a package installs, in the wheel or in its devel tarball (and a tarball
    symlink's target), must be valid UTF-8: a wheel cannot carry another name, and
    ``rocm-sdk init`` could not create it. In a Windows package set, no two names of one
    package may differ only in case: NTFS would keep one file for both."""
    problems: list[str] = []
    for plan in plans:
        files = [
            *((f.arcname, f) for f in plan.payload),
            *((e.arcname, e.file) for e in plan.devel_tar),
        ]
        links = [e.link for e in plan.devel_tar if e.kind is TarKind.SYMLINK]
        problems += [
            f"{plan.dist_name}: {shown_name(name)}{_source(file)} is not valid UTF-8"
            for name, file in files
            if not is_utf8(name)
        ]
        problems += [
            f"{plan.dist_name}: symlink target {shown_name(link)} is not valid UTF-8"
            for link in links
            if not is_utf8(link)
        ]
        if windows:
            problems += [
                f"{plan.dist_name}: {pair} differ only in case (one file on Windows)"
                for pair in case_collisions(name for name, _ in files)
            ]
    if problems:
        raise PackagingError("package member names that cannot be installed", problems=problems)


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
