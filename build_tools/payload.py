"""What one archive member will contain, decided at plan time, produced at write time.

A payload file is a copy of an input file, an input ELF with a planned RPATH edit
(streamed, never materialised), or literal bytes (rendered templates, launcher stubs).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kpack.elf import ElfEdit
from kpack.errors import PackagingError

__all__ = ["PayloadFile", "TarEntry", "TarKind"]

_CHUNK = 1 << 20


@dataclass(frozen=True)
class PayloadFile:
    arcname: str
    size: int
    executable: bool = False
    source: Path | None = None
    edit: ElfEdit | None = None
    data: bytes | None = None

    @classmethod
    def copy(cls, arcname: str, source: Path, *, executable: bool) -> PayloadFile:
        return cls(arcname, source.stat().st_size, executable, source=source)

    @classmethod
    def edited(cls, arcname: str, edit: ElfEdit, *, executable: bool) -> PayloadFile:
        return cls(arcname, edit.size, executable, edit=edit)

    @classmethod
    def literal(cls, arcname: str, data: bytes, *, executable: bool = False) -> PayloadFile:
        return cls(arcname, len(data), executable, data=data)

    def content(self) -> Path | bytes | Callable[[], Iterator[bytes]]:
        """A content source for the archive writers."""
        if self.data is not None:
            return self.data
        if self.edit is not None:
            return self.edit.iter_chunks
        if self.source is None:
            raise PackagingError("payload file has no content", path=self.arcname)
        return self.source

    def iter_chunks(self) -> Iterator[bytes]:
        if self.data is not None:
            yield self.data
        elif self.edit is not None:
            yield from self.edit.iter_chunks(_CHUNK)
        elif self.source is not None:
            with self.source.open("rb") as f:
                while chunk := f.read(_CHUNK):
                    yield chunk


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
