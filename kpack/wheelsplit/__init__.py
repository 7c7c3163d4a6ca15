"""Split a fat ROCm Python wheel into a host wheel and per-GPU device wheels.

``python -m kpack.tools.split_python_wheels --input X.whl --output-dir DIR
--device-package-prefix amd-torch-device --overlay-root torch/`` (or ``kpack split-wheel``):

- the host wheel keeps every file, except that each fat binary under the overlay root
  has its device code cut out (kpack.md §3) and per-arch database files move out; its
  METADATA gains ``device-<key>`` and ``device-all`` extras;
- one device wheel per bundle key, ``<prefix>-<key>``, holding the ``.kpack`` archives
  (``<overlay root>.kpack/<group>_<target>.kpack``) and database files of that key and
  requiring ``<host>==<version>``;
- optionally variant wheels (``-<label>`` and ``-null``) and ``<name>-<version>-variants.json``;
- a split report, as JSON and Markdown, next to the wheels.

Everything is built in a temporary directory and moved into place at the end; on any
error nothing is left in the output directory.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kpack.archive import Scheme
from kpack.common.boundary import guarded
from kpack.common.safepath import (
    case_collisions,
    output_dir_problem,
    windows_name_problem,
    windows_platform,
)
from kpack.common.tempdirs import make_temp_dir, temp_dir_name
from kpack.databases import load_handlers
from kpack.errors import PackagingError, UsageError
from kpack.split import host_size
from kpack.wheelfile import DEFAULT_LIMITS, InputWheel, Limits, Member, open_wheel
from kpack.wheelsplit._bundles import (
    bundle_key,
    device_dist_name,
    device_keys,
    level_of,
    served_targets,
)
from kpack.wheelsplit._cli import Parser, add_arguments
from kpack.wheelsplit._kernels import ArchiveFile, KernelResult, split_binaries
from kpack.wheelsplit._metadata import (
    add_headers,
    device_metadata,
    extra_requirements,
    name_and_version,
    variant_requirements,
    variant_targets,
)
from kpack.wheelsplit._outputs import dist_info_name, host_layout, write_split_wheel
from kpack.wheelsplit._plan import SplitPlan, plan_split
from kpack.wheelsplit._report import DeviceWheelRow, GpuRow, LibraryRow, SplitReport
from kpack.wheelsplit._types import overlay_root_ok, prefix_ok, wheel_type
from kpack.wheelsplit._variant import (
    NULL_LABEL,
    VariantSchema,
    check_label,
    merge_index,
    render_json,
    variant_document,
)

__all__ = [
    "Parser",
    "SplitOptions",
    "add_arguments",
    "main",
    "name_and_version",
    "resolve_options",
    "run",
    "split_wheel",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SplitOptions:
    overlay_root: str
    device_package_prefix: str
    databases: tuple[str, ...] | None = None  # None: every handler
    scheme: Scheme = "zstd-per-kernel"
    level: int = 3
    jobs: int = 1
    variant: bool = False
    variant_label: str = "rocm"
    variant_schema: VariantSchema = "0.1.1"
    limits: Limits = DEFAULT_LIMITS


def resolve_options(args: argparse.Namespace) -> SplitOptions:
    """Command-line values over the ``--wheel-type`` preset; both checked."""
    preset = wheel_type(args.wheel_type) if args.wheel_type else None
    root = args.overlay_root or (preset.overlay_root if preset else None)
    prefix = args.device_package_prefix or (preset.device_package_prefix if preset else None)
    if not root or not prefix:
        raise UsageError("give --wheel-type, or both --overlay-root and --device-package-prefix")
    databases = args.databases if args.databases is not None else (
        preset.databases if preset else None
    )  # fmt: skip
    root = root if root.endswith("/") else root + "/"
    if not overlay_root_ok(root):
        raise UsageError(
            f"--overlay-root {root[:80]!r} is not a relative directory (torch/; no '.' or '..')"
        )
    if not prefix_ok(prefix):
        raise UsageError(
            f"--device-package-prefix {prefix[:80]!r} is not a normalized distribution name "
            "(amd-torch-device: lower-case letters, digits and '-')"
        )
    if not 1 <= args.compression_level <= 22:
        raise UsageError(f"--compression-level must be 1-22, got {args.compression_level}")
    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    if not args.max_expansion_ratio >= 1:
        raise UsageError(
            f"--max-expansion-ratio must be at least 1, got {args.max_expansion_ratio}"
        )
    limits = Limits(max_ratio=args.max_expansion_ratio, max_total=args.max_unpacked_size)
    label = check_label(args.variant_label)
    scheme: Scheme = "zstd-per-kernel" if args.compression == "zstd" else "none"
    return SplitOptions(
        root, prefix,
        tuple(databases) if databases is not None else None, scheme,
        args.compression_level, args.jobs, args.generate_variant_wheel, label, args.variant_schema,
        limits,
    )  # fmt: skip


def split_wheel(input_wheel: Path, output_dir: Path, options: SplitOptions) -> SplitReport:
    """Split ``input_wheel`` into ``output_dir`` (created, or extended without overwriting)."""
    output_dir = Path(output_dir).absolute()
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    handlers = load_handlers(options.databases)
    work = temp_dir_name(output_dir.parent, f".{output_dir.name}.work-")
    staging = temp_dir_name(output_dir.parent, f".{output_dir.name}.new-")
    try:
        make_temp_dir(work)
        make_temp_dir(staging)
        wheel = open_wheel(Path(input_wheel), work / "in", options.limits)
        plan = plan_split(wheel, options.overlay_root, handlers)
        if plan.empty:
            report = _unchanged(wheel, staging, plan)
        else:
            report = _split(wheel, plan, work, staging, options)
        stem = f"{wheel.name}-{wheel.version}-split-report"
        (staging / f"{stem}.json").write_bytes(report.to_json())
        (staging / f"{stem}.md").write_text(report.to_markdown(), encoding="utf-8")
        _publish(staging, output_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report


def _unchanged(wheel: InputWheel, staging: Path, plan: SplitPlan) -> SplitReport:
    note = f"no fat binaries or database files under {plan.overlay_root}; host wheel unchanged"
    log.warning("%s: %s", wheel.path.name, note)
    shutil.copyfile(wheel.path, staging / wheel.path.name)
    size = wheel.path.stat().st_size
    return SplitReport(
        wheel.path.name, size, wheel.path.name, size, True, (), (), (), (), (*plan.notes, note)
    )


def _split(
    wheel: InputWheel, plan: SplitPlan, work: Path, staging: Path, options: SplitOptions
) -> SplitReport:
    host_name, version = name_and_version(wheel.metadata, f"{wheel.dist_info}/METADATA")
    kernels = split_binaries(
        plan, wheel.root, work, scheme=options.scheme, level=options.level, jobs=options.jobs
    )
    _check_windows_names(wheel, kernels.archives)
    groups = _device_groups(plan, kernels, wheel)
    counts = {a.arcname: a.kernels for a in kernels.archives}
    moved = frozenset(d.entry.arcname for d in plan.databases)
    layout = host_layout(wheel, kernels.stripped, moved)
    _check_disjoint(layout.arcnames, groups)
    _check_windows_cases(wheel, layout.arcnames, groups)
    extras = extra_requirements(options.device_package_prefix, version, groups)
    where = f"{wheel.dist_info}/METADATA"
    host = write_split_wheel(
        staging, wheel, dist_name=wheel.name, version=wheel.version, members=layout.members,
        metadata=add_headers(wheel.metadata, extras, where), jobs=options.jobs,
    )  # fmt: skip
    rows = [
        _device_wheel(staging, wheel, key, members, host_name, version, options, counts)
        for key, members in sorted(groups.items())
    ]
    variants = _variants(staging, wheel, layout.members, groups, extras, version, options) \
        if options.variant else ()  # fmt: skip
    libraries = tuple(
        LibraryRow(f.entry.arcname, f.entry.size, host_size(kernels.stripped[f.entry.arcname]),
                   kernels.kernels[f.entry.arcname])
        for f in plan.fat
    )  # fmt: skip
    return SplitReport(
        wheel.path.name, wheel.path.stat().st_size, host.path.name, host.size, False, libraries,
        tuple(rows), _gpus(host.path.name, host.size, rows), variants,
        (*plan.notes, *kernels.notes),
    )  # fmt: skip


def _check_windows_names(wheel: InputWheel, archives: Sequence[ArchiveFile]) -> None:
    """A Windows wheel cannot hold ``…_gfx90a:xnack+.kpack`` (``:`` opens an NTFS stream;
    neither TheRock nor rocm-kpack defines another spelling): one error, nothing written."""
    if not windows_platform(wheel.tag):
        return
    bad = sorted(a.arcname for a in archives if windows_name_problem(a.arcname) is not None)
    if bad:
        raise PackagingError(
            f"{wheel.path.name}: a Windows wheel would hold archive names with ':', which "
            "Windows file systems reject (code for feature-qualified targets)",
            problems=bad,
        )


def _check_windows_cases(
    wheel: InputWheel, host: frozenset[str], groups: dict[str, list[Member]]
) -> None:
    """Installed together on Windows, the host and device wheels must not hold two names
    that differ only in case (NTFS keeps one file for both): one error, nothing written."""
    if not windows_platform(wheel.tag):
        return
    installed = sorted({wheel.install_path(n) for n in host})
    installed += [m.arcname for _, members in sorted(groups.items()) for m in members]
    pairs = case_collisions(installed)
    if pairs:
        raise PackagingError(
            "the split wheels would install names that differ only in case (one file on Windows)",
            path=wheel.path,
            problems=pairs,
        )


def _device_groups(
    plan: SplitPlan, kernels: KernelResult, wheel: InputWheel
) -> dict[str, list[Member]]:
    """Bundle key -> the device wheel's members (archives, then database files)."""
    groups: dict[str, list[Member]] = {}
    for archive in kernels.archives:
        groups.setdefault(bundle_key(archive.target), []).append(
            Member(archive.arcname, archive.archive.source())
        )
    for db in plan.databases:  # at its install path: the host's .data dir is not theirs
        groups.setdefault(db.key, []).append(
            Member(db.install_path, wheel.root / db.entry.arcname, executable=db.entry.executable)
        )
    return groups


def _check_disjoint(host: frozenset[str], groups: dict[str, list[Member]]) -> None:
    """A device wheel must never own a file the host wheel (or another device wheel) owns."""
    owner: dict[str, str] = {name: "the host wheel" for name in host}
    problems = []
    for key, members in sorted(groups.items()):
        for member in members:
            if member.arcname in owner:
                problems.append(f"{member.arcname}: device wheel {key} and {owner[member.arcname]}")
            owner.setdefault(member.arcname, f"device wheel {key}")
    if problems:
        raise PackagingError("two wheels would own the same file", problems=problems)


def _device_wheel(
    staging: Path, wheel: InputWheel, key: str, members: list[Member], host: str, version: str,
    options: SplitOptions, counts: dict[str, int],
) -> DeviceWheelRow:  # fmt: skip
    dist = device_dist_name(options.device_package_prefix, key)
    result = write_split_wheel(
        staging, wheel, dist_name=dist, version=version, members=members,
        metadata=device_metadata(dist, version, host, key), jobs=options.jobs,
    )  # fmt: skip
    archives = [m for m in members if m.arcname in counts]
    kernel_count = sum(counts[m.arcname] for m in archives)
    return DeviceWheelRow(
        key, dist, result.path.name, level_of(key).value, kernel_count, len(archives),
        len(members) - len(archives), result.size,
    )  # fmt: skip


def _variants(
    staging: Path, wheel: InputWheel, host_members: Sequence[Member],
    groups: dict[str, list[Member]], extras: list[str], version: str, options: SplitOptions,
) -> tuple[str, ...]:  # fmt: skip
    values, unknown = variant_targets(groups)
    if unknown:
        log.warning(
            "targets unknown to the amd :: gfx_arch provider, left out of the variant "
            "properties: %s", ", ".join(unknown),
        )  # fmt: skip
    where = f"{wheel.dist_info}/METADATA"
    info = dist_info_name(wheel.name, wheel.version)
    wanted = [(options.variant_label, values)] if values else []
    docs, names = [], []
    for label, props in [*wanted, (NULL_LABEL, [])]:
        doc = variant_document(label, props, options.variant_schema)
        lines = extras + variant_requirements(options.device_package_prefix, version, groups) \
            if props else extras  # fmt: skip
        members = [*host_members, Member(f"{info}/variant.json", render_json(doc))]
        result = write_split_wheel(
            staging, wheel, dist_name=wheel.name, version=wheel.version, members=members,
            metadata=add_headers(wheel.metadata, lines, where), jobs=options.jobs, label=label,
        )  # fmt: skip
        docs.append(doc)
        names.append(result.path.name)
    index = staging / f"{info.removesuffix('.dist-info')}-variants.json"
    index.write_bytes(render_json(merge_index(docs)))
    return (*names, index.name)


def _gpus(host: str, host_size: int, rows: Sequence[DeviceWheelRow]) -> tuple[GpuRow, ...]:
    """Per GPU (each target a device wheel serves, its own or its generic target's): the
    host wheel plus the device wheels its user installs (chain and generic target)."""
    by_key = {r.key: r for r in rows}
    gpus = []
    for target in served_targets(by_key):
        wheels = [by_key[k] for k in device_keys(target, by_key)]
        gpus.append(
            GpuRow(target, (host, *(r.filename for r in wheels)),
                   host_size + sum(r.size for r in wheels))
        )  # fmt: skip
    return tuple(gpus)


def _publish(staging: Path, output_dir: Path) -> None:
    """Rename the staging dir into place, or move its files into an existing directory
    after checking that none of them exists there."""
    if not output_dir.exists():
        umask = os.umask(0)
        os.umask(umask)
        staging.chmod(0o777 & ~umask)
        os.rename(staging, output_dir)
        return
    names = sorted(os.listdir(staging))
    clash = [n for n in names if (output_dir / n).exists()]
    if clash:
        raise PackagingError(
            "outputs exist already; remove them or pick another --output-dir",
            path=output_dir, problems=clash,
        )  # fmt: skip
    for name in names:
        os.replace(staging / name, output_dir / name)
    staging.rmdir()


def run(args: argparse.Namespace) -> int:
    """Split as ``args`` say and print the report (the CLI's work)."""
    options = resolve_options(args)
    problem = output_dir_problem(args.output_dir)
    if problem is not None:
        raise UsageError(f"--output-dir {problem}", path=args.output_dir)
    report = split_wheel(args.input, args.output_dir, options)
    print(report.to_markdown())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = Parser(
        prog="python -m kpack.tools.split_python_wheels", description=__doc__.splitlines()[0]
    )
    add_arguments(parser)

    def _run(argv: Sequence[str] | None) -> int:
        args = parser.parse_args(argv)
        verbose: int = args.verbose
        level = logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING
        logging.basicConfig(
            level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
        )
        return run(args)

    return guarded(_run, argv, one_line=True)


if __name__ == "__main__":
    sys.exit(main())
