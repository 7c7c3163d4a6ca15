"""What one archive member will contain, decided at plan time, produced at write time.

A payload file is a copy of an input file, an input ELF with a planned edit (an RPATH
edit, a device-code transform, or both composed; streamed, never materialised), literal
bytes (rendered templates, launcher stubs), or a ``.kpack`` archive that apply writes
before the packages (:attr:`PayloadFile.archive`, found under the apply's archive dir).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from kpack.elf import ElfEdit
from kpack.errors import PackagingError
from kpack.split import SpooledArchive
from kpack.transform import PeTransformPlan
from kpack.wheelfile import Generated

__all__ = ["PayloadFile", "TarEntry", "TarKind"]

_CHUNK = 1 << 20


@dataclass(frozen=True)
class PayloadFile:
    arcname: str
    size: int
    executable: bool = False
    source: Path | None = None
    edit: ElfEdit | PeTransformPlan | None = None  # streamed: an ELF edit, a PE transform
    data: bytes | None = None
    archive: str | None = None  # key of a planned .kpack archive

    @classmethod
    def copy(cls, arcname: str, source: Path, *, executable: bool) -> PayloadFile:
        return cls(arcname, source.stat().st_size, executable, source=source)

    @classmethod
    def edited(
        cls, arcname: str, edit: ElfEdit | PeTransformPlan, *, executable: bool
    ) -> PayloadFile:
        return cls(arcname, edit.size, executable, edit=edit)

    @classmethod
    def literal(cls, arcname: str, data: bytes, *, executable: bool = False) -> PayloadFile:
        return cls(arcname, len(data), executable, data=data)

    @classmethod
    def planned_archive(cls, arcname: str, key: str, *, size: int) -> PayloadFile:
        """``size`` is the archive's uncompressed kernel bytes (its real size is known once
        apply has spooled its kernels)."""
        return cls(arcname, size, False, archive=key)

    def content(
        self, archives: Mapping[str, SpooledArchive] | None = None
    ) -> Path | bytes | Callable[[], Iterator[bytes | memoryview]]:
        """A content source for the archive writers; ``archives`` are the planned archives
        by key, as apply laid them out."""
        if self.data is not None:
            return self.data
        if self.edit is not None:
            return Generated(self.edit.size, self.edit.iter_chunks)
        if self.archive is not None:
            if archives is None or self.archive not in archives:
                raise PackagingError("planned archive was not spooled", path=self.arcname)
            return archives[self.archive].source()
        if self.source is None:
            raise PackagingError("payload file has no content", path=self.arcname)
        return self.source

    def iter_chunks(
        self, archives: Mapping[str, SpooledArchive] | None = None
    ) -> Iterator[bytes | memoryview]:
        content = self.content(archives)
        if isinstance(content, bytes):
            yield content
        elif isinstance(content, Path):
            with content.open("rb") as f:
                while chunk := f.read(_CHUNK):
                    yield chunk
        else:
            yield from content()


class TarKind(enum.Enum):
    FILE = "file"
    DIR = "dir"
    SYMLINK = "symlink"


@dataclass(frozen=True)
class TarEntry:
    """One member of the devel tarball."""

    kind: TarKind
    file: PayloadFile | None = None  # FILE
    arcname_: str = ""  # DIR / SYMLINK
    link: str = ""  # SYMLINK

    @property
    def arcname(self) -> str:
        return self.file.arcname if self.file is not None else self.arcname_
