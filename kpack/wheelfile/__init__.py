"""Deterministic archive writers shared by every tool: wheels (streamed, deflated on every
core, RECORD hashed while writing) and the building blocks an sdist writer needs.

This is a lower layer: :mod:`build_tools` and :mod:`kpack.tools` both write through it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kpack.wheelfile._libdeflate import libdeflate
from kpack.wheelfile._member import (
    ContentSource,
    Generated,
    Member,
    open_regular,
    open_source,
    read_all,
)
from kpack.wheelfile._memo import DeflateMemo
from kpack.wheelfile._names import (
    expand_tag,
    normalize_dist_name,
    normalize_version,
    wheel_filename,
)
from kpack.wheelfile._output import atomic_output, resolve_epoch, source_date_epoch
from kpack.wheelfile._reuse import DeflateStream, Reuse
from kpack.wheelfile._source import DEFAULT_LIMITS, InputWheel, Limits, WheelEntry, open_wheel
from kpack.wheelfile._wheel import WheelResult, write_wheel

if TYPE_CHECKING:
    from kpack.wheelfile._sdist import write_sdist
else:  # the sdist writer (tarfile, gzip) is imported by the builder that uses it
    from kpack.common.lazy import lazy_face

    __getattr__, __dir__ = lazy_face(__name__, {"write_sdist": "_sdist"})

__all__ = [
    "DEFAULT_LIMITS",
    "ContentSource",
    "DeflateMemo",
    "DeflateStream",
    "Generated",
    "InputWheel",
    "Limits",
    "Member",
    "Reuse",
    "WheelEntry",
    "WheelResult",
    "atomic_output",
    "expand_tag",
    "libdeflate",
    "normalize_dist_name",
    "normalize_version",
    "open_regular",
    "open_source",
    "open_wheel",
    "read_all",
    "resolve_epoch",
    "source_date_epoch",
    "wheel_filename",
    "write_sdist",
    "write_wheel",
]
