"""``rocm_kpack``: rocm-kpack's Python names, served by :mod:`kpack`.

TheRock runs rocm-kpack's tools by module (``python -m rocm_kpack.tools.split_artifacts``)
and by file (``python <kpack>/python/rocm_kpack/tools/split_artifacts.py`` with
``PYTHONPATH=<kpack>/python``), and lists some of its files as build dependencies. This
package answers every one of those names; it holds no implementation of its own:

- ``tools.split_artifacts``: ``kpack split-artifacts``;
- ``tools.bulk_unbundle``: :func:`kpack.unbundle.unbundle_binary`;
- ``tools.recombine_artifacts``: :func:`kpack.split.recombine_artifacts`;
- ``tools.split_python_wheels``: the wheel splitter, :mod:`kpack.wheelsplit`;
- ``binutils``, ``ccob_parser``, ``database_handlers``: the library names TheRock's CMake
  depends on, over :mod:`kpack.unbundle`, :mod:`kpack.bundle` and :mod:`kpack.databases`;
- ``kpack.PackedKernelArchive``, ``compression.ZstdCompressor``/``NoOpCompressor``: the
  library hipKernelProvider packs its kernels with, over :mod:`kpack.archive`.

In a checkout (``<repo>/python`` on ``PYTHONPATH``, the project not installed) the
repository root is put on ``sys.path`` so that ``kpack`` imports too.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

__all__: list[str] = []


def _checkout_root() -> Path | None:
    """The repository root when this package runs from a checkout's ``python/`` dir."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "kpack" / "__init__.py").is_file() else None


if importlib.util.find_spec("kpack") is None:  # pragma: no cover - depends on the install
    _root = _checkout_root()
    if _root is not None:
        sys.path.append(str(_root))
