"""``kpack``: inspect, extract, split, verify and resolve HIP device code.

Thin layer: argparse, logging setup and printing. The work lives in
:mod:`kpack.split`, :mod:`kpack.resolve`, :mod:`kpack.bundle`, :mod:`kpack.archive` and
:mod:`kpack.transform`. Any :class:`~kpack.errors.RocmPackagingError` becomes one
``error: ...`` line on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import logging
import mmap
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from kpack.archive import KpackArchive, Scheme
from kpack.bundle import PLAIN_MAGIC, iter_bundles
from kpack.common.boundary import guarded
from kpack.common.safepath import Root, output_dir_problem, safe_relpath
from kpack.common.tempdirs import make_temp_dir, temp_dir_name
from kpack.databases import handler_names, load_handlers
from kpack.errors import ArchiveError, UsageError
from kpack.hipfmt import PE_FATBIN, identify
from kpack.resolve import ISA_PREFIX, read_kpack_ref, resolve_binary
from kpack.split import SplitResult, split_artifact, split_artifacts, verify_binary
from kpack.targets import is_target_id
from kpack.transform import extract_kernels, inspect_fat_binary, read_pe_fat
from kpack.wheelsplit import Parser
from kpack.wheelsplit import add_arguments as add_split_wheel_arguments

__all__ = ["main"]

log = logging.getLogger(__name__)


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def _follow(path: Path) -> Path:
    """``path`` with its final symlinks followed (directories along it left as they are)."""
    seen = 0
    while path.is_symlink() and seen < 40:
        path = path.parent / os.readlink(path)
        seen += 1
    return path


#: Features an agent ISA may carry (``gfx942:sramecc+:xnack-`` has two): lookups try every
#: subset of them, so their number is bounded.
_MAX_ISA_FEATURES = 4


def _input_file(path: Path, what: str = "the input") -> Path:
    """``path`` with its final symlinks followed; it must be a regular file (a directory,
    a FIFO or a socket is refused before anything opens it)."""
    real = _follow(path)
    try:
        mode = os.stat(real).st_mode
    except OSError as exc:
        raise UsageError(f"cannot read {what}: {exc.strerror}", path=path) from None
    if stat.S_ISDIR(mode):
        raise UsageError(f"{what} is a directory, not a file", path=path)
    if not stat.S_ISREG(mode):
        raise UsageError(f"{what} is not a regular file", path=path)
    return real


def _input_dir(path: Path, flag: str) -> Path:
    if not path.is_dir():
        raise UsageError(f"{flag} is not a directory", path=path)
    return path


def _output_dir(path: Path, flag: str) -> Path:
    problem = output_dir_problem(path)
    if problem is not None:
        raise UsageError(f"{flag} {problem}", path=path)
    return path


def _shown(value: str) -> str:
    return repr(value if len(value) <= 80 else value[:80] + "...")


def _target(value: str | None) -> str | None:
    """``--target``: a target id (a bare ``gfx90a`` selects its feature variants too)."""
    if value is not None and not is_target_id(value):
        raise UsageError(
            f"--target {_shown(value)} is not a target id (gfx942, gfx90a:xnack+, gfx9-4-generic)"
        )
    return value


def _agent_isa(value: str) -> str:
    """``--arch``: an agent ISA, ``[amdgcn-amd-amdhsa--]gfx942:sramecc+:xnack-``."""
    isa = value.removeprefix(ISA_PREFIX)
    if not is_target_id(isa) or isa.count(":") > _MAX_ISA_FEATURES:
        raise UsageError(
            f"--arch {_shown(value)} is not an agent ISA (gfx942:sramecc+:xnack-, gfx1100; at "
            f"most {_MAX_ISA_FEATURES} features)"
        )
    return value


def _file_kind(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            head = f.read(len(PLAIN_MAGIC))
    except OSError as exc:
        raise UsageError(f"cannot read: {exc.strerror}", path=path) from exc
    kind = identify(head)
    if kind is not None:
        return kind
    raise UsageError("not an ELF or PE file, an offload bundle or a .kpack archive", path=path)


@contextmanager
def _mapped(path: Path, offset: int = 0, size: int | None = None) -> Iterator[memoryview]:
    """A read-only view of ``path`` (or of a range); unmapped once no view is left."""
    with open(path, "rb") as f:
        if f.seek(0, 2) == 0:
            yield memoryview(b"")
            return
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    end = len(mm) if size is None else offset + size
    yield memoryview(mm)[offset:end]  # no explicit close: code-object views may outlive it


def _bundle_rows(path: Path, offset: int = 0, size: int | None = None) -> list[str]:
    """One line per bundle and code object, then per-target totals."""
    rows: list[str] = []
    totals: dict[str, list[int]] = {}
    with _mapped(path, offset, size) as view:
        for number, bundle in enumerate(iter_bundles(view, name=str(path))):
            kind = (
                f"CCOB v{bundle.ccob_version} {bundle.compression}"
                if bundle.compression
                else "plain"
            )
            rows.append(
                f"  bundle {number} at {bundle.offset:#x}: {bundle.end - bundle.offset} "
                f"bytes, {kind}, {len(bundle.code_objects)} code objects"
            )
            for co in bundle.code_objects:
                rows.append(f"    {co.target:<20} {co.size:>12} bytes  {co.triple}")
                total = totals.setdefault(co.target, [0, 0])
                total[0] += 1
                total[1] += co.size
            del bundle
    rows.append("  per target:")
    rows += [
        f"    {t:<20} {c:>5} code objects {s:>14} bytes" for t, (c, s) in sorted(totals.items())
    ]
    return rows


def _transformed_lines(path: Path, what: str) -> list[str]:
    """What a transformed binary's marker says (ELF or PE)."""
    ref = read_kpack_ref(path)
    lines = [f"{path}: transformed {what} (device code in .kpack archives)"]
    if ref is not None:
        lines += [
            f"  kernel_name: {ref.kernel_name}",
            f"  search paths: {', '.join(ref.search_paths)}",
            f"  wrappers: {len(ref.co_indices)} (HIPK)",
        ]
    return lines


def _inspect_elf(path: Path) -> list[str]:
    info = inspect_fat_binary(path)
    if info is None:
        return [f"{path}: ELF without .hip_fatbin (no device code)"]
    if info.already_transformed:
        return _transformed_lines(path, "host binary")
    lines = [
        f"{path}: HIP fat binary",
        f"  .hip_fatbin: offset {info.hip_fatbin_offset:#x}, {info.hip_fatbin_size} bytes",
        f"  wrappers: {info.wrapper_count}, relocation: {info.relocation_kind}",
    ]
    return lines + _bundle_rows(path, info.hip_fatbin_offset, info.hip_fatbin_size)


def _inspect_pe(path: Path) -> list[str]:
    fat = read_pe_fat(path)
    if fat is None:
        return [f"{path}: PE image without {PE_FATBIN} (no device code)"]
    if fat.marker is not None:
        return _transformed_lines(path, "PE host binary")
    section = fat.fatbin
    lines = [
        f"{path}: HIP fat binary (PE32+ x86-64)",
        f"  {PE_FATBIN}: RVA {section.rva:#x}, file offset {section.raw_offset:#x}, "
        f"{section.file_bytes()} bytes",
        f"  wrappers: {len(fat.wrappers)}, base relocations: {len(fat.relocations)}",
    ]
    return lines + _bundle_rows(path, section.raw_offset, section.file_bytes())


def _inspect_kpack(path: Path) -> list[str]:
    with KpackArchive.open(path) as archive:
        per_target: dict[str, list[int]] = {}
        for key, target in archive:
            total = per_target.setdefault(target, [0, 0])
            total[0] += 1
            total[1] += archive.entry(key, target).original_size
        binaries = {k.rpartition("#")[0] for k, _ in archive}
        original = sum(s for _, s in per_target.values())
        size = path.stat().st_size
        lines = [
            f"{path}: .kpack archive",
            f"  scheme: {archive.scheme}, group: {archive.group_name}, "
            f"family: {archive.gfx_arch_family}",
            f"  gfx_arches: {', '.join(archive.gfx_arches)}",
            f"  kernels: {len(archive)} from {len(binaries)} binaries",
            f"  size: {size} bytes for {original} bytes of code objects",
        ]
        lines += [
            f"    {t:<20} {c:>5} kernels {s:>14} bytes" for t, (c, s) in sorted(per_target.items())
        ]
    return lines


def cmd_inspect(args: argparse.Namespace) -> int:
    path = _input_file(args.file)
    kind = _file_kind(path)
    if kind == "elf":
        lines = _inspect_elf(path)
    elif kind == "pe":
        lines = _inspect_pe(path)
    elif kind == "kpack":
        lines = _inspect_kpack(path)
    else:
        lines = [f"{path}: offload bundle file", *_bundle_rows(path)]
    print("\n".join(lines))
    return 0


def _wants(target: str, wanted: str | None) -> bool:
    if wanted is None or target == wanted:
        return True
    return ":" not in wanted and target.split(":", 1)[0] == wanted


def _extract_items(path: Path, kind: str, wanted: str | None) -> Iterator[tuple[str, bytes]]:
    """``(relative output name, bytes)`` for every selected code object.

    Names are made from untrusted bytes (TOC keys, bundle triples) and are validated by the
    caller's :class:`~kpack.common.safepath.Root` before anything is written.
    """
    if kind == "kpack":
        with KpackArchive.open(path) as archive:
            for key, target in archive:
                if _wants(target, wanted):
                    safe_relpath(key, what="binary key", source=path, error=ArchiveError)
                    yield f"{key}.{target}.co", archive.read(key, target)
    elif kind == "bundle":
        with _mapped(path) as view:
            for number, bundle in enumerate(iter_bundles(view, name=str(path))):
                for co in bundle.code_objects:
                    if _wants(co.target, wanted):
                        yield f"{path.name}#{number}.{co.target}.co", bytes(co.data)
                del bundle
    else:  # an ELF or PE host binary
        info = inspect_fat_binary(path)
        if info is None:
            section = PE_FATBIN if kind == "pe" else ".hip_fatbin"
            raise UsageError(f"{kind.upper()} file without {section}: no device code", path=path)
        if info.already_transformed:
            raise UsageError(
                "already transformed: its device code is in .kpack archives; extract from those",
                path=path,
            )
        for kernel in extract_kernels(path):
            if _wants(kernel.target, wanted):
                yield f"{path.name}#{kernel.index}.{kernel.target}.co", kernel.read()


def _extract_destination(out: Path) -> None:
    """``-o`` must be a new path or an empty real directory (nothing in it is overwritten)."""
    if out.is_symlink():
        raise UsageError("output is a symlink; give a real directory", path=out)
    _output_dir(out, "output")
    if out.is_dir() and any(out.iterdir()):
        raise UsageError("output directory is not empty (nothing is overwritten)", path=out)


def cmd_extract(args: argparse.Namespace) -> int:
    path = _input_file(args.file)
    _target(args.target)
    kind = _file_kind(path)
    out: Path = args.output
    _extract_destination(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # Everything goes to a staging dir beside -o first, so a failure half-way leaves nothing.
    staging = temp_dir_name(out.parent, f".{out.name}.partial-")
    try:
        root = Root(make_temp_dir(staging), error=UsageError)
        count = 0
        for name, data in _extract_items(path, kind, args.target):
            root.write_bytes(name, data, what=f"output name from {path.name}")
            count += 1
        if count == 0:
            what = f" for target {args.target}" if args.target else ""
            raise UsageError(f"no code objects{what}", path=path)
        if out.is_dir():
            out.rmdir()  # checked empty above
        os.rename(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    print(f"extracted {count} code objects to {out}")
    return 0


def _gpu_targets(values: Sequence[str] | None) -> tuple[str, ...] | None:
    if values is None:
        return None
    parts = [p.strip() for v in values for p in re.split(r"[,;]", v)]
    targets = tuple(dict.fromkeys(p for p in parts if p))
    if not targets:
        raise UsageError("--gpu-targets needs at least one target")
    return targets


def _print_result(result: SplitResult) -> None:
    original = sum(a.original_bytes for a in result.archives)
    stored = sum(a.size for a in result.archives)
    kernels = sum(a.kernel_count for a in result.archives)
    print(
        f"{result.artifact_dir.name} -> {result.prefix}: {len(result.outputs)} artifact dirs, "
        f"{len(result.archives)} archives, {kernels} kernels "
        f"({_mb(original)} -> {_mb(stored)}), {len(result.databases)} database files"
    )
    for path in result.outputs:
        print(f"  {path}")
    for note in result.notes:
        print(f"  note: {note}")


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
    level = 3 if args.compression_level is None else args.compression_level
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
        )
        _print_result(result)
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
    )
    for result in batch.results:
        _print_result(result)
    if not batch.results and not batch.failures:
        print(f"no artifacts to split in {args.batch_artifact_parent_dir}")
    batch.raise_for_failures()
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
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
    if missing:
        raise UsageError(
            f"{len(missing)} of {len(resolution.lookups)} kernels not found for "
            f"{', '.join(resolution.arches)}",
            path=args.binary,
        )
    return 0


def cmd_split_wheel(args: argparse.Namespace) -> int:
    from kpack.wheelsplit import run  # the application layer, loaded on use

    return run(args)


def _parser() -> argparse.ArgumentParser:
    common = Parser(add_help=False)
    common.add_argument(
        "-v", "--verbose", action="count", default=0, help="log progress (-vv: debug)"
    )
    parser = Parser(prog="kpack", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("inspect", parents=[common], help="describe a fat binary, bundle or .kpack")
    p.add_argument("file", type=Path)
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("extract", parents=[common], help="write code objects as files")
    p.add_argument("file", type=Path)
    p.add_argument("-o", "--output", type=Path, required=True, help="output directory")
    p.add_argument(
        "--target", help="only this target id (a bare gfxNNN also selects its feature variants)"
    )
    p.set_defaults(func=cmd_extract)

    p = sub.add_parser(
        "split-artifacts",
        parents=[common],
        help="split fat artifacts into P_generic and per-target P_<target>",
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--artifact-dir", type=Path, help="one artifact directory")
    source.add_argument(
        "--batch-artifact-parent-dir",
        type=Path,
        help="split every artifact below DIR (except *_generic)",
    )
    p.add_argument("--output-dir", type=Path, required=True)
    p.add_argument("--artifact-prefix", help="P = {name}_{component} (default: from the dir name)")
    p.add_argument(
        "--split-databases",
        nargs="+",
        metavar="HANDLER",
        choices=handler_names(),
        help="database handlers: " + ", ".join(handler_names()),
    )
    p.add_argument(
        "--gpu-targets",
        nargs="+",
        metavar="TARGET",
        help="only produce per-arch outputs for these targets' base arches",
    )
    p.add_argument("--compression", choices=("none", "zstd"), default="zstd")
    p.add_argument("--compression-level", type=int, metavar="N", help="zstd level 1-22 (3)")
    p.add_argument("-j", "--jobs", type=int, default=2, help="worker processes (2)")
    p.add_argument("--force", action="store_true", help="replace existing output dirs")
    p.add_argument(
        "--tmp-dir", type=Path, metavar="DIR",
        help="where temporary files go (rocm-kpack's option; default: TMPDIR)",
    )  # fmt: skip
    p.add_argument(
        "--clang-offload-bundler", type=Path, metavar="PATH",
        help="accepted for rocm-kpack's command line and ignored: bundles are read in-process",
    )  # fmt: skip
    p.set_defaults(func=cmd_split)

    p = sub.add_parser(
        "verify", parents=[common], help="check a transformed binary against its archives"
    )
    p.add_argument("binary", type=Path)
    p.add_argument(
        "--archive",
        type=Path,
        action="append",
        metavar="A",
        help="archive to check against (repeatable; default: from the marker)",
    )
    p.add_argument(
        "--search-root",
        type=Path,
        metavar="DIR",
        help="find the marker's archives anywhere below DIR",
    )
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser(
        "resolve", parents=[common], help="print what the runtime would load for an agent ISA"
    )
    p.add_argument("binary", type=Path)
    p.add_argument(
        "--arch",
        action="append",
        required=True,
        metavar="ISA",
        help="agent ISA, e.g. gfx942:sramecc+:xnack-; its LLVM generic target "
        "(gfx9-4-generic:sramecc+:xnack-) is tried next, as the runtime does",
    )
    p.add_argument(
        "--no-generic",
        action="store_true",
        help="look the ISA up alone, without its generic target",
    )
    p.set_defaults(func=cmd_resolve)

    p = sub.add_parser(
        "split-wheel", help="split a fat Python wheel into a host wheel and device wheels"
    )
    add_split_wheel_arguments(p)
    p.set_defaults(func=cmd_split_wheel)
    return parser


def _run(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    verbose: int = args.verbose
    level = logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    return int(args.func(args))


def main(argv: Sequence[str] | None = None) -> int:
    return guarded(_run, argv, one_line=True)


if __name__ == "__main__":
    sys.exit(main())
