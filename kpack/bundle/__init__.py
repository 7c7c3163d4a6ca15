"""HIP offload bundles: parse and write plain ``__CLANG_OFFLOAD_BUNDLE__`` and ``CCOB`` bundles.

A ``.hip_fatbin`` section holds one bundle per translation unit, possibly separated by zero
padding (kpack.md §2). :func:`iter_bundles` walks such a section by header arithmetic and one
regular-expression match per gap, so it runs in linear time and, for plain bundles, never
copies code-object bytes: :attr:`CodeObject.data` is a view into the caller's buffer (an
``mmap`` keeps the walk of a 1.3 GB library to a few pages of memory). Compressed bundles are
decompressed once, into a buffer of exactly the declared size. :func:`index_bundles` checks
a section as fully but keeps no decoded bytes, and :func:`stream_code_objects` reads the code
objects of a compressed bundle as a stream.

Every malformed input raises :class:`kpack.errors.BundleError` naming the buffer, the bundle
offset and the field.

This module is the package's face; the work lives in its private modules: ``_model`` (the
values a walk yields), ``_walk`` (walking and parsing), ``_index`` and ``_chunks`` (indexing
and streaming without decoded bytes), ``_plain`` and ``_ccob`` (each kind of bundle, read
and written).
"""

from __future__ import annotations

from kpack.bundle._ccob import CCOB_MAGIC, MAX_UNCOMPRESSED, make_ccob
from kpack.bundle._index import index_bundles, stream_code_objects
from kpack.bundle._model import (
    Bundle,
    BundleSink,
    CodeObject,
    CodeObjectRef,
    IndexedBundle,
    Sink,
    target_of,
)
from kpack.bundle._plain import PLAIN_MAGIC, make_plain_bundle
from kpack.bundle._walk import iter_bundles, parse_bundle
from kpack.targets import is_target_id

__all__ = [
    "CCOB_MAGIC",
    "MAX_UNCOMPRESSED",
    "PLAIN_MAGIC",
    "Bundle",
    "BundleSink",
    "CodeObject",
    "CodeObjectRef",
    "IndexedBundle",
    "Sink",
    "index_bundles",
    "is_target_id",
    "iter_bundles",
    "make_ccob",
    "make_plain_bundle",
    "parse_bundle",
    "stream_code_objects",
    "target_of",
]
