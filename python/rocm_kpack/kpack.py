"""rocm-kpack's ``kpack`` names over :mod:`kpack.archive`: :class:`PackedKernelArchive` packs
kernels under free-form keys (hipKernelProvider's ``rocke/<op>/<family>/<name>``, ``.co``
paths) and reads them back.

Writing goes through :func:`kpack.archive.write_kpack` with the ``"name"`` key rule, so the
archive is the ``.kpack`` v1 every reader loads: ordinals follow ``(key, arch)`` order (not
the order kernels were added), ``gfx_arches`` is the declared list, sorted, and the file is
written atomically. Bad input is one :class:`kpack.errors.ArchiveError`: a key the TOC cannot
hold safely, an arch that is not a target id or not in ``gfx_arches``, metadata that is not
``str -> str``, a kernel added twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from kpack.archive import SCHEMES, KernelInput, KpackArchive, write_kpack
from kpack.errors import ArchiveError
from kpack.targets import is_target_id
from rocm_kpack.compression import CompressionInput, Compressor, NoOpCompressor

__all__ = ["PackedKernelArchive", "PreparedKernel"]

TocEntry = dict[str, object]


@dataclass
class PreparedKernel:
    """A kernel ready to add: made by :meth:`PackedKernelArchive.prepare_kernel` (safe to
    call from many threads), added by :meth:`PackedKernelArchive.add_kernel`."""

    relative_path: str
    gfx_arch: str
    compression_input: CompressionInput
    kernel_id: str
    original_size: int
    metadata: Mapping[str, str] | None = None


class PackedKernelArchive:
    """A ``.kpack`` archive being built (``prepare_kernel``, ``add_kernel``,
    ``finalize_archive``, ``write``) or read (:meth:`read`, :meth:`get_kernel`).

    :attr:`toc` maps each key to ``{arch: {"type", "ordinal", "original_size"[, "metadata"]}}``
    as the archive's TOC holds it (once written or read)."""

    def __init__(
        self,
        group_name: str,
        gfx_arch_family: str,
        gfx_arches: Sequence[str],
        output_path: Path | None = None,
        compressor: Compressor | None = None,
    ) -> None:
        if output_path is not None:
            raise ArchiveError("streaming writes are not supported: call write(path)")
        self.compressor = compressor if compressor is not None else NoOpCompressor()
        if getattr(self.compressor, "SCHEME_NAME", None) not in SCHEMES:
            raise ArchiveError(f"compressor {self.compressor!r} has no scheme in {SCHEMES}")
        self.group_name = group_name
        self.gfx_arch_family = gfx_arch_family
        self.gfx_arches = list(gfx_arches)
        self.toc: dict[str, dict[str, TocEntry]] = {}
        self._kernels: list[KernelInput] = []
        self._finalized = False
        self._reader: KpackArchive | None = None

    def prepare_kernel(
        self,
        relative_path: str,
        gfx_arch: str,
        hsaco_data: bytes,
        metadata: Mapping[str, str] | None = None,
    ) -> PreparedKernel:
        """Compress one kernel (key ``relative_path``, ``\\`` read as ``/``) for ``gfx_arch``."""
        key = relative_path.replace("\\", "/")
        kernel_id = f"{key}@{gfx_arch}"
        prepared = self.compressor.prepare_kernel(hsaco_data, kernel_id)
        size = memoryview(hsaco_data).nbytes
        return PreparedKernel(
            relative_path=key,
            gfx_arch=gfx_arch,
            compression_input=prepared,
            kernel_id=kernel_id,
            original_size=size,
            metadata=metadata,
        )

    def add_kernel(self, prepared: PreparedKernel) -> None:
        """Add a prepared kernel; its arch must be a target id listed in ``gfx_arches``."""
        if self._finalized:
            raise ArchiveError("the archive is finalized: no kernel can be added")
        key, arch = prepared.relative_path, prepared.gfx_arch
        if not isinstance(arch, str) or not is_target_id(arch):
            raise ArchiveError(f"kernel {key!r}: {arch!r} is not a target id such as 'gfx942'")
        if arch not in self.gfx_arches:
            raise ArchiveError(f"kernel {key!r}: arch {arch!r} is not in {self.gfx_arches}")
        if arch in self.toc.get(key, {}):
            raise ArchiveError(f"kernel {key!r} for {arch!r} was added already")
        entry: TocEntry = {
            "type": "hsaco",
            "ordinal": len(self._kernels),
            "original_size": prepared.original_size,
        }
        if prepared.metadata:
            entry["metadata"] = dict(prepared.metadata)
        self.toc.setdefault(key, {})[arch] = entry
        payload = prepared.compression_input.payload
        self._kernels.append(KernelInput(key, arch, payload, prepared.metadata or None))

    def finalize_archive(self) -> None:
        """End adding kernels (rocm-kpack's reduce step: frames are made already)."""
        if self._finalized:
            raise RuntimeError("Archive already finalized")
        self._finalized = True

    def write(self, output_path: Path) -> None:
        """Write the archive to ``output_path`` (its parent dirs made); the TOC then holds the
        written ordinals."""
        if not self._finalized:
            raise RuntimeError("Archive not finalized. Call finalize_archive() first.")
        path = Path(output_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_kpack(
            path,
            self._kernels,
            group_name=self.group_name,
            gfx_arch_family=self.gfx_arch_family,
            scheme=self.compressor.SCHEME_NAME,
            level=self.compressor.level,
            jobs=1,
            key_rule="name",
            gfx_arches=self.gfx_arches,
        )
        with KpackArchive.open(path) as written:
            self.toc = _toc_of(written)

    @staticmethod
    def read(input_path: Path) -> PackedKernelArchive:
        """Open a ``.kpack`` file (validated as the C runtime loads it) for :meth:`get_kernel`."""
        reader = KpackArchive.open(Path(input_path))
        archive = PackedKernelArchive(reader.group_name, reader.gfx_arch_family, reader.gfx_arches)
        archive.toc = _toc_of(reader)
        archive._reader = reader
        archive._finalized = True
        return archive

    def get_kernel(self, relative_path: str, gfx_arch: str) -> bytes | None:
        """The code object of ``relative_path`` for ``gfx_arch``, or None if there is none."""
        if self._reader is None:
            raise RuntimeError("get_kernel() reads archives opened with read()")
        key = (relative_path.replace("\\", "/"), gfx_arch)
        return self._reader.read(*key) if key in self._reader else None

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def __enter__(self) -> PackedKernelArchive:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @staticmethod
    def compute_pack_filename(group_name: str, gfx_arch_family: str) -> str:
        return f"{group_name}-{gfx_arch_family}.kpack"

    def __repr__(self) -> str:
        kernels = sum(len(arches) for arches in self.toc.values())
        return (
            f"PackedKernelArchive(group={self.group_name}, family={self.gfx_arch_family}, "
            f"binaries={len(self.toc)}, kernels={kernels})"
        )


def _toc_of(reader: KpackArchive) -> dict[str, dict[str, TocEntry]]:
    toc: dict[str, dict[str, TocEntry]] = {}
    for key, arch in reader:
        entry = reader.entry(key, arch)
        row: TocEntry = {
            "type": "hsaco",
            "ordinal": entry.ordinal,
            "original_size": entry.original_size,
        }
        if entry.metadata is not None:
            row["metadata"] = dict(entry.metadata)
        toc.setdefault(key, {})[arch] = row
    return toc
