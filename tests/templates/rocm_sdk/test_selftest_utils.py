"""rocm_sdk.tests.utils: the load-and-resolve check behind testSharedLibrariesLoad (§19)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.templates.tpl_kit import compile_library, importable, rocm_sdk_tree
from tests.templates.tpl_rendering import context

CORE = "_rocm_sdk_core"


@pytest.fixture
def env(tmp_path: Path) -> Iterator[tuple[Path, ModuleType]]:
    site = tmp_path / "site"
    rocm_sdk_tree(context(), tmp_path / "rocm")
    shutil.copytree(tmp_path / "rocm" / "src" / "rocm_sdk", site / "rocm_sdk")
    lib = site / CORE / "lib"
    lib.mkdir(parents=True)
    (site / CORE / "__init__.py").write_text("")
    hip = compile_library(
        lib / "libamdhip64.so.7", "int hip(void){return 1;}", soname="libamdhip64.so.7"
    )
    compile_library(
        lib / "libgood.so.1",
        "int hip(void); int f(void){return hip();}",
        soname="libgood.so.1",
        link=[hip],
        rpath="$ORIGIN",
    )
    compile_library(
        lib / "libnorpath.so.1",
        "int hip(void); int f(void){return hip();}",
        soname="libnorpath.so.1",
        link=[hip],
    )
    elsewhere = tmp_path / "system"
    elsewhere.mkdir()
    compile_library(
        elsewhere / "libamdhip64.so.7", "int hip(void){return 2;}", soname="libamdhip64.so.7"
    )
    with importable(site):
        from rocm_sdk.tests import utils

        yield site, utils


def test_good_library(env: tuple[Path, ModuleType]) -> None:
    site, utils = env
    providers = utils.provider_index([site / CORE])
    libs = utils.shared_libraries(site / CORE)
    assert [p.name for p in libs] == ["libamdhip64.so.7", "libgood.so.1", "libnorpath.so.1"]
    outcome = utils.check_library(site / CORE / "lib" / "libgood.so.1", providers)
    assert outcome.status == "ok", outcome.detail


def test_system_copy_is_detected(
    env: tuple[Path, ModuleType], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site, utils = env
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path / "system"))
    providers = utils.provider_index([site / CORE])
    outcome = utils.check_library(site / CORE / "lib" / "libnorpath.so.1", providers)
    assert outcome.status == "fail"
    assert "resolved outside the installed packages" in outcome.detail
    assert str(tmp_path / "system" / "libamdhip64.so.7") in outcome.detail


def test_unresolved_package_library_fails(
    env: tuple[Path, ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    site, utils = env
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    providers = utils.provider_index([site / CORE])
    outcome = utils.check_library(site / CORE / "lib" / "libnorpath.so.1", providers)
    assert outcome.status == "fail" and "libamdhip64.so.7" in outcome.detail


def test_preload_satisfies_dependency(
    env: tuple[Path, ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    site, utils = env
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    providers = utils.provider_index([site / CORE])
    hip = site / CORE / "lib" / "libamdhip64.so.7"
    outcome = utils.check_library(site / CORE / "lib" / "libnorpath.so.1", providers, [hip])
    assert outcome.status == "ok", outcome.detail


def test_not_loadable_kinds_are_skipped(env: tuple[Path, ModuleType]) -> None:
    site, utils = env
    fake = site / CORE / "lib" / "libclang_rt.asan-x86_64.so"
    fake.write_bytes(b"")
    assert utils.check_library(fake, {}).status == "skip"
