"""``split_artifacts``: rocm-kpack's artifact splitter, as ``kpack split-artifacts``.

TheRock's ``cmake/therock_artifacts.cmake`` runs this file directly::

    python <kpack>/python/rocm_kpack/tools/split_artifacts.py --artifact-dir P_<family>
        --output-dir artifacts/ --artifact-prefix P --clang-offload-bundler B
        [--split-databases ...] [--gpu-targets ...]

and re-runs it into the same ``--output-dir`` on incremental builds. As in rocm-kpack, the
``<prefix>_<component>_<target>/`` dirs a run writes are replaced whoever wrote them (a build
dir rocm-kpack populated included); nothing else in the output dir is touched or removed.
``--clang-offload-bundler`` is accepted with one notice (bundles are read in-process);
``--tmp-dir`` and ``--verbose`` work as in rocm-kpack. Every other ``kpack split-artifacts``
option works too.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

if __package__ in (None, ""):  # run as a file: make the package importable by name
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import rocm_kpack  # noqa: F401  (puts kpack on the path in a checkout)

from kpack.cli import add_split_artifacts_arguments
from kpack.common.boundary import guarded
from kpack.common.cli import add_verbosity, add_version, configure_logging
from kpack.wheelsplit import Parser

__all__ = ["main"]

PROG = "python -m rocm_kpack.tools.split_artifacts"


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog=PROG, description="Split fat artifacts into P_generic and P_<target>.")
    add_version(p)
    add_verbosity(p)
    add_split_artifacts_arguments(p)
    # rocm-kpack's rule for its output dir: the artifact dirs a run writes are its own, so a
    # build dir it (or rocm-kpack) populated re-runs as written; nothing else there is touched
    p.set_defaults(owns="named")
    return p


def _run(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    configure_logging(args, fmt="%(levelname)s %(name)s: %(message)s")
    return int(args.func(args))


def main(argv: Sequence[str] | None = None) -> int:
    return guarded(_run, argv, one_line=True)


if __name__ == "__main__":
    sys.exit(main())
