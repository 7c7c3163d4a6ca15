"""``recombine_artifacts``: split artifacts from several build shards regrouped into package
groups (RFC0008's reduce phase), by :func:`kpack.split.recombine_artifacts`.

TheRock's RFC0008 (``docs/rfcs/RFC0008-Multi-Arch-Packaging.md``) gives::

    python -m rocm_kpack.tools.recombine_artifacts --input-shards-dir /split
        --config packaging-config.json --output-dir /recombined

The config is rocm-kpack's (``primary_shard``, ``architecture_groups``). As in rocm-kpack,
the artifact dirs a run writes are replaced whoever wrote them; no other entry of the output
dir is touched or removed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the package importable by name
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import rocm_kpack  # noqa: F401  (puts kpack on the path in a checkout)

from kpack.common.boundary import guarded
from kpack.common.cli import Parser, add_verbosity, add_version, configure_logging, output_line
from kpack.errors import UsageError
from kpack.split import load_recombine_config, recombine_artifacts

__all__ = ["main"]

PROG = "python -m rocm_kpack.tools.recombine_artifacts"


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog=PROG, description="Recombine split artifacts into package groups.")
    add_version(p)
    add_verbosity(p)
    p.add_argument(
        "--input-shards-dir",
        type=Path,
        required=True,
        help="directory holding one subdirectory of split artifacts per build shard",
    )
    p.add_argument(
        "--config",
        type=Path,
        required=True,
        help="JSON packaging config (primary_shard, architecture_groups)",
    )
    p.add_argument("--output-dir", type=Path, required=True, help="where the combined artifacts go")
    p.add_argument("--component", help="only this artifact prefix (e.g. blas_lib)")
    p.add_argument("--force", action="store_true", help="replace entries this tool did not write")
    return p


def _run(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    configure_logging(args)
    if not args.config.is_file():
        raise UsageError("--config is not a file", path=args.config)
    config = load_recombine_config(args.config)
    result = recombine_artifacts(
        args.input_shards_dir,
        config,
        args.output_dir,
        component=args.component,
        force=args.force,
        owns="named",  # rocm-kpack's rule: the artifact dirs it writes are its own
    )
    if not args.quiet:
        for path in result.outputs:
            print(f"  {path.name}")
        if result.missing:
            shown = ", ".join(result.missing[:3])
            more = f" and {len(result.missing) - 3} more" if len(result.missing) > 3 else ""
            print(f"note: group members found in no shard: {shown}{more}", file=sys.stderr)
        print(f"{len(result.outputs)} artifacts")
    print(output_line(args.output_dir))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return guarded(_run, argv)


if __name__ == "__main__":
    sys.exit(main())
