#!/usr/bin/env python3
"""Build the rocm / rocm-sdk-* Python packages from a TheRock artifact tree.

    python build_tools/build_python_packages.py --artifact-dir ARTIFACTS --dest-dir OUT \\
        --version 7.99.0.dev0

Writes OUT/dist/: the ``rocm`` selector sdist, ``rocm-sdk-core``, one
``rocm-sdk-libraries-<family>`` per GPU family (legacy mode), ``rocm-sdk-devel`` and
``rocm-profiler``; the report goes beside it. A re-run replaces what an earlier run wrote
(recorded in OUT/.build-python-packages.json) and leaves every other file alone; a file
the builder did not write is never overwritten without ``--force``. A failed run leaves
OUT as it was. The last line printed is the absolute path of OUT/dist.

ARTIFACTS may hold artifact dirs and/or TheRock's artifact archives (``.tar.zst``, ``.tar.xz``,
``.tar``), each read in one streaming pass; ``--print-shards N`` prints a JSON shard plan
(:mod:`build_tools.shard_cli`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from build_tools.shard_cli import (
    add_shard_arguments,
    check_plan_only,
    input_spool,
    print_shards,
    with_tree_targets,
)
from kpack.common.cli import (
    Parser,
    add_jobs,
    add_list_argument,
    add_verbosity,
    add_version,
    configure_logging,
    format_size,
    output_line,
)
from kpack.common.jsonfile import load_json_object
from kpack.errors import ManifestError, UsageError
from kpack.finalize import add_budget_argument
from kpack.targets import is_isa_target

if TYPE_CHECKING:
    from build_tools.artifacts import Catalog
    from build_tools.build import Built
    from build_tools.options import BuildOptions
    from build_tools.plan import BuildPlan
    from build_tools.targets import FamilyTable
    from kpack.common.progress import Progress

__all__ = ["main"]

log = logging.getLogger("build_python_packages")


def _parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    p = Parser(
        prog="build-python-packages",
        description="Build the rocm / rocm-sdk-* Python packages from a TheRock artifact tree.",
    )
    p.add_argument(
        "--artifact-dir",
        type=Path,
        required=True,
        help="artifact root: artifact dirs and/or TheRock's artifact archives "
        "({name}_{component}_{target}.tar.zst, .tar.xz or .tar), read without extracting",
    )
    p.add_argument(
        "--dest-dir",
        type=Path,
        help="output root: packages go to DEST/dist, the report beside it; a re-run "
        "replaces what the builder wrote there before and nothing else",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="also replace files in the way that the builder did not write",
    )
    p.add_argument(
        "--build-packages",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="build wheels and the sdist (--no-build-packages: only stage the "
        "package trees, including the devel tarball, under DEST/<dist-name>)",
    )
    add_version(
        p,
        value_help="package version (PEP 440; the canonical form is used everywhere)",
        argv=argv,
        default="",
        metavar="V",
    )
    p.add_argument(
        "--version-file",
        type=Path,
        help="version.json whose 'rocm-version' + '.dev0' is used without --version",
    )
    p.add_argument(
        "--version-suffix",
        "--package-nonce",
        dest="nonce",
        default="",
        help="package-NAME nonce appended to every platform package "
        "(_rocm_sdk_core<NONCE>); despite its name it does not change the version",
    )
    p.add_argument(
        "--devel-tarball-compression",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="ship the devel payload as _devel.tar.xz instead of _devel.tar",
    )
    p.add_argument(
        "--wheel-compression",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="deflate wheel members (--no-wheel-compression: store them)",
    )
    add_list_argument(
        p,
        "--linux-amdgpu-families",
        metavar="FAMILY",
        help="GPU families for Linux, each one the tree has (empty: not given)",
    )
    add_list_argument(
        p,
        "--windows-amdgpu-families",
        metavar="FAMILY",
        help="GPU families for Windows, each one the tree has (empty: not given)",
    )
    add_list_argument(
        p,
        "--targets",
        metavar="GFX",
        help="kpack-split mode: build only these device wheels (base gfx targets); every "
        "other output is byte-identical whatever the subset, so CI jobs can each build a "
        "share and assemble-shards merges them",
    )
    add_shard_arguments(p)
    p.add_argument(
        "--targets-cmake",
        type=Path,
        help="parse family -> target table from TheRock's therock_amdgpu_targets.cmake",
    )
    p.add_argument(
        "--index",
        type=Path,
        metavar="DIR",
        help="also write a PEP 503 simple repository of DEST/dist here, with PEP 658 "
        "metadata files and PEP 691 JSON pages (a multi-family legacy set: one per family, "
        "DIR/<family>/)",
    )
    add_budget_argument(p)
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan (packages, file counts, sizes) and write nothing",
    )
    add_jobs(p, "worker threads for scanning and compression")
    add_verbosity(p)
    return p


def _version(args: argparse.Namespace) -> str:
    from build_tools.options import canonical_version

    if args.version.strip():
        return canonical_version(args.version.strip())
    if args.version_file is None:
        raise UsageError("--version is required (or --version-file pointing at version.json)")
    if not args.version_file.is_file():
        raise UsageError("--version-file is not a file", path=args.version_file)
    # what the file holds is input data: an error there is not a usage error (exit status 1)
    data = load_json_object(args.version_file, error=ManifestError)
    base = data.get("rocm-version")
    if not isinstance(base, str) or not base.strip():
        raise ManifestError(
            f"'rocm-version' must be a non-empty string, got {base!r}", path=args.version_file
        )
    return canonical_version(f"{base.strip()}.dev0")


def _nonce(text: str) -> str:
    if text and not all(c.isalnum() or c == "_" for c in text):
        raise UsageError(f"--version-suffix {text!r} may only hold letters, digits and '_'")
    return text


def _check_dirs_apart(artifact_dir: Path, dest_dir: Path) -> None:
    """Neither directory may lie inside the other: a dest inside the input tree (or inside a
    stage dir) would feed this build's output into the next build as input."""
    art, dest = artifact_dir.resolve(), dest_dir.resolve()
    if dest.is_relative_to(art):
        raise UsageError(
            f"--dest-dir {dest_dir} lies inside --artifact-dir {artifact_dir}: the next build "
            "would read this build's output as input; choose a directory outside the tree"
        )
    if art.is_relative_to(dest):
        raise UsageError(
            f"--artifact-dir {artifact_dir} lies inside --dest-dir {dest_dir}; choose a "
            "destination outside the tree"
        )


def _check_index_place(args: argparse.Namespace) -> None:
    """``--index`` is a directory of its own: not DEST/dist nor inside it or around it, not
    in the input tree, and only with packages to index."""
    if args.index is None:
        return
    if not args.build_packages:
        raise UsageError("--index needs packages to index; it cannot go with --no-build-packages")
    index, dist = args.index.resolve(), (args.dest_dir / "dist").resolve()
    if index == dist or index.is_relative_to(dist) or dist.is_relative_to(index):
        raise UsageError(f"--index {args.index} and DEST/dist ({dist}) must be apart")
    if index.is_relative_to(args.artifact_dir.resolve()):
        raise UsageError(f"--index {args.index} lies inside --artifact-dir {args.artifact_dir}")


def _options(args: argparse.Namespace, table: FamilyTable) -> BuildOptions:
    from build_tools.options import BuildOptions, default_platform_tag, source_date_epoch
    from build_tools.targets import parse_family_list

    _check_dirs_apart(args.artifact_dir, args.dest_dir)
    _check_index_place(args)
    linux = parse_family_list(args.linux_amdgpu_families)
    windows = parse_family_list(args.windows_amdgpu_families)
    shard = parse_family_list(args.targets)
    for target in shard:
        if not is_isa_target(target) or ":" in target:
            raise UsageError(f"--targets: {target!r} is not a base gfx target (e.g. gfx942)")
    tree_targets = parse_family_list(args.tree_targets)
    for target in tree_targets:
        if not is_isa_target(target):
            raise UsageError(f"--tree-targets: {target!r} is not a gfx target")
    if args.only == "device" and not shard:
        raise UsageError("--only device needs --targets (the device wheels this shard builds)")
    return BuildOptions(
        artifact_dir=args.artifact_dir,
        dest_dir=args.dest_dir,
        version=_version(args),
        nonce=_nonce(args.nonce),
        build_packages=args.build_packages,
        devel_tarball_compression=args.devel_tarball_compression,
        wheel_compression=args.wheel_compression,
        linux_families=linux,
        windows_families=windows,
        # a UsageError listing the valid families for an unknown one
        linux_targets=table.expand_all(linux, flag="--linux-amdgpu-families"),
        windows_targets=table.expand_all(windows, flag="--windows-amdgpu-families"),
        platform_tag=default_platform_tag(),
        epoch=source_date_epoch(),
        jobs=max(1, args.jobs),
        targets=shard,
        families=frozenset(table.families),
        only=args.only or "all",
        tree_targets=tree_targets,
        max_wheel_size=args.max_wheel_size,
    )


def run(argv: Sequence[str] | None = None) -> int:
    args = _parser(argv).parse_args(argv)
    configure_logging(args)
    from kpack.common.progress import make_progress

    progress = make_progress(quiet=args.quiet)
    try:
        return _run(args, progress)
    finally:
        progress.close()


def _run(args: argparse.Namespace, progress: Progress) -> int:
    """The builder's data path, top to bottom: scan → plan → apply → report."""
    from build_tools.targets import load_family_table, parse_targets_cmake

    def notice(line: str) -> None:
        if not args.quiet:
            print(f"notice: {line}", file=sys.stderr)

    table = parse_targets_cmake(args.targets_cmake) if args.targets_cmake else load_family_table()
    if args.print_shards is not None:
        return print_shards(args, version=_version(args), nonce=_nonce(args.nonce))
    check_plan_only(args)
    if args.dest_dir is None:
        raise UsageError("--dest-dir is required (unless --print-shards)")
    options = _options(args, table)
    with input_spool(options.artifact_dir, options.dest_dir, dry_run=args.dry_run) as spool:
        return _build(args, options, table, spool, progress, notice)


def _build(
    args: argparse.Namespace,
    options: BuildOptions,
    table: FamilyTable,
    spool: Path | None,
    progress: Progress,
    notice: Callable[[str], None],
) -> int:
    from build_tools.build import apply_plan
    from build_tools.plan import plan_packages

    catalog = _scan(options, spool, progress, notice)
    plan = plan_packages(catalog, options, table, say=progress.phase, notice=notice)
    _print_planned(plan, progress, notice)
    out = options.dest_dir / "dist" if options.build_packages else options.dest_dir
    if args.dry_run:
        _print_dry_run(plan)
        print(f"nothing written (dry run); the packages would go to {output_line(out)}")
        return 0
    index = Path(os.path.abspath(args.index)) if args.index is not None else None
    # the report beside dist/
    built = apply_plan(plan, progress=progress, force=args.force, index=index)
    progress.phase("done")
    if not args.quiet:
        _print_built(built, options)
        if index is not None:
            print(f"index: {output_line(index)}", file=sys.stderr)
    print(output_line(out))
    return 0


def _scan(
    options: BuildOptions, spool: Path | None, progress: Progress, notice: Callable[[str], None]
) -> Catalog:
    from build_tools.artifacts import scan_artifacts

    progress.phase(f"scanning {options.artifact_dir}")
    catalog = scan_artifacts(options.artifact_dir, spool=spool, jobs=options.jobs)
    if options.tree_targets:
        catalog = with_tree_targets(catalog, options.tree_targets)
    for line in catalog.notices:
        notice(line)
    mode = "kpack-split" if catalog.kpack_split else "legacy"
    progress.phase(f"{len(catalog.artifacts)} artifacts, {mode} mode")
    return catalog


def _print_planned(plan: BuildPlan, progress: Progress, notice: Callable[[str], None]) -> None:
    from build_tools.payload import Edited

    edits = sum(isinstance(f.what, Edited) for p in plan.packages for f in p.payload)
    progress.phase(
        f"planned {len(plan.packages)} packages, {edits} binary edits, "
        f"{format_size(sum(p.input_bytes for p in plan.packages))} of input"
    )
    for line in plan.notices:
        notice(line)


def _print_dry_run(plan: BuildPlan) -> None:
    split = plan.split
    if split is not None and split.splits:
        print("\n".join(split.describe()))
        print()
    from build_tools.summary import in_target_order
    from kpack.common.tables import Table, print_tables

    rows = tuple(
        (p.dist_name, p.family or "-", str(p.file_count), format_size(p.input_bytes))
        for p in in_target_order(plan.packages, lambda p: p)
    )
    header = ("package", "family", "files", "input size")
    print_tables(
        [Table(title="Packages planned", header=header, rows=rows, numeric=frozenset({2, 3}))]
    )


def _print_built(built: Sequence[Built], options: BuildOptions) -> None:
    """The packages written: one list on stdout (:mod:`build_tools.summary`); where the
    report went, on stderr."""
    from build_tools.summary import built_table, staged_table
    from kpack.common.tables import print_tables

    if options.build_packages:
        print_tables([built_table(built, options.max_wheel_size)])
    else:
        print_tables([staged_table(built)])
    report = options.dest_dir / "report.md"
    if report.is_file():
        print(f"report: {output_line(report)}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    from kpack.common.boundary import guarded

    return guarded(run, argv)


if __name__ == "__main__":
    sys.exit(main())
