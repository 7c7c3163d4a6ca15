"""The real code objects release inputs are made of.

Two ROCm 7 wheels from PyPI, built with TheRock's toolchain and cached by
``tests/pypi_inputs.py`` (sha256-pinned): ``jax-rocm10-pjrt`` 0.12.0, whose plugin holds 45
compressed bundles (translation units) of code objects for 27 processors (gfx900 to
gfx1250), and ``jax-rocm7-pjrt`` 0.10.0, whose 41 bundles add the generic targets
gfx9-4-generic, gfx10-3-generic, gfx11-generic and gfx12-generic. Each plugin is extracted
once into ``<cache>/bench/pool/``; a bundle is decoded when a library needs it.

A translation unit ``i`` of the pool is jax-rocm10-pjrt's bundle ``i`` with the generic
code objects of jax-rocm7-pjrt's bundle ``i % 41``: 31 real code objects, one per target of
:data:`REAL`, in that order.
"""

from __future__ import annotations

import mmap
import shutil
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from elftools.elf.elffile import ELFFile

from benchmarks.release_inputs.targets import TARGETS
from kpack.bundle import index_bundles, parse_bundle
from kpack.errors import ToolError

__all__ = ["REAL", "Pool", "SourceLibrary", "open_pool"]

#: The targets the pool has real code objects for: the first 31 of TARGETS.
REAL = tuple(t.name for t in TARGETS[:31])
_GENERIC = REAL[27:]


@dataclass(frozen=True, kw_only=True)
class SourceLibrary:
    """A fat library of the pool: where its ``.hip_fatbin`` is, and its bundles' offsets
    and decoded code-object sizes per target."""

    wheel: str
    path: Path
    section: tuple[int, int]  # file offset, size
    bundles: tuple[tuple[int, dict[str, int]], ...]


@dataclass(frozen=True, kw_only=True)
class Pool:
    processors: SourceLibrary  # jax-rocm10-pjrt: 27 processors
    generics: SourceLibrary  # jax-rocm7-pjrt: the 4 generic targets used

    @property
    def units(self) -> int:
        return len(self.processors.bundles)

    def sizes(self, unit: int) -> tuple[int, ...]:
        """Decoded sizes of translation unit ``unit``'s code objects, in :data:`REAL` order."""
        procs = self.processors.bundles[unit][1]
        gens = self.generics.bundles[unit % len(self.generics.bundles)][1]
        return tuple(procs[t] for t in REAL[:27]) + tuple(gens[t] for t in _GENERIC)

    @contextmanager
    def unit(self, unit: int) -> Iterator[tuple[memoryview, ...]]:
        """The decoded code objects of translation unit ``unit``, in :data:`REAL` order."""
        procs = _decode(self.processors, unit, REAL[:27])
        gens = _decode(self.generics, unit % len(self.generics.bundles), _GENERIC)
        yield procs + gens


def _decode(lib: SourceLibrary, index: int, targets: tuple[str, ...]) -> tuple[memoryview, ...]:
    offset, size = lib.section
    with lib.path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        start = offset + lib.bundles[index][0]
        with memoryview(mm) as view:
            bundle = parse_bundle(view[start : offset + size], 0, name=str(lib.path))
            # a compressed bundle's code objects are views of its decoded bytes; a plain
            # one's would be views of the mapping, so they are copied before it closes
            found = {co.target: co.data for co in bundle.code_objects}
            if bundle.compression is None:
                found = {t: bytes(d) for t, d in found.items()}
            del bundle
    return tuple(memoryview(found[t]) for t in targets)


def _extract(wheel: Path, member: str, dest: Path) -> Path:
    if dest.is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    with zipfile.ZipFile(wheel) as zf, zf.open(member) as src, partial.open("wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)
    partial.rename(dest)
    return dest


def _index(wheel: str, path: Path, wanted: tuple[str, ...]) -> SourceLibrary:
    with path.open("rb") as f:
        section = ELFFile(f).get_section_by_name(".hip_fatbin")
        if section is None:
            raise ToolError(f"{path}: no .hip_fatbin section")
        offset, size = int(section["sh_offset"]), int(section["sh_size"])
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm, memoryview(mm) as view:
            bundles = []
            for b in index_bundles(view[offset : offset + size], name=str(path)):
                sizes = {co.target: co.size for co in b.code_objects}
                missing = set(wanted) - set(sizes)
                if missing:
                    raise ToolError(f"{path}: bundle at {b.offset:#x} lacks {sorted(missing)}")
                bundles.append((b.offset, {t: sizes[t] for t in wanted}))
                del b
    return SourceLibrary(wheel=wheel, path=path, section=(offset, size), bundles=tuple(bundles))


def open_pool(cache: Path) -> Pool:
    """The pool, its libraries extracted into ``cache/bench/pool`` (fetched if need be)."""
    from tests.pypi_inputs import JAX10_PJRT, JAX_PJRT, fetch_wheel

    libs = []
    for wheel, member, wanted in (
        (JAX10_PJRT, "jax_plugins/xla_rocm10/xla_rocm_plugin.so", REAL[:27]),
        (JAX_PJRT, "jax_plugins/xla_rocm7/xla_rocm_plugin.so", _GENERIC),
    ):
        whl = fetch_wheel(wheel, cache)
        path = _extract(whl, member, cache / "bench" / "pool" / wheel.project / Path(member).name)
        libs.append(_index(wheel.filename, path, wanted))
    return Pool(processors=libs[0], generics=libs[1])
