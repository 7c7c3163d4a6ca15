"""Regression tests for what the fuzzers found: each was an escaping exception before."""

from __future__ import annotations

import io
import struct
import tarfile
from pathlib import Path

import pytest

from kpack.elf.structs import Phdr
from kpack.errors import ElfError, ManifestError, RocmPackagingError

from .readers import REPO, _fat_binary, _run_tar, _run_transform, _tar_module, _tar_seeds

PT_LOAD = 1


def _with_load_memsz(data: bytes, memsz: int) -> bytes:
    """``data`` with the p_memsz of its first non-empty PT_LOAD set to ``memsz``."""
    buf = bytearray(data)
    (phoff,) = struct.unpack_from("<Q", buf, 32)
    (phnum,) = struct.unpack_from("<H", buf, 56)
    for i in range(phnum):
        at = phoff + 56 * i
        (p_type,) = struct.unpack_from("<I", buf, at)
        (filesz,) = struct.unpack_from("<Q", buf, at + 32)
        if p_type == PT_LOAD and filesz > 16:
            struct.pack_into("<Q", buf, at + 40, filesz - 16)
            return bytes(buf)
    raise AssertionError("no PT_LOAD")


def test_a_load_segment_smaller_in_memory_than_in_the_file(tmp_path: Path) -> None:
    # found by the transform fuzzer: the cut made p_memsz negative, and packing it raised
    # struct.error from deep inside the layout
    bad = _with_load_memsz(_fat_binary(), 0)
    with pytest.raises(RocmPackagingError, match=r"p_memsz .* < p_filesz"):
        _run_transform(bad, tmp_path)


def test_a_header_field_out_of_range_is_an_elf_error() -> None:
    phdr = Phdr(PT_LOAD, 4, 0, 0, 0, 154, -4055, 4096)
    with pytest.raises(ElfError, match="program header field out of range"):
        phdr.pack()


@pytest.mark.parametrize("damage", ["checksum", "truncated"])
def test_a_damaged_devel_tarball_is_a_devel_error(tmp_path: Path, damage: str) -> None:
    data = bytearray(_tar_seeds()[0])
    if damage == "checksum":
        data[600] ^= 0xFF  # inside the second member's header
    else:
        data = data[:700]
    errors = __import__("sys").modules["fuzz_rocm_sdk._errors"]
    _tar_module()
    with pytest.raises(errors.DevelError, match="is damaged"):
        _run_tar(bytes(data), tmp_path)


def test_tar_seed_is_valid(tmp_path: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(_tar_seeds()[0])) as tar:
        assert len(tar.getmembers()) == 6
    _run_tar(_tar_seeds()[0], tmp_path)
    assert (tmp_path / "site" / "_rocm_sdk_devel" / "include" / "hip.h").is_file()


@pytest.mark.parametrize(
    ("text", "needle"),
    [(b"packages: {}\n", "'{target_family}'"), (b"packages:\n  \xff: 1\n", "not UTF-8")],
)
def test_package_manifest_bad_input(tmp_path: Path, text: bytes, needle: str) -> None:
    from build_tools.manifests import load_manifests

    (tmp_path / "libraries.yaml").write_bytes((REPO / "manifests/libraries.yaml").read_bytes())
    (tmp_path / "packages.yaml").write_bytes(text)
    with pytest.raises(ManifestError) as info:
        load_manifests(tmp_path)
    if needle != "'{target_family}'":
        assert needle in str(info.value)
