"""The library registry the rendered ``_dist_info`` carries, checked against the build.

Each entry of ``manifests/libraries.yaml`` is looked up among the files its package
ships, the way ``find_libraries`` will look at run time; an entry that would miss a
library that ships is a build error.
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Sequence

from kpack.errors import ManifestError

from ..manifests import Manifests
from ._model import RuntimePackage

__all__ = ["library_registry"]


def _named_for(shortname: str, basename: str, *, windows: bool = False) -> bool:
    """``libhipdnn_backend.so.1`` is named for ``hipdnn``; ``libhipblaslt.so`` is not named
    for ``hipblas``, nor ``librocprofiler-sdk-roctx.so`` for ``rocprofiler-sdk``. On
    Windows DLLs have no ``lib`` prefix: ``hipdnn_backend.dll``, ``amdhip64_7.dll``."""
    stem = shortname if windows else f"lib{shortname}"
    if not windows:
        return basename.startswith(stem) and basename[len(stem) : len(stem) + 1] in (".", "_")
    name = basename.lower()
    return (
        name.endswith(".dll")
        and name.startswith(stem.lower())
        and name[len(stem) : len(stem) + 1] in (".", "_")
    )


def library_registry(
    manifests: Manifests, runtime: Sequence[RuntimePackage], *, windows: bool = False
) -> list[dict[str, object]]:
    """Every registry entry (for ``_dist_info``), as TheRock's registry has them all.

    An entry whose pattern matches no file this build ships, although a library named for
    its short name ships (``libhipdnn_backend.so.1`` for ``hipdnn``), is a build error: at
    run time ``find_libraries`` would fail to find a library that is there. A Windows
    package set is checked the way ``find_libraries`` looks there: ``bin/`` with the DLL
    pattern (an entry without one is not looked up on Windows).
    """
    out: list[dict[str, object]] = []
    problems: list[str] = []
    for lib in manifests.libraries:
        files = [
            relpath
            for pkg in runtime
            if pkg.spec.logical == lib.package
            for relpath in [*pkg.layout.files, *pkg.layout.aliases]
        ]
        directory, pattern = (
            ("bin", lib.dll_pattern) if windows else (lib.posix_relpath, lib.so_pattern)
        )
        present = pattern is not None and any(
            posixpath.dirname(relpath) == directory
            and fnmatch.fnmatchcase(posixpath.basename(relpath), pattern)
            for relpath in files
        )
        named = sorted(
            r for r in files if _named_for(lib.shortname, posixpath.basename(r), windows=windows)
        )
        if not present and named and pattern is not None:
            problems.append(
                f"{lib.shortname}: pattern {directory}/{pattern} matches no "
                f"file of the {lib.package} package, but {', '.join(named)} ships"
            )
        out.append(
            {
                "shortname": lib.shortname,
                "package": lib.package,
                "so_pattern": lib.so_pattern,
                "dll_pattern": lib.dll_pattern,
                "posix_relpath": lib.posix_relpath,
                "optional": lib.optional,
                "shipped": present,
            }
        )
    if problems:
        raise ManifestError(
            "library registry entries miss the files they name (manifests/libraries.yaml)",
            problems=problems,
        )
    return sorted(out, key=lambda e: str(e["shortname"]))
