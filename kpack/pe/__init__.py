"""PE/COFF (Windows, x86-64) images: the header reader (:mod:`kpack.pe.image`).

:func:`read_image` parses the headers, sections, data directories, base relocations and the
debug directory; :func:`imported_dlls` lists the DLLs an image imports; :func:`is_pe_file`
tells a PE image by its bytes. The transform of a fat image lives with the ELF one in
:mod:`kpack.transform`.
"""

from kpack.pe.image import (
    PeImage,
    Section,
    imported_dlls,
    is_pe,
    is_pe_file,
    pe_checksum,
    read_image,
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
