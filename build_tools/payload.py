"""What one archive member will contain, decided at plan time, produced at write time.

A payload file's content is exactly one :data:`Content`: a copy of an input file
(:class:`Copied`), an input binary with a planned edit (:class:`Edited`: an RPATH edit, a
device-code transform (a :class:`~kpack.transform.PlannedBinary`, ELF or PE), or both
composed; streamed, never materialised), literal bytes
(:class:`Literal`: rendered templates, launcher stubs), or a ``.kpack`` archive that apply
spools before the packages (:class:`Spooled`, found by key among apply's archives).
"""

from __future__ import annotations

import enum
import io
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from kpack.elf import ElfEdit
from kpack.errors import PackagingError
from kpack.split import SpooledArchive
from kpack.transform import PlannedBinary
from kpack.wheelfile import Generated

__all__ = [
    "Content",
    "Copied",
    "Edited",
    "Literal",
    "PayloadFile",
    "Spooled",
    "TarEntry",
    "TarKind",
]

_CHUNK = 1 << 20


@dataclass(frozen=True)
class Copied:
    """An input file, copied as it is."""

    path: Path


@dataclass(frozen=True)
class Edited:
    """An input binary with a planned edit (an ELF edit — RPATH, or RPATH composed on a
    device-code transform — or a device-code transform alone), streamed from the input,
    never materialised."""

    edit: ElfEdit | PlannedBinary

    @property
    def path(self) -> Path:
        return self.edit.path if isinstance(self.edit, ElfEdit) else self.edit.source


@dataclass(frozen=True)
class Literal:
    """Bytes made at plan time (rendered templates, launcher stubs)."""

    data: bytes


@dataclass(frozen=True)
class Spooled:
    """A ``.kpack`` archive the plan holds by key; apply spools it before the packages."""

    key: str


#: What one payload file contains: exactly one of these.
Content = Copied | Edited | Literal | Spooled


@dataclass(frozen=True)
class PayloadFile:
    arcname: str
    size: int
    what: Content
    executable: bool = False

    @classmethod
    def copy(cls, arcname: str, source: Path, *, executable: bool) -> PayloadFile:
        return cls(arcname, source.stat().st_size, Copied(source), executable)

    @classmethod
    def edited(
        cls, arcname: str, edit: ElfEdit | PlannedBinary, *, executable: bool
    ) -> PayloadFile:
        return cls(arcname, edit.size, Edited(edit), executable)

    @classmethod
    def literal(cls, arcname: str, data: bytes, *, executable: bool = False) -> PayloadFile:
        return cls(arcname, len(data), Literal(data), executable)

    @classmethod
    def planned_archive(cls, arcname: str, key: str, *, size: int) -> PayloadFile:
        """``size`` is the archive's uncompressed kernel bytes (its real size is known once
        apply has spooled its kernels)."""
        return cls(arcname, size, Spooled(key))

    @property
    def input_path(self) -> Path | None:
        """The input file this one is made from (None for literal bytes and archives)."""
        return self.what.path if isinstance(self.what, (Copied, Edited)) else None

    def content(
        self, archives: Mapping[str, SpooledArchive] | None = None
    ) -> Path | bytes | Callable[[], Iterator[bytes | memoryview]]:
        """A content source for the archive writers; ``archives`` are the planned archives
        by key, as apply laid them out."""
        what = self.what
        if isinstance(what, Literal):
            return what.data
        if isinstance(what, Edited):
            return Generated(what.edit.size, what.edit.iter_chunks)
        if isinstance(what, Spooled):
            if archives is None or what.key not in archives:
                raise PackagingError("planned archive was not spooled", path=self.arcname)
            return archives[what.key].source()
        return what.path

    def open(self) -> BinaryIO:
        """A stream of the bytes (literal bytes, a streamed edit or the input file); a
        planned archive has none until apply spools it."""
        what = self.what
        if isinstance(what, Literal):
            return io.BytesIO(what.data)
        if isinstance(what, Edited):
            return what.edit.open()
        if isinstance(what, Spooled):
            raise PackagingError("a planned archive has no stream before apply", path=self.arcname)
        return what.path.open("rb")

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
