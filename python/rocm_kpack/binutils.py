"""rocm-kpack's ``binutils`` names over :mod:`kpack`: :class:`BundledBinary` unbundles a fat
binary in-process (no ``clang-offload-bundler``), so :class:`Toolchain` only keeps the paths
callers give it."""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path
from types import TracebackType

from kpack.targets import is_target_id
from kpack.unbundle import bundle_triples, unbundle_binary

__all__ = ["BundledBinary", "Toolchain", "UnbundledContents"]


class Toolchain:
    """Tool paths rocm-kpack callers pass; none is needed, so none is looked up."""

    def __init__(
        self,
        *,
        clang_offload_bundler: Path | None = None,
        objcopy: Path | None = None,
        objdump: Path | None = None,
        readelf: Path | None = None,
    ) -> None:
        self.clang_offload_bundler = clang_offload_bundler
        self.objcopy = objcopy
        self.objdump = objdump
        self.readelf = readelf

    @staticmethod
    def configure_argparse(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--clang-offload-bundler",
            type=Path,
            help="accepted and ignored: bundles are read in-process",
        )

    @staticmethod
    def from_args(args: argparse.Namespace) -> Toolchain:
        return Toolchain(clang_offload_bundler=getattr(args, "clang_offload_bundler", None))


class UnbundledContents:
    """A directory of unbundled code objects; removed on close when asked to."""

    def __init__(
        self, dest_dir: Path, target_list: list[tuple[str, str]], *, delete_on_close: bool
    ) -> None:
        self.dest_dir = dest_dir
        self.target_list = target_list
        self.delete_on_close = delete_on_close

    @property
    def file_names(self) -> list[str]:
        return [name for _, name in self.target_list]

    def close(self) -> None:
        if self.delete_on_close:
            shutil.rmtree(self.dest_dir, ignore_errors=True)

    def __enter__(self) -> UnbundledContents:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class BundledBinary:
    """A fat binary (ELF or PE) or an offload-bundle file."""

    def __init__(self, file_path: Path, *, toolchain: Toolchain | None = None) -> None:
        self.file_path = Path(file_path)
        self.toolchain = toolchain or Toolchain()

    def unbundle(
        self,
        *,
        dest_dir: Path | None = None,
        delete_on_close: bool = True,
        gfx_arch: str | None = None,
    ) -> UnbundledContents:
        """Write the code objects (those of base architecture ``gfx_arch`` only, if given)
        into ``dest_dir`` (a new temporary dir by default), named as rocm-kpack names them."""
        scratch = dest_dir is None
        dest = Path(tempfile.mkdtemp()) if dest_dir is None else Path(dest_dir)
        try:
            result = unbundle_binary(
                self.file_path, dest, gfx_arch=gfx_arch, force=True, record=not scratch
            )
        except BaseException:
            if scratch:
                shutil.rmtree(dest, ignore_errors=True)
            raise
        return UnbundledContents(
            dest,
            list(zip(result.triples, result.names, strict=True)),
            delete_on_close=delete_on_close,
        )

    def list_bundles(self) -> list[str]:
        """The target id of every device code object (``gfx1100``, ``gfx90a:xnack+``)."""
        return [
            t.rpartition("--")[2]
            for t in bundle_triples(self.file_path)
            if t.startswith("hip") and is_target_id(t.rpartition("--")[2])
        ]
