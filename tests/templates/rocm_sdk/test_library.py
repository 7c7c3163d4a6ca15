"""rocm_sdk.find_libraries / preload_libraries / initialize_process (§18, Q2, Q3)."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.templates.tpl_kit import compile_library, fake_install, importable, rocm_sdk_tree
from tests.templates.tpl_rendering import context

VERSION = "7.1.0"
CTX = context("legacy", ("gfx94X-dcgpu", "gfx120X-all"), version=VERSION)
CORE = "_rocm_sdk_core"


@pytest.fixture
def sdk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, ModuleType]]:
    monkeypatch.setenv("ROCM_SDK_TARGET_FAMILY", "gfx94X-dcgpu")
    monkeypatch.delenv("ROCM_SDK_PRELOAD_LIBRARIES", raising=False)
    site = tmp_path / "site"
    rocm_sdk_tree(CTX, tmp_path / "rocm")
    shutil.copytree(tmp_path / "rocm" / "src" / "rocm_sdk", site / "rocm_sdk")
    fake_install(site, "rocm-sdk-core", VERSION, {f"{CORE}/__init__.py": b""})
    lib = site / CORE / "lib" / "libamdhip64.so.7"
    lib.parent.mkdir(parents=True, exist_ok=True)
    compile_library(lib, "int hip_answer(void) { return 42; }\n", soname=lib.name)
    (site / CORE / "lib" / "rocm_sysdeps" / "lib").mkdir(parents=True)
    (site / CORE / "lib/rocm_sysdeps/lib/librocm_sysdeps_liblzma.so.5").write_bytes(b"")
    with importable(site):
        import rocm_sdk

        yield site, rocm_sdk


def test_public_api(sdk: tuple[Path, ModuleType]) -> None:
    _, rocm_sdk = sdk
    assert rocm_sdk.__all__ == [
        "DevelStatus",
        "__version__",
        "devel_status",
        "find_libraries",
        "initialize_process",
        "is_devel_expanded",
    ]
    assert rocm_sdk.__version__ == VERSION
    assert callable(rocm_sdk.preload_libraries)


def test_find_core_libraries(sdk: tuple[Path, ModuleType]) -> None:
    site, rocm_sdk = sdk
    assert rocm_sdk.find_libraries("amdhip64", "rocm_sysdeps_liblzma") == [
        site / CORE / "lib" / "libamdhip64.so.7",
        site / CORE / "lib/rocm_sysdeps/lib/librocm_sysdeps_liblzma.so.5",
    ]


def test_optional_library_is_skipped(sdk: tuple[Path, ModuleType]) -> None:
    _, rocm_sdk = sdk
    assert rocm_sdk.find_libraries("rocdxg") == []


def test_missing_required_file(sdk: tuple[Path, ModuleType]) -> None:
    _, rocm_sdk = sdk
    with pytest.raises(FileNotFoundError, match="libhiprtc"):
        rocm_sdk.find_libraries("hiprtc")


def test_unknown_library(sdk: tuple[Path, ModuleType]) -> None:
    _, rocm_sdk = sdk
    with pytest.raises(ModuleNotFoundError, match="unknown rocm library 'nope'"):
        rocm_sdk.find_libraries("nope")


def test_package_not_installed_names_the_extra(sdk: tuple[Path, ModuleType]) -> None:
    """Q2: a ModuleNotFoundError naming rocm[libraries], not UnboundLocalError."""
    _, rocm_sdk = sdk
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'rocm\[libraries\]'") as info:
        rocm_sdk.find_libraries("amdhip64", "hipblas", "rccl")
    assert "hipblas, rccl" in str(info.value)


def test_target_specific_package_uses_resolved_family(
    sdk: tuple[Path, ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    site, rocm_sdk = sdk
    for family in ("gfx94X_dcgpu", "gfx120X_all"):
        pkg = site / f"_rocm_sdk_libraries_{family}"
        (pkg / "lib").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "lib" / "libhipblas.so.3").write_bytes(b"")
    assert rocm_sdk.find_libraries("hipblas") == [
        site / "_rocm_sdk_libraries_gfx94X_dcgpu" / "lib" / "libhipblas.so.3"
    ]


def test_namespace_package_is_reported(sdk: tuple[Path, ModuleType]) -> None:
    """Q1 aftermath: a platform package that lost its __init__.py is named, not a TypeError."""
    site, rocm_sdk = sdk
    (site / "_rocm_sdk_libraries_gfx94X_dcgpu" / "lib").mkdir(parents=True)
    from rocm_sdk._errors import RocmSdkError

    with pytest.raises(RocmSdkError, match="not a regular package"):
        rocm_sdk.find_libraries("hipblas")


def test_windows_patterns(sdk: tuple[Path, ModuleType], monkeypatch: pytest.MonkeyPatch) -> None:
    site, rocm_sdk = sdk
    from rocm_sdk import _library

    monkeypatch.setattr(_library, "_is_windows", lambda: True)
    (site / CORE / "bin").mkdir()
    (site / CORE / "bin" / "amdhip64_7.dll").write_bytes(b"")
    assert rocm_sdk.find_libraries("amdhip64", "rocm_sysdeps_liblzma") == [
        site / CORE / "bin" / "amdhip64_7.dll"
    ]


def test_preload_and_env_override(
    sdk: tuple[Path, ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, rocm_sdk = sdk
    from rocm_sdk import _library

    monkeypatch.setenv("ROCM_SDK_PRELOAD_LIBRARIES", " amdhip64 ;, rocdxg,")
    rocm_sdk.initialize_process()
    assert sorted(_library._ALL_CDLLS) == ["amdhip64"]
    assert _library._ALL_CDLLS["amdhip64"].hip_answer() == 42
    rocm_sdk.preload_libraries("amdhip64", rtld_global=False)  # cached, no error


def test_env_override_failure_is_runtime_error(
    sdk: tuple[Path, ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, rocm_sdk = sdk
    monkeypatch.setenv("ROCM_SDK_PRELOAD_LIBRARIES", "amdhip64,hipblas")
    with pytest.raises(RuntimeError, match="ROCM_SDK_PRELOAD_LIBRARIES"):
        rocm_sdk.initialize_process()
    rocm_sdk.initialize_process(env_override=False)


@pytest.mark.parametrize(
    "pattern", [VERSION, "*", "7.*", "*.1.0", re.compile(r"7\.\d+\.0"), re.compile(".+")]
)
def test_check_version_matches(
    sdk: tuple[Path, ModuleType], pattern: str | re.Pattern[str]
) -> None:
    _, rocm_sdk = sdk
    rocm_sdk.initialize_process(check_version=pattern, fail_on_version_mismatch=True)


@pytest.mark.parametrize("pattern", ["7.1", "7.1.0.*x", "6.*", re.compile(r"^6\.")])
def test_check_version_mismatch(
    sdk: tuple[Path, ModuleType], pattern: str | re.Pattern[str]
) -> None:
    """Q3: compiled patterns fail and warn like strings do."""
    _, rocm_sdk = sdk
    with pytest.raises(RuntimeError, match=r"installed ROCm packages have version 7\.1\.0"):
        rocm_sdk.initialize_process(check_version=pattern, fail_on_version_mismatch=True)
    with pytest.warns(UserWarning, match="expects a ROCm version matching"):
        rocm_sdk.initialize_process(check_version=pattern)


def test_check_version_type(sdk: tuple[Path, ModuleType]) -> None:
    _, rocm_sdk = sdk
    with pytest.raises(TypeError):
        rocm_sdk.initialize_process(check_version=7)


def test_initialize_process_accepts_unknown_keywords(sdk: tuple[Path, ModuleType]) -> None:
    """TheRock's rocm_sdk accepts and ignores keywords it does not know."""
    _, rocm_sdk = sdk
    rocm_sdk.initialize_process(env_override=False, some_future_option=1, another="x")
