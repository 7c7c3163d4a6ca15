"""Bad input: not ELF, 32-bit, truncated, corrupt. Only our errors escape; nothing is written."""

from __future__ import annotations

import random
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from kpack.bundle import make_plain_bundle
from kpack.errors import ElfError, RocmPackagingError, TransformError
from kpack.transform import (
    encode_marker,
    extract_kernels,
    inspect_fat_binary,
    plan_transform,
    transform_binary,
)
from tests.conftest import require
from tests.kpack.transform_fixtures import section, synthetic

NAME = "lib/libbad.so"
PATHS = ("../.kpack/bad_@GFXARCH@.kpack",)


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require(shutil.which("gcc") is not None, "needs gcc")
    bundle = make_plain_bundle([("hipv4-amdgcn-amd-amdhsa--gfx900", b"\x7fELF" + bytes(3000))])
    root = tmp_path_factory.mktemp("bad")
    return synthetic(root, "good", bundle + bytes(10000), [0])


def _calls(path: Path, out: Path) -> list[Callable[[], object]]:
    return [
        lambda: inspect_fat_binary(path),
        lambda: extract_kernels(path),
        lambda: plan_transform(path, kernel_name=NAME, search_paths=PATHS),
        lambda: transform_binary(path, out, kernel_name=NAME, search_paths=PATHS),
    ]


def _only_our_errors(path: Path, out: Path) -> list[str]:
    """Run every entry point; return outcomes; fail on any foreign exception."""
    outcomes = []
    for call in _calls(path, out):
        try:
            call()
            outcomes.append("ok")
        except RocmPackagingError as exc:
            outcomes.append(type(exc).__name__)
    return outcomes


def test_not_elf(tmp_path: Path) -> None:
    path = tmp_path / "script.sh"
    path.write_text("#!/bin/sh\necho hi\n")
    assert inspect_fat_binary(path) is None
    out = tmp_path / "out"
    with pytest.raises(TransformError, match="not an ELF file"):
        transform_binary(path, out, kernel_name=NAME, search_paths=PATHS)
    with pytest.raises(TransformError, match="not an ELF file"):
        extract_kernels(path)
    assert not out.exists()
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert inspect_fat_binary(empty) is None
    with pytest.raises(TransformError):
        transform_binary(empty, out, kernel_name=NAME, search_paths=PATHS)


def test_32_bit_elf(tmp_path: Path) -> None:
    path = tmp_path / "elf32"
    ident = b"\x7fELF\x01\x01\x01" + bytes(9)
    path.write_bytes(
        ident + struct.pack("<HHIIIIIHHHHHH", 3, 3, 1, 0, 52, 0, 0, 52, 32, 0, 40, 0, 0)
    )
    assert inspect_fat_binary(path) is None
    out = tmp_path / "out"
    with pytest.raises(TransformError, match="not a 64-bit little-endian ELF"):
        transform_binary(path, out, kernel_name=NAME, search_paths=PATHS)
    assert not out.exists()


def test_elf_without_fatbin(tmp_path: Path) -> None:
    path = Path(shutil.which("true") or "/bin/true")
    assert inspect_fat_binary(path) is None
    with pytest.raises(TransformError, match=r"no \.hip_fatbin"):
        plan_transform(path, kernel_name=NAME, search_paths=PATHS)


def test_truncated(good: Path, tmp_path: Path) -> None:
    data = good.read_bytes()
    fatbin = section(good, ".hip_fatbin")
    cuts = {0, 3, 10, 63, 64, 100, 600, fatbin.offset + 40, len(data) // 2, len(data) - 1}
    for cut in sorted(cuts):
        path = tmp_path / f"cut{cut}"
        path.write_bytes(data[:cut])
        out = tmp_path / f"out{cut}"
        outcomes = _only_our_errors(path, out)
        assert outcomes[1:] != ["ok"] * 3, cut
        assert not out.exists()
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob(".*.tmp"))


def test_random_corruption_yields_our_errors_or_a_verified_result(
    good: Path, tmp_path: Path
) -> None:
    """Flip bytes in the headers, tables, wrappers and bundle header; never a foreign error.

    Whenever a corrupted file is still accepted, the written result was verified before it
    was written, so it must at least be readable as ELF by our own checks again.
    """
    data = good.read_bytes()
    fatbin, segment = section(good, ".hip_fatbin"), section(good, ".hipFatBinSegment")
    shoff = struct.unpack_from("<Q", data, 40)[0]
    hot = [
        *range(0, 64),
        *range(64, 64 + 56 * 11),
        *range(shoff, len(data)),
        *range(segment.offset, segment.offset + 24),
        *range(fatbin.offset, fatbin.offset + 120),
    ]
    rng = random.Random(1234)
    seen: set[str] = set()
    for trial in range(150):
        mutated = bytearray(data)
        for _ in range(rng.randrange(1, 4)):
            mutated[rng.choice(hot)] = rng.randrange(256)
        path = tmp_path / "mutant"
        path.write_bytes(bytes(mutated))
        out = tmp_path / f"out{trial}"
        outcomes = _only_our_errors(path, out)
        seen.update(outcomes)
        if outcomes[3] == "ok":
            assert inspect_fat_binary(out) is not None
        else:
            assert not out.exists()
    assert {"ElfError", "TransformError"} <= seen, seen


def test_wrapper_segment_of_odd_size(good: Path, tmp_path: Path) -> None:
    data = bytearray(good.read_bytes())
    shoff = struct.unpack_from("<Q", data, 40)[0]
    shnum = struct.unpack_from("<H", data, 60)[0]
    segment = section(good, ".hipFatBinSegment")
    for i in range(shnum):
        at = shoff + 64 * i
        if struct.unpack_from("<Q", data, at + 24)[0] == segment.offset:
            struct.pack_into("<Q", data, at + 32, 20)
    path = tmp_path / "odd"
    path.write_bytes(bytes(data))
    for call in _calls(path, tmp_path / "out"):
        with pytest.raises(TransformError, match="multiple of 24"):
            call()


def test_bad_magic_in_a_wrapper(good: Path, tmp_path: Path) -> None:
    data = bytearray(good.read_bytes())
    data[section(good, ".hipFatBinSegment").offset] ^= 0xFF
    path = tmp_path / "magic"
    path.write_bytes(bytes(data))
    with pytest.raises(TransformError, match="neither HIPF nor HIPK"):
        plan_transform(path, kernel_name=NAME, search_paths=PATHS)


def test_corrupt_bundle_is_a_transform_error(good: Path, tmp_path: Path) -> None:
    data = bytearray(good.read_bytes())
    fatbin = section(good, ".hip_fatbin")
    struct.pack_into("<Q", data, fatbin.offset + 24, 1 << 40)  # num_entries
    path = tmp_path / "bundle"
    path.write_bytes(bytes(data))
    with pytest.raises(TransformError, match=r"\.hip_fatbin is malformed"):
        extract_kernels(path)


@pytest.mark.parametrize(
    ("kernel_name", "paths", "match"),
    [
        ("", PATHS, "kernel_name"),
        (NAME, (), "search_paths"),
        (NAME, ("",), "search_paths"),
        (NAME, "../.kpack/x.kpack", "not one string"),
        (NAME, ("x" * 70000,), "64 KiB"),
    ],
)
def test_marker_arguments_are_validated(
    good: Path, tmp_path: Path, kernel_name: str, paths: tuple[str, ...], match: str
) -> None:
    with pytest.raises(TransformError, match=match):
        transform_binary(good, tmp_path / "o", kernel_name=kernel_name, search_paths=paths)
    assert not (tmp_path / "o").exists()
    with pytest.raises(TransformError, match=match):
        encode_marker(kernel_name, paths)


def test_malformed_elf_is_an_elf_error(good: Path, tmp_path: Path) -> None:
    data = bytearray(good.read_bytes())
    struct.pack_into("<H", data, 54, 40)  # e_phentsize
    path = tmp_path / "phentsize"
    path.write_bytes(bytes(data))
    with pytest.raises(ElfError, match="e_phentsize"):
        plan_transform(path, kernel_name=NAME, search_paths=PATHS)
