"""rocm-kpack's ``compression`` names over :mod:`kpack.archive`: a compressor picks the
archive's scheme (``SCHEME_NAME``) and prepares each kernel as that scheme stores it.

:class:`ZstdCompressor` makes a kernel's zstd frame exactly as :func:`kpack.archive.write_kpack`
makes it at the same level, so an archive written through
:class:`rocm_kpack.kpack.PackedKernelArchive` has the bytes kpack writes for the same kernels.
The archive lays out its blobs itself: a compressor only prepares kernels, and only the two
schemes every reader loads (``none`` and ``zstd-per-kernel``) exist.
"""

from __future__ import annotations

from dataclasses import dataclass

from kpack.archive import Scheme, ZstdFrame, compressed
from kpack.errors import ArchiveError

__all__ = [
    "COMPRESSION_SCHEMES",
    "CompressionInput",
    "Compressor",
    "NoOpCompressionInput",
    "NoOpCompressor",
    "ZstdCompressionInput",
    "ZstdCompressor",
]


@dataclass(frozen=True)
class CompressionInput:
    """A kernel prepared by a :class:`Compressor`: ``payload`` is what the archive stores
    (the code object, or its zstd frame made at the archive's level)."""

    payload: bytes | ZstdFrame


class NoOpCompressionInput(CompressionInput):
    @property
    def data(self) -> bytes:
        assert isinstance(self.payload, bytes)
        return self.payload


class ZstdCompressionInput(CompressionInput):
    @property
    def compressed_frame(self) -> bytes:
        assert isinstance(self.payload, ZstdFrame)
        return bytes(self.payload.frame)

    @property
    def original_size(self) -> int:
        assert isinstance(self.payload, ZstdFrame)
        return self.payload.size


class Compressor:
    """A compression scheme of the ``.kpack`` format; ``level`` is its zstd level (unused by
    ``none``)."""

    SCHEME_NAME: Scheme
    level: int = 3

    def prepare_kernel(self, kernel_data: bytes, kernel_id: str) -> CompressionInput:
        raise NotImplementedError  # pragma: no cover - the two schemes below implement it


class NoOpCompressor(Compressor):
    """Scheme ``none``: code objects stored as they are."""

    SCHEME_NAME: Scheme = "none"

    def prepare_kernel(self, kernel_data: bytes, kernel_id: str) -> CompressionInput:
        return NoOpCompressionInput(bytes(kernel_data))


class ZstdCompressor(Compressor):
    """Scheme ``zstd-per-kernel``: one zstd frame per code object at ``compression_level``."""

    SCHEME_NAME: Scheme = "zstd-per-kernel"

    def __init__(self, compression_level: int = 3) -> None:
        if isinstance(compression_level, bool) or not isinstance(compression_level, int):
            raise ArchiveError(f"zstd compression_level must be an int, got {compression_level!r}")
        if not 1 <= compression_level <= 22:
            raise ArchiveError(f"zstd compression_level must be 1..22, got {compression_level}")
        self.compression_level = compression_level
        self.level = compression_level

    def prepare_kernel(self, kernel_data: bytes, kernel_id: str) -> CompressionInput:
        """Compress now (thread-safe: a compressor per call), as the archive would."""
        (frame,) = compressed([kernel_data], self.level, 1)
        size = memoryview(kernel_data).nbytes
        return ZstdCompressionInput(ZstdFrame(bytes(frame), size, self.level))


COMPRESSION_SCHEMES: dict[str, type[Compressor]] = {
    NoOpCompressor.SCHEME_NAME: NoOpCompressor,
    ZstdCompressor.SCHEME_NAME: ZstdCompressor,
}
