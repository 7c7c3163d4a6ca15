"""The rocm_sdk library registry: TheRock's short names and patterns, checked against the
files a build ships."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from build_tools.manifests import LibraryEntry, load_manifests
from build_tools.plan._registry import library_registry
from kpack.errors import ManifestError

# PyTorch's generated _rocm_init.py preloads these on Linux (TheRock's
# external-builds/pytorch/build_prod_wheels.py, LINUX_LIBRARY_PRELOADS).
TORCH_PRELOADS = [
    "amd_comgr", "amd_smi", "amdhip64", "hiprtc", "hipblas", "hipfft", "hiprand",
    "hipsparse", "hipsparselt", "hipsolver", "hipblaslt", "miopen", "hipdnn",
    "rocm_sysdeps_liblzma", "rocm-openblas", "rocm_smi64", "rocprofiler-sdk",
    "rocprofiler-sdk-roctx", "roctracer64", "roctx64", "rccl", "hipfile",
]  # fmt: skip


def _package(logical: str, *relpaths: str) -> Any:
    return SimpleNamespace(
        spec=SimpleNamespace(logical=logical),
        layout=SimpleNamespace(files=dict.fromkeys(relpaths), aliases={}),
    )


def _by_name(entries: list[dict[str, object]]) -> dict[str, dict[str, object]]:
    return {str(e["shortname"]): e for e in entries}


def test_every_torch_preload_is_a_registry_entry() -> None:
    names = {lib.shortname for lib in load_manifests().libraries}
    assert set(TORCH_PRELOADS) <= names


def test_therock_file_names_are_found() -> None:
    core = _package(
        "core",
        "lib/libamdhip64.so.7",
        "lib/rocm_sysdeps/lib/librocm_sysdeps_liblzma.so.5",
        "lib/host-math/lib/librocm-openblas.so.0",
    )
    libraries = _package("libraries", "lib/libhipdnn_backend.so.1", "lib/libhipblaslt.so.1")
    registry = _by_name(library_registry(load_manifests(), [core, libraries]))
    for name in ("amdhip64", "rocm_sysdeps_liblzma", "rocm-openblas", "hipdnn", "hipblaslt"):
        assert registry[name]["shipped"] is True, name
    # every entry is known, shipped or not; hipblaslt does not make hipblas "shipped"
    assert registry["hipblas"]["shipped"] is False
    assert registry["rocdxg"]["optional"] is True and registry["rocdxg"]["shipped"] is False


def test_an_entry_that_misses_a_shipped_library_is_a_build_error() -> None:
    manifests = load_manifests()
    stale = tuple(
        replace(lib, so_pattern="libhipdnn.so*") if lib.shortname == "hipdnn" else lib
        for lib in manifests.libraries
    )
    libraries = _package("libraries", "lib/libhipdnn_backend.so.1")
    with pytest.raises(ManifestError) as info:
        library_registry(replace(manifests, libraries=stale), [_package("core"), libraries])
    text = str(info.value)
    assert "hipdnn" in text and "lib/libhipdnn_backend.so.1" in text


def test_a_library_in_another_directory_is_a_build_error() -> None:
    core = _package("core", "lib/librocm_sysdeps_liblzma.so.5")  # not in lib/rocm_sysdeps/lib
    with pytest.raises(ManifestError, match="rocm_sysdeps_liblzma"):
        library_registry(load_manifests(), [core])


def test_entry_fields_match_the_manifest() -> None:
    entry: LibraryEntry = next(
        lib for lib in load_manifests().libraries if lib.shortname == "hipdnn"
    )
    assert (entry.so_pattern, entry.dll_pattern) == ("libhipdnn_backend.so*", "hipdnn_backend*.dll")
