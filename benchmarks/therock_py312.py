"""Run TheRock's ``build_python_packages.py`` on Python 3.11 (it is written for 3.12).

    python benchmarks/therock_py312.py THEROCK/build_tools/build_python_packages.py ARGS...

TheRock's builder uses two Python 3.12 additions and nothing else newer than 3.11: the
``walk_up`` argument of ``PurePath.relative_to`` and the ``follow_symlinks`` argument of
``Path.exists``. This backports both (with ``os.path.relpath`` and ``os.path.lexists``)
when they are missing, then runs the script as ``__main__``. Its other needs are its own:
``python-magic`` (libmagic) importable and ``patchelf`` on PATH. Used by
``bench_build.py --therock``; never by the project.
"""

from __future__ import annotations

import os
import pathlib
import runpy
import sys
from typing import Any

if sys.version_info < (3, 12):
    _relative_to = pathlib.PurePath.relative_to
    _exists = pathlib.Path.exists

    def _relative_to_312(self: Any, other: Any, *rest: Any, walk_up: bool = False) -> Any:
        if not walk_up:
            return _relative_to(self, other, *rest)
        base = type(self)(other, *rest)
        return type(self)(os.path.relpath(os.fspath(self), os.fspath(base)))

    def _exists_312(self: Any, *, follow_symlinks: bool = True) -> bool:
        return _exists(self) if follow_symlinks else os.path.lexists(self)

    pathlib.PurePath.relative_to = _relative_to_312  # type: ignore[method-assign]
    pathlib.Path.exists = _exists_312  # type: ignore[method-assign]

if __name__ == "__main__":
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")
