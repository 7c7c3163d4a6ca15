"""A release-size TheRock artifact tree and the provenance file written beside it.

The tree is the real sample tree (``sample_tree/``: Debian's ROCm runtime libraries,
headers and CMake files, hipcc-built fat libraries and programs) in the chosen mode, plus the
fat libraries of :func:`plan_libraries` up to the requested size:

- ``legacy`` (``KPACK_SPLIT_ARTIFACTS`` false): each library once per TheRock release family,
  in ``<artifact>_lib_<family>``, its bundles holding that family's targets;
- ``kpack`` (true, fat artifacts): each library once, in ``<artifact>_lib_generic``, its
  bundles holding every target; the builder splits them.

Both modes hold the same code objects. The libraries are hard links to the library cache
(a copy where the file system cannot link), so a tree costs little disk beyond the cache;
nothing reads them for writing. ``<tree>.inputs.json`` says what is real and what is
relabelled. The tree is assembled in ``.<name>.partial`` beside it and renamed when done.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from benchmarks.release_inputs.fatlib import LibrarySpec, make_library, source_index
from benchmarks.release_inputs.plan import ALL, PlannedLibrary, plan_libraries
from benchmarks.release_inputs.pool import REAL, Pool, open_pool
from benchmarks.release_inputs.targets import FAMILIES, TARGETS
from kpack.errors import UsageError

__all__ = ["MODES", "TreeResult", "make_release_tree", "tree_bytes"]

MODES = ("legacy", "kpack")
BASE = "base_lib_generic/base/aux-overlay/stage/share/therock"
SAMPLE_FAMILY = "gfx90a"


@dataclass(frozen=True, kw_only=True)
class TreeResult:
    path: Path
    provenance: Path
    bytes: int


def tree_bytes(root: Path) -> int:
    """Bytes of the regular files under ``root`` (symlinks not followed)."""
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                total += os.path.getsize(path)
    return total


def _place(lib: Path, tree: Path, artifact: str, stage: str, planned: PlannedLibrary) -> None:
    art = tree / artifact
    libdir = art / stage / "lib"
    libdir.mkdir(parents=True, exist_ok=True)
    manifest = art / "artifact_manifest.txt"
    stages = set(manifest.read_text().split()) if manifest.is_file() else set()
    manifest.write_text("\n".join(sorted(stages | {stage})) + "\n")
    dest = libdir / planned.filename
    _link_or_copy(str(lib), str(dest))
    (libdir / planned.soname).symlink_to(planned.filename)


def _provenance(pool: Pool, mode: str, libs: tuple[PlannedLibrary, ...]) -> dict[str, object]:
    real: Counter[str] = Counter()
    relabelled: Counter[str] = Counter()
    sources: dict[str, Counter[str]] = {t: Counter() for t in ALL}
    for planned in libs:
        for unit, pass_ in planned.units:
            sizes = pool.sizes(unit)
            for target in ALL:
                src = source_index(target, pass_)
                (real if REAL[src] == target else relabelled)[target] += sizes[src]
                sources[target][REAL[src]] += 1
    return {
        "mode": mode,
        "real_parts": {
            "code_objects": [
                f"{pool.processors.wheel}: {pool.processors.path.name}, "
                f"{pool.units} compressed bundles, 27 processors",
                f"{pool.generics.wheel}: {pool.generics.path.name}, "
                "generic targets gfx9-4-generic gfx10-3-generic gfx11-generic gfx12-generic",
            ],
            "sample_tree": "sample_tree/make_sample_tree.py: Debian bookworm ROCm packages "
            "(HIP runtime, ROCr, comgr, rocRAND, hipRAND, rocPRIM, device libs, hipcc) and "
            "hipcc/cc-built fat libraries and programs; in legacy mode its per-family "
            "artifacts (rand_lib, fft_lib: Debian's librocrand and hipcc's libhipsample, "
            "gfx803 to gfx1030) are in every family as they are",
        },
        "relabelled": (
            "a code object of another target whose ELF e_flags (EF_AMDGPU_MACH, xnack and "
            "sramecc selectors 'any' where supported, generic version 1) and, for a generic "
            "target, EI_ABIVERSION (code object v6) were rewritten, and whose bundle entry "
            "names the new target; its code and AMDGPU metadata note are the source's. "
            "gfx90c, gfx9-generic, gfx10-1-generic, gfx12-5-generic and gfx1250-strict have "
            "no real code object in the pool; in pass p > 0 every target gets target "
            "(j + p) % 31's code object"
        ),
        "host_code": "each fat library is a small gcc-built shared object (SONAME as named) "
        "around its .hip_fatbin of plain bundles, one .hipFatBinSegment wrapper per bundle",
        "targets": {
            t: {
                "real_bytes": real[t],
                "relabelled_bytes": relabelled[t],
                "sources": dict(sorted(sources[t].items())),
            }
            for t in ALL
        },
        "families": {f: list(ts) for f, ts in FAMILIES.items()} if mode == "legacy" else None,
        "libraries": [
            {
                "artifact": lib.artifact,
                "stage": lib.stage,
                "file": lib.filename,
                "soname": lib.soname,
                "units": [list(u) for u in lib.units],
                "code_objects": len(lib.units) * len(ALL),
                "bytes_all_targets": lib.size,
            }
            for lib in libs
        ],
    }


def _replicate_sample(tree: Path) -> None:
    """Give every family the sample tree's per-family artifacts (its rand and fft fat
    libraries): TheRock's families all ship the same libraries."""
    for art in sorted(tree.glob(f"*_{SAMPLE_FAMILY}")):
        prefix = art.name[: -len(SAMPLE_FAMILY)]
        for family in FAMILIES:
            if family != SAMPLE_FAMILY:
                shutil.copytree(
                    art, tree / f"{prefix}{family}", symlinks=True, copy_function=_link_or_copy
                )


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _family_targets(family: str) -> tuple[str, ...]:
    members = set(FAMILIES[family])
    return tuple(t.name for t in TARGETS if t.name in members)


def _add_libraries(
    pool: Pool, tree: Path, mode: str, libs: tuple[PlannedLibrary, ...], cache: Path
) -> None:
    for planned in libs:
        groups = {"generic": ALL} if mode == "kpack" else {f: _family_targets(f) for f in FAMILIES}
        for label, targets in groups.items():
            spec = LibrarySpec(
                filename=planned.filename,
                soname=planned.soname,
                units=planned.units,
                targets=targets,
            )
            lib = make_library(pool, spec, cache)
            _place(lib, tree, f"{planned.artifact}_lib_{label}", planned.stage, planned)


def make_release_tree(output: Path, *, mode: str, scale: float, cache: Path) -> TreeResult:
    """Write the tree of ``scale`` GB (10^9 bytes, at least) in ``mode`` at ``output``."""
    from sample_tree.make_sample_tree import make_sample_tree

    if mode not in MODES:
        raise UsageError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if scale <= 0:
        raise UsageError(f"--scale must be positive, not {scale}")
    output = output.absolute()
    provenance = output.with_name(output.name + ".inputs.json")
    if output.exists():
        raise UsageError(f"{output} exists; remove it first")
    work = output.with_name(f".{output.name}.partial")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        tree = make_sample_tree(
            work / "artifacts", cache_dir=cache, family=SAMPLE_FAMILY, kpack_split=mode == "kpack"
        )
        if mode == "legacy":
            _replicate_sample(tree)
        pool = open_pool(cache)
        libs = plan_libraries(pool, max(0, int(scale * 1e9) - tree_bytes(tree)))
        _add_libraries(pool, tree, mode, libs, cache)
        processors = [t.name for t in TARGETS if not t.generic and "-" not in t.name]
        (tree / BASE / "dist_info.json").write_text(
            json.dumps({"dist_amdgpu_targets": ";".join(processors)}, indent=2) + "\n"
        )
        doc = _provenance(pool, mode, libs)
        size = tree_bytes(tree)
        doc = {"scale_gb": scale, "tree_bytes": size, **doc}
        (work / "inputs.json").write_text(json.dumps(doc, indent=1) + "\n")
        tree.rename(output)
        (work / "inputs.json").rename(provenance)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return TreeResult(path=output, provenance=provenance, bytes=size)
