"""Which fat libraries a release input of a given size holds.

The libraries are named after TheRock's largest device-code libraries, in the artifacts
that ship them (``blas``, ``miopen``, ``rccl``, ``fft``, ``rpp``). Translation units are
taken in order — unit ``g % 45`` of the pool in pass ``g // 45`` — and a library is closed
when the next unit would take it past :data:`CAP` bytes (gcc holds a library in memory
while linking it). Past the catalogue, names repeat with a ``-2``, ``-3`` … suffix. A
smaller input is a prefix of a larger one: its libraries are the same but for the last.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.release_inputs.fatlib import unit_bytes
from benchmarks.release_inputs.pool import Pool
from benchmarks.release_inputs.targets import TARGETS

__all__ = ["CAP", "CATALOGUE", "PlannedLibrary", "plan_libraries", "wheel_units"]

CAP = 640_000_000
ALL = tuple(t.name for t in TARGETS)

#: (artifact name, stage dir, real file name, SONAME)
CATALOGUE = (
    ("blas", "math-libs/BLAS/rocBLAS/stage", "librocblas.so.5.1", "librocblas.so.5"),
    ("blas", "math-libs/BLAS/hipBLASLt/stage", "libhipblaslt.so.1.0", "libhipblaslt.so.1"),
    ("miopen", "ml-libs/MIOpen/stage", "libMIOpen.so.1.0", "libMIOpen.so.1"),
    ("blas", "math-libs/BLAS/rocSPARSE/stage", "librocsparse.so.1.0", "librocsparse.so.1"),
    ("rccl", "comm-libs/rccl/stage", "librccl.so.1.0", "librccl.so.1"),
    ("blas", "math-libs/BLAS/rocSOLVER/stage", "librocsolver.so.0.7", "librocsolver.so.0"),
    ("fft", "math-libs/rocFFT/stage", "librocfft.so.0.1", "librocfft.so.0"),
    ("blas", "math-libs/BLAS/hipSPARSELt/stage", "libhipsparselt.so.0.2", "libhipsparselt.so.0"),
    ("rpp", "cv-libs/rpp/stage", "librpp.so.2.0", "librpp.so.2"),
)


@dataclass(frozen=True, kw_only=True)
class PlannedLibrary:
    artifact: str
    stage: str
    filename: str
    soname: str
    units: tuple[tuple[int, int], ...]
    size: int  # its .hip_fatbin bytes with every target


def _named(index: int) -> tuple[str, str, str, str]:
    artifact, stage, filename, soname = CATALOGUE[index % len(CATALOGUE)]
    round_ = index // len(CATALOGUE)
    if round_:
        stem = soname.split(".so")[0]
        filename = filename.replace(stem, f"{stem}-{round_ + 1}", 1)
        soname = soname.replace(stem, f"{stem}-{round_ + 1}", 1)
    return artifact, stage, filename, soname


def plan_libraries(pool: Pool, device_bytes: int) -> tuple[PlannedLibrary, ...]:
    """Libraries whose sections hold at least ``device_bytes`` with every target."""
    libs: list[PlannedLibrary] = []
    units: list[tuple[int, int]] = []
    size = total = g = 0

    def close() -> None:
        artifact, stage, filename, soname = _named(len(libs))
        libs.append(
            PlannedLibrary(
                artifact=artifact,
                stage=stage,
                filename=filename,
                soname=soname,
                units=tuple(units),
                size=size,
            )
        )

    while total < device_bytes:
        unit = (g % pool.units, g // pool.units)
        g += 1
        grows = unit_bytes(pool, *unit, ALL)
        if units and size + grows > CAP:
            close()
            units, size = [], 0
        units.append(unit)
        size += grows
        total += grows
    if units:
        close()
    return tuple(libs)


def wheel_units(pool: Pool, code_objects: int, small: int = 10_000_000) -> list[tuple[int, int]]:
    """Units for a torch-sized wheel: every unit of pass 0, then the pool's small units
    (under ``small`` bytes with every target) pass after pass, until ``code_objects``
    code objects."""
    units = [(u, 0) for u in range(pool.units)]
    little = [u for u in range(pool.units) if unit_bytes(pool, u, 0, ALL) < small]
    p = 1
    while len(units) * len(ALL) < code_objects:
        units += [(u, p) for u in little]
        p += 1
    return units
