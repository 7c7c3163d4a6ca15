"""``bulk_unbundle``: every device code object of fat binaries as files, named as rocm-kpack
names them (``<bundle triple>.hsaco``, ``<triple>_<i>.hsaco`` when a triple repeats).

TheRock's ``comm-libs/rccl-translate/CMakeLists.txt`` runs::

    python -m rocm_kpack.tools.bulk_unbundle --gfx-arch gfx1250 --output-dir D <librccl>

Without ``--output-dir`` each input ``F`` goes to ``F.unbundled`` (rocm-kpack's default).
As in rocm-kpack, the code-object files a run writes are replaced whoever wrote them (a
build dir rocm-kpack populated included); no other file is touched or removed.
``--force`` is accepted and changes nothing. ``--clang-offload-bundler`` (older rocm-kpack)
is accepted with one notice: bundles are read in-process.
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
from kpack.targets import is_target_id
from kpack.unbundle import unbundle_binary

__all__ = ["main"]

PROG = "python -m rocm_kpack.tools.bulk_unbundle"


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog=PROG, description="Extract device code objects from fat binaries.")
    add_version(p)
    add_verbosity(p)
    p.add_argument("files", nargs="+", type=Path, help="fat binaries or offload-bundle files")
    p.add_argument(
        "-o",
        "--output-dir",
        type=Path,
        help="write the code objects of the one input here (default: <input>.unbundled)",
    )
    p.add_argument(
        "--gfx-arch",
        metavar="ARCH",
        help="only code objects for this base architecture (gfx1250 also keeps gfx1250:...)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="accepted for rocm-kpack's command line (the files it writes are always replaced)",
    )
    p.add_argument(
        "--clang-offload-bundler",
        type=Path,
        metavar="PATH",
        help="accepted for rocm-kpack's command line and ignored (bundles are read in-process)",
    )
    return p


def _run(argv: Sequence[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    configure_logging(args)
    if args.output_dir is not None and len(args.files) != 1:
        parser.error("--output-dir requires exactly one input file")
    if args.gfx_arch is not None and (":" in args.gfx_arch or not is_target_id(args.gfx_arch)):
        raise UsageError(f"--gfx-arch {args.gfx_arch!r} is not a base architecture (gfx1250)")
    for file in args.files:  # a path on the command line that cannot be read: a usage error
        if not file.is_file():
            what = "not a regular file" if file.exists() else "no such file"
            raise UsageError(what, path=file)
    if args.clang_offload_bundler is not None:
        print(
            f"notice: --clang-offload-bundler {args.clang_offload_bundler} is not needed and "
            "ignored: offload bundles are read in-process",
            file=sys.stderr,
        )
    for file in args.files:
        dest = args.output_dir or file.with_suffix(".unbundled")
        result = unbundle_binary(  # rocm-kpack's rule: the files it writes are its own
            file, dest, gfx_arch=args.gfx_arch, force=args.force, owns="named"
        )
        if not args.quiet:
            print(f"Unbundled {dest}: {', '.join(result.names)}")
        print(output_line(dest))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return guarded(_run, argv)


if __name__ == "__main__":
    sys.exit(main())
