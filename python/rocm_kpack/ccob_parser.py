"""rocm-kpack's ``ccob_parser`` names over :mod:`kpack.bundle`: the device code objects of a
``.hip_fatbin`` section's bytes, whatever mix of plain and compressed (CCOB) bundles it
holds, host entries left out."""

from __future__ import annotations

from dataclasses import dataclass

from kpack.bundle import iter_bundles

__all__ = ["ExtractedCodeObject", "extract_code_objects_from_fatbin"]


@dataclass
class ExtractedCodeObject:
    target: str  # the bundle triple, e.g. 'hipv4-amdgcn-amd-amdhsa--gfx1100'
    data: bytes
    bundle_index: int


def extract_code_objects_from_fatbin(data: bytes) -> list[ExtractedCodeObject]:
    """Every device code object of ``data``, in order; a malformed bundle raises
    :class:`kpack.errors.BundleError`."""
    return [
        ExtractedCodeObject(co.triple, bytes(co.data), index)
        for index, bundle in enumerate(iter_bundles(data, name="fatbin data"))
        for co in bundle.code_objects
    ]
