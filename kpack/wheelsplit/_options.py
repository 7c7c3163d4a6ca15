"""The wheel splitter's options: :class:`SplitOptions`, made from the command line by
:func:`resolve_options` (values over the ``--wheel-type`` preset, every one checked)."""

from __future__ import annotations

import argparse
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from kpack.archive import DEFAULT_LEVEL, Scheme
from kpack.common.cli import default_jobs
from kpack.common.frozen import frozen
from kpack.errors import UsageError
from kpack.wheelfile import DEFAULT_LIMITS, Limits
from kpack.wheelsplit._requires import check_requires
from kpack.wheelsplit._shards import shard_keys
from kpack.wheelsplit._types import overlay_root_ok, prefix_ok, wheel_type
from kpack.wheelsplit._variant import VariantSchema, check_label

if TYPE_CHECKING:
    from kpack.finalize import FinalizeOptions

__all__ = [
    "DEFAULT_VARIANT_LABEL",
    "WHOLE_WHEEL",
    "OutputFormat",
    "SplitOptions",
    "report_dir_for",
    "resolve_options",
]

#: rocm-kpack's default label of the variant wheel (``...-variant.whl``).
DEFAULT_VARIANT_LABEL = "variant"
REPORT_DIR_SUFFIX = "-split-reports"

OutputFormat = Literal["wheel", "directory"]


#: ``--overlay-root`` values that name the whole wheel.
WHOLE_WHEEL = (".", "./", "/", "")


@frozen
class SplitOptions:
    overlay_root: str | None  # None: the whole wheel
    device_package_prefix: str
    databases: tuple[str, ...] | None = None  # None: every handler
    scheme: Scheme = "zstd-per-kernel"
    level: int = DEFAULT_LEVEL
    jobs: int = field(default_factory=default_jobs)  # -j: the CPU count
    variant: bool = False
    variant_label: str = DEFAULT_VARIANT_LABEL
    variant_schema: VariantSchema = "0.1.1"
    limits: Limits = DEFAULT_LIMITS
    requires: tuple[str, ...] = ()  # --device-requires-dist templates, checked
    output_format: OutputFormat = "wheel"
    force: bool = False
    tmp_dir: Path | None = None  # where the work dir goes (default: beside the output dir)
    report_dir: Path | None = None  # default: <output dir>-split-reports beside it
    keep_fat: tuple[str, ...] = ()  # --keep-fat globs: fat binaries shipped fat on purpose
    max_wheel_size: int | None = None  # --max-wheel-size: the budget of every wheel written
    finalize: FinalizeOptions | None = None  # --finalize: join the rocm-sdk set first
    #: --targets: a shard, writing the device wheels of these keys only (None: every one)
    targets: tuple[str, ...] | None = None


def report_dir_for(output_dir: Path, report_dir: Path | None) -> Path:
    """Where the split report goes: beside the output dir, never among the distributions."""
    output_dir = Path(output_dir).absolute()
    if not output_dir.name:
        raise UsageError(f"--output-dir {output_dir}: a file system root cannot be an output dir")
    default = output_dir.with_name(output_dir.name + REPORT_DIR_SUFFIX)
    chosen = Path(report_dir).absolute() if report_dir is not None else default
    if chosen == output_dir or output_dir in chosen.parents:
        raise UsageError(
            f"--report-dir {chosen} is inside --output-dir: reports never go among the "
            "distributions"
        )
    return chosen


def _preset_values(args: argparse.Namespace) -> tuple[str | None, str, tuple[str, ...] | None]:
    """(overlay root or None for the whole wheel, device package prefix, database
    handlers): flags over the preset."""
    preset = wheel_type(args.wheel_type) if args.wheel_type else None
    root = args.overlay_root
    if root is None and preset is not None:
        root = preset.overlay_root
    prefix = args.device_package_prefix or (preset.device_package_prefix if preset else None)
    if not prefix:
        raise UsageError("give --wheel-type or --device-package-prefix")
    databases = args.databases
    if databases is None and preset is not None:
        databases = preset.databases
    if root is not None and root.strip() in WHOLE_WHEEL:
        root = None
    if root is not None:
        root = root if root.endswith("/") else root + "/"
        if not overlay_root_ok(root):
            raise UsageError(
                f"--overlay-root {root[:80]!r} is not a relative directory (torch/; no '.' or "
                "'..' in it; '.' alone is the whole wheel)"
            )
    if not prefix_ok(prefix):
        raise UsageError(
            f"--device-package-prefix {prefix[:80]!r} is not a normalized distribution name "
            "(amd-torch-device: lower-case letters, digits and '-')"
        )
    return root, prefix, tuple(databases) if databases is not None else None


def _check_numbers(args: argparse.Namespace) -> None:
    if not 1 <= args.compression_level <= 22:
        raise UsageError(f"--compression-level must be 1-22, got {args.compression_level}")
    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    if not args.max_expansion_ratio >= 1:
        raise UsageError(
            f"--max-expansion-ratio must be at least 1, got {args.max_expansion_ratio}"
        )


def resolve_options(args: argparse.Namespace) -> SplitOptions:
    """Command-line values over the ``--wheel-type`` preset; all checked."""
    root, prefix, databases = _preset_values(args)
    _check_numbers(args)
    scheme: Scheme = "zstd-per-kernel" if args.compression == "zstd" else "none"
    return SplitOptions(
        overlay_root=root,
        device_package_prefix=prefix,
        databases=databases,
        scheme=scheme,
        level=args.compression_level,
        jobs=args.jobs,
        variant=args.generate_variant_wheel,
        variant_label=check_label(args.variant_label),
        variant_schema=args.variant_schema,
        limits=Limits(max_ratio=args.max_expansion_ratio, max_total=args.max_unpacked_size),
        requires=check_requires(getattr(args, "device_requires_dist", None) or ()),
        output_format=getattr(args, "output_format", "wheel"),
        force=bool(getattr(args, "force", False)),
        tmp_dir=getattr(args, "tmp_dir", None),
        report_dir=getattr(args, "report_dir", None),
        keep_fat=tuple(getattr(args, "keep_fat", None) or ()),
        max_wheel_size=getattr(args, "max_wheel_size", None),
        finalize=_finalize_options(args),
        targets=_targets(args),
    )


def _targets(args: argparse.Namespace) -> tuple[str, ...] | None:
    given = getattr(args, "targets", None)
    return None if given is None else shard_keys(given)


def _finalize_options(args: argparse.Namespace) -> FinalizeOptions | None:
    """``--finalize``'s options (kpack.finalize, imported only then); the set's flags
    without ``--finalize`` are a usage error."""
    if not getattr(args, "finalize", False):
        given = [f for f in ("rocm_version", "rocm_set") if getattr(args, f, None) is not None]
        if given or getattr(args, "expected_gpu_target", None):
            raise UsageError("--rocm-version, --rocm-set and --expected-gpu-target need --finalize")
        return None
    from kpack.finalize import options_from

    return options_from(args)
