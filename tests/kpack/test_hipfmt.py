"""The HIP host formats' one home: wrappers, markers, identification."""

from __future__ import annotations

import struct

import msgpack
import pytest

from kpack import hipfmt
from kpack.errors import ElfError, TransformError


def _wrapper(magic: int, pointer: int, reserved: int = 0) -> bytes:
    return struct.pack("<IIQQ", magic, 1, pointer, reserved)


def test_wrappers_parse_in_order_with_their_co_index() -> None:
    raw = _wrapper(hipfmt.HIPF, 0x1000) + _wrapper(hipfmt.HIPK, 0x2000, (7 << 32) | 3)
    first, second = hipfmt.parse_wrappers(raw, error=ElfError)
    assert (first.index, first.magic, first.pointer) == (0, hipfmt.HIPF, 0x1000)
    assert (second.index, second.co_index) == (1, 3)
    # on disk the magics read as the ASCII the runtime checks
    assert raw[24:28] == b"HIPK" and raw[:4] == b"FPIH"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"\0" * 25, "not a multiple of 24"),
        (_wrapper(0xDEADBEEF, 0), "neither HIPF nor HIPK"),
    ],
)
def test_bad_wrappers_raise_the_callers_error(raw: bytes, message: str) -> None:
    with pytest.raises(TransformError, match=message):
        hipfmt.parse_wrappers(raw, error=TransformError, path="x.so")


def test_marker_round_trips_and_is_the_runtime_map() -> None:
    data = hipfmt.encode_marker("lib/x.so", ["../.kpack/a_@GFXARCH@.kpack"], error=TransformError)
    assert msgpack.unpackb(data) == {
        "kpack_search_paths": ["../.kpack/a_@GFXARCH@.kpack"],
        "kernel_name": "lib/x.so",
    }
    assert hipfmt.decode_marker(data, error=ElfError) == (
        "lib/x.so",
        ("../.kpack/a_@GFXARCH@.kpack",),
    )


@pytest.mark.parametrize(
    "value",
    [[1, 2], {"kernel_name": "x"}, {"kernel_name": "", "kpack_search_paths": ["a"]}],
)
def test_bad_markers_are_refused(value: object) -> None:
    with pytest.raises(ElfError, match="rocm_kpack_ref"):
        hipfmt.decode_marker(msgpack.packb(value), error=ElfError)


def test_a_marker_over_the_runtime_window_is_refused() -> None:
    with pytest.raises(TransformError, match="64 KiB"):
        hipfmt.encode_marker("x", ["p" * (70 << 10)], error=TransformError)


def test_identify_by_leading_bytes() -> None:
    assert hipfmt.identify(b"\x7fELF\x02\x01") == "elf"
    assert hipfmt.identify(b"KPAK\x01\0\0\0") == "kpack"
    assert hipfmt.identify(b"__CLANG_OFFLOAD_BUNDLE__") == "bundle"
    assert hipfmt.identify(b"CCOB\x03\0") == "bundle"
    assert hipfmt.identify(b"MZ\x90\0") == "pe"  # a DOS/PE image (Windows DLL or EXE)
    assert hipfmt.identify(b"\0\0\0\0") is None


def test_search_path_climbs_to_the_kpack_dir() -> None:
    assert hipfmt.search_path(0, "blas_lib") == ".kpack/blas_lib_@GFXARCH@.kpack"
    assert hipfmt.search_path(2, "torch") == "../../.kpack/torch_@GFXARCH@.kpack"
