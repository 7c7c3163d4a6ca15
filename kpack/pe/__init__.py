"""PE/COFF (Windows, x86-64) host binaries: reading their device code and the transform.

:func:`read_image` parses the headers; :func:`extract_pe_kernels` returns the code objects
each ``.hipFatB`` wrapper reaches in ``.hip_fat``; :func:`transform_pe` rewrites an image
to load them from ``.kpack`` archives (see :mod:`kpack.transform._pe`).
"""

from kpack.pe._image import PeImage, Section, is_pe, is_pe_file, pe_checksum, read_image
from kpack.transform._pe import (
    PeFat,
    PeKpackRef,
    PeTransformPlan,
    extract_pe_kernels,
    plan_pe_transform,
    read_pe_fat,
    read_pe_kpack_ref,
    transform_pe,
    transformed_problems,
    write_pe_transform,
)

__all__ = [
    "PeFat",
    "PeImage",
    "PeKpackRef",
    "PeTransformPlan",
    "Section",
    "extract_pe_kernels",
    "is_pe",
    "is_pe_file",
    "pe_checksum",
    "plan_pe_transform",
    "read_image",
    "read_pe_fat",
    "read_pe_kpack_ref",
    "transform_pe",
    "transformed_problems",
    "write_pe_transform",
]
