"""``kpack split-artifacts``, ``verify`` and ``resolve``: the commands that run
:mod:`kpack.split`, :mod:`kpack.verify` and :mod:`kpack.resolve` (``split-wheel`` is
:func:`kpack.wheelsplit.run`).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kpack.archive import DEFAULT_LEVEL, Scheme
from kpack.cli._args import _agent_isa, _input_dir, _input_file, _output_dir
from kpack.common.cli import format_size
from kpack.databases import load_handlers
from kpack.errors import ArchiveError, TransformError, UsageError
from kpack.phdr_gate import scan_executables
from kpack.resolve import resolve_binary
from kpack.split import SplitResult, split_artifact, split_artifacts
from kpack.verify import verify_binary

log = logging.getLogger(__name__)


def _gpu_targets(values: Sequence[str] | None) -> tuple[str, ...] | None:
    if values is None:
        return None
    parts = [p.strip() for v in values for p in re.split(r"[,;]", v)]
    targets = tuple(dict.fromkeys(p for p in parts if p))
    if not targets:
        raise UsageError("--gpu-targets needs at least one target")
    return targets


def _print_result(result: SplitResult, *, verbose: int = 0) -> None:
    """The artifact dirs written, on stdout; the notes on stderr (their count, or with
    ``-v`` each one)."""
    original = sum(a.original_bytes for a in result.archives)
    stored = sum(a.size for a in result.archives)
    kernels = sum(a.kernel_count for a in result.archives)
    print(
        f"{result.artifact_dir.name} -> {result.prefix}: {len(result.outputs)} artifact dirs, "
        f"{len(result.archives)} archives, {kernels} kernels ({format_size(original)} -> "
        f"{format_size(stored)}), {len(result.databases)} database files"
    )
    for path in result.outputs:
        print(f"  {path}")
    if result.notes and not verbose:
        print(f"{len(result.notes)} notes (-v shows them)", file=sys.stderr)
    for note in result.notes if verbose else ():
        print(f"note: {note}", file=sys.stderr)


def _rocm_kpack_options(args: argparse.Namespace) -> None:
    """rocm-kpack's ``split_artifacts.py`` options, so TheRock's CMake can call us as is."""
    if args.clang_offload_bundler is not None:
        print(
            f"notice: --clang-offload-bundler {args.clang_offload_bundler} is not needed and "
            "ignored: offload bundles are read in-process",
            file=sys.stderr,
        )
    if args.tmp_dir is not None:
        _input_dir(args.tmp_dir, "--tmp-dir")
        tempfile.tempdir = str(args.tmp_dir)
        os.environ["TMPDIR"] = str(args.tmp_dir)  # for the worker processes too


def cmd_split(args: argparse.Namespace) -> int:
    _rocm_kpack_options(args)
    if args.artifact_prefix is not None and args.artifact_dir is None:
        raise UsageError("--artifact-prefix applies to --artifact-dir only (batch mode derives it)")
    if args.compression_level is not None and args.compression == "none":
        raise UsageError("--compression-level applies to --compression zstd only")
    _output_dir(args.output_dir, "--output-dir")
    handlers = load_handlers(args.split_databases) if args.split_databases else ()
    gpu_targets = _gpu_targets(args.gpu_targets)
    scheme: Scheme = "none" if args.compression == "none" else "zstd-per-kernel"
    level = DEFAULT_LEVEL if args.compression_level is None else args.compression_level
    if args.artifact_dir is not None:
        result = split_artifact(
            args.artifact_dir,
            args.output_dir,
            prefix=args.artifact_prefix,
            handlers=handlers,
            gpu_targets=gpu_targets,
            scheme=scheme,
            level=level,
            jobs=args.jobs,
            force=args.force,
            owns=getattr(args, "owns", "recorded"),
        )
        if not getattr(args, "quiet", False):
            _print_result(result, verbose=getattr(args, "verbose", 0))
        print(Path(args.output_dir).absolute())  # the last line: where the outputs went
        return 0
    batch = split_artifacts(
        args.batch_artifact_parent_dir,
        args.output_dir,
        handlers=handlers,
        gpu_targets=gpu_targets,
        scheme=scheme,
        level=level,
        jobs=args.jobs,
        force=args.force,
        owns=getattr(args, "owns", "recorded"),
    )
    quiet = getattr(args, "quiet", False)
    for result in batch.results if not quiet else ():
        _print_result(result, verbose=getattr(args, "verbose", 0))
    if not batch.results and not batch.failures and not quiet:
        print(f"no artifacts to split in {args.batch_artifact_parent_dir}")
    batch.raise_for_failures()
    print(Path(args.output_dir).absolute())  # the last line: where the outputs went
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    if args.binary.is_dir() or args.binary.suffix == ".whl":
        return _verify_executables(args)
    binary = _input_file(args.binary, "the binary")
    for archive in args.archive or ():
        _input_file(archive, "--archive")
    if args.search_root is not None:
        _input_dir(args.search_root, "--search-root")
    report = verify_binary(binary, args.archive or (), search_root=args.search_root)
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(
        f"{report.binary}: OK, {len(report.ref.co_indices)} wrappers, "
        f"{report.kernels_checked} kernels in {len(report.archives)} archives "
        f"({', '.join(report.targets)})"
    )
    for path in report.archives:
        print(f"  {path}")
    return 0


def _verify_executables(args: argparse.Namespace) -> int:
    """``kpack verify DIR|WHEEL``: the old-kernel gate (:mod:`kpack.phdr_gate`)."""
    if args.archive or args.search_root is not None:
        raise UsageError("--archive and --search-root check one binary, not a tree or wheel")
    root = args.binary if args.binary.is_dir() else _input_file(args.binary, "the wheel")
    findings = list(scan_executables(root))
    bad = [f"{f.path}: {f.problem}" for f in findings if f.problem is not None]
    if bad:
        raise TransformError(
            f"{len(bad)} of {len(findings)} ELF file(s) fail the old-kernel check; "
            "python -m rocm_kpack.tools.normalize_phdr_tree repairs a misplaced "
            "program-header table, not segments overlapping in memory (GNU strip after "
            "the split: strip before splitting, or with llvm-strip and then that tool)",
            path=args.binary,
            problems=bad,
        )
    print(
        f"{args.binary}: OK, {len(findings)} ELF file(s), every executable's program headers pinned"
    )
    return 0


def cmd_resolve(args: argparse.Namespace) -> int:
    arches = [_agent_isa(a) for a in args.arch]
    binary = _input_file(args.binary, "the binary")
    resolution = resolve_binary(binary, arches, with_generic=not args.no_generic)
    if resolution.disabled:
        print("ROCM_KPACK_DISABLE is set: kpack loading is off")
    for lookup in resolution.lookups:
        if lookup.found:
            older = "  (older runtimes: KERNEL_NOT_FOUND)" if lookup.older_runtime_fails else ""
            print(f"{lookup.key} -> {lookup.archive} [{lookup.target}]{older}")
        else:
            print(f"{lookup.key} -> not found: {lookup.reason}")
    missing = resolution.missing
    if missing:  # an answer about the archives, not a usage error: exit status 1
        raise ArchiveError(
            f"{len(missing)} of {len(resolution.lookups)} kernels not found for "
            f"{', '.join(resolution.arches)}",
            path=args.binary,
        )
    return 0
