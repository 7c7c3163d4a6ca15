"""PE/COFF (Windows, x86-64) images: the header reader (:mod:`kpack.pe.image`).

:func:`read_image` parses the headers, sections, data directories, base relocations and the
debug directory; :func:`imported_dlls` lists the DLLs an image imports; :func:`is_pe_file`
tells a PE image by its bytes (:mod:`kpack.pe.signature`). The transform of a fat image
lives with the ELF one in :mod:`kpack.transform`. The reader is imported when one of its
names is first used (:mod:`kpack.common.lazy`): telling a file's format loads none of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kpack.pe.signature import is_pe, is_pe_file

if TYPE_CHECKING:
    from kpack.pe.image import PeImage, Section, imported_dlls, pe_checksum, read_image
else:
    from kpack.common.lazy import lazy_face

    __getattr__, __dir__ = lazy_face(
        __name__,
        dict.fromkeys(
            ("PeImage", "Section", "imported_dlls", "pe_checksum", "read_image"), "image"
        ),
    )

__all__ = [
    "PeImage",
    "Section",
    "imported_dlls",
    "is_pe",
    "is_pe_file",
    "pe_checksum",
    "read_image",
]
