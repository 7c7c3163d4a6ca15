"""The builder's command line for shards and archive inputs: the ``--only``,
``--tree-targets`` and ``--print-shards`` options, printing the shard plan
(:mod:`build_tools.shards.plan`), telling one shard's catalog the whole tree's targets, and
the spool TheRock's artifact archives are read into. Imports stay light (``--help`` must
work without optional dependencies)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from kpack.common.cli import add_list_argument
from kpack.errors import UsageError

if TYPE_CHECKING:
    from build_tools.artifacts import Catalog

__all__ = [
    "SPOOL_TOOL",
    "add_shard_arguments",
    "check_plan_only",
    "input_spool",
    "print_shards",
    "with_tree_targets",
]

#: The staging name of the directory TheRock's artifact archives are read into.
SPOOL_TOOL = "build-python-packages-input"


def add_shard_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--only",
        choices=("common", "device"),
        help="a shard of a --print-shards plan: common builds every package but the device "
        "wheels, device only the device wheels of --targets (kpack-split mode)",
    )
    add_list_argument(
        p,
        "--tree-targets",
        metavar="TARGET",
        help="a shard of a --print-shards plan: the per-target artifact targets of the whole "
        "tree, so a shard reading only some of them plans the shared packages alike",
    )
    p.add_argument(
        "--print-shards",
        type=int,
        metavar="N",
        help="print a JSON plan of at most N shards for a CI matrix (each: the builder "
        "arguments it adds, the artifact names it reads and the files they are) and build "
        "nothing",
    )
    p.add_argument(
        "--artifact-listing",
        type=Path,
        metavar="FILE",
        help="with --print-shards: plan the tree this file lists (a line per artifact archive "
        "ending in its byte size and file name, as 'aws s3 ls' prints them) instead of "
        "--artifact-dir's entries; --artifact-dir then needs only base_lib_generic, whose "
        "therock_manifest.json gives the mode",
    )


def print_shards(args: argparse.Namespace, *, version: str, nonce: str) -> int:
    """Print the plan of ``--print-shards N`` (``version`` and ``nonce`` checked)."""
    import json

    from build_tools.shards.plan import plan_shards

    if args.print_shards < 1:
        raise UsageError(f"--print-shards {args.print_shards}: give at least 1")
    if args.only or args.tree_targets or args.targets:
        raise UsageError("--print-shards plans --only, --tree-targets and --targets itself")
    shards = plan_shards(
        args.artifact_dir,
        args.print_shards,
        _passed_on(args, version, nonce),
        listing=args.artifact_listing,
    )
    if shards[0].reason and not args.quiet:
        print(f"notice: one shard: {shards[0].reason}", file=sys.stderr)
    print(json.dumps([s.to_json() for s in shards], indent=2))
    return 0


def check_plan_only(args: argparse.Namespace) -> None:
    """Refuse ``--artifact-listing`` outside ``--print-shards`` (a build reads the tree)."""
    if args.artifact_listing is not None:
        raise UsageError("--artifact-listing goes with --print-shards only")


def _passed_on(args: argparse.Namespace, version: str, nonce: str) -> list[str]:
    """The arguments every shard runs with: what was given that shapes the outputs."""
    out = ["--version", version, *(["--version-suffix", nonce] if nonce else [])]
    if args.devel_tarball_compression:
        out.append("--devel-tarball-compression")
    if not args.wheel_compression:
        out.append("--no-wheel-compression")
    for flag, value in (
        ("--linux-amdgpu-families", args.linux_amdgpu_families),
        ("--windows-amdgpu-families", args.windows_amdgpu_families),
    ):
        if value and value.strip():
            out += [flag, value.strip()]
    return out


def with_tree_targets(catalog: Catalog, tree: Sequence[str]) -> Catalog:
    """The catalog of one shard, told the whole tree's targets (``--tree-targets``)."""
    from dataclasses import replace

    found = set(catalog.targets)
    stray = sorted(found - set(tree))
    if stray:
        raise UsageError(
            f"--tree-targets lacks targets this shard's input holds: {', '.join(stray)}"
        )
    return replace(catalog, absent_targets=tuple(sorted(set(tree) - found)))


@contextmanager
def input_spool(artifact_dir: Path, dest_dir: Path, *, dry_run: bool) -> Iterator[Path | None]:
    """Where TheRock's artifact archives are streamed to (None without archives): a staging
    directory inside ``dest_dir`` (one file system with the outputs, removed at the end,
    a killed run's left behind removed by the next), or a temporary one for ``--dry-run``,
    which writes nothing into ``dest_dir``."""
    from kpack.artifact.packed import archive_id

    if not artifact_dir.is_dir() or not any(archive_id(p.name) for p in artifact_dir.iterdir()):
        yield None
    elif dry_run:
        with tempfile.TemporaryDirectory(prefix="build-python-packages-input-") as tmp:
            yield Path(tmp)
    else:
        from kpack.common.outputs import staging

        with staging(dest_dir, SPOOL_TOOL) as tmp:
            yield tmp
