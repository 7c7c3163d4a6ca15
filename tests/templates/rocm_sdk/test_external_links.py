"""rocm_sdk._external_links: links from the devel tree into other packages are recorded by
the package they lead into, never dangle, and come back with their package."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.templates.rocm_sdk.test_devel import (
    CORE,
    CORE_DATA,
    CORE_PROGRAMS,
    STANDARD,
    TOP,
    VERSION,
    make_site,
)
from tests.templates.tpl_kit import fake_install, importable

CORE_RECORD = f"rocm_sdk_core-{VERSION}.dist-info/RECORD"
DEVEL_RECORD = f"rocm_sdk_devel-{VERSION}.dist-info/RECORD"
#: every link of STANDARD that leads into core, through other links or not
INTO_CORE = sorted(["lib/libx.so", "lib/libx.so.1", *CORE_DATA, *CORE_PROGRAMS])


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Path]:
    path = make_site(tmp_path, STANDARD)
    with importable(path):
        yield path


def rows(site: Path, record: str) -> list[str]:
    from rocm_sdk._record import read_record_paths

    return read_record_paths(site / record)


def uninstall(site: Path, record: str) -> None:
    """What pip does: collect every RECORD path that exists (a dangling symlink does not,
    so pip leaves it), remove them, then the directories left empty and the dist-info."""
    paths = [site / row for row in rows(site, record) if os.path.exists(site / row)]
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif os.path.lexists(path):
            path.unlink()
    for path in sorted({p.parent for p in paths}, key=lambda p: -len(p.parts)):
        while path != site and path.is_dir() and not any(path.iterdir()):
            path.rmdir()
            path = path.parent
    shutil.rmtree((site / record).parent, ignore_errors=True)


def test_resolve_in_archive(site: Path) -> None:
    from rocm_sdk._external_links import resolve_in_archive

    links = {
        "lib/libx.so": "libx.so.1",
        "lib/libx.so.1": "../../_core/lib/libx.so.1",
        "include/hip": "../lib/hipinc",
        "a": "b",
        "b": "a",
        "up": "../_other",
    }
    assert resolve_in_archive("lib/libx.so", links) == "../_core/lib/libx.so.1"
    assert resolve_in_archive("include/hip/hip.h", links) == "lib/hipinc/hip.h"
    assert resolve_in_archive("up/x/y.h", links) == "../_other/x/y.h"
    assert resolve_in_archive("a", links) is None  # a loop
    assert resolve_in_archive("lib/plain.a", links) == "lib/plain.a"


def test_external_links_name_their_package(site: Path) -> None:
    from rocm_sdk._external_links import external_links

    found = external_links(
        {
            "lib/libx.so": "libx.so.1",
            "lib/libx.so.1": "../../_core/lib/libx.so.1",
            "bin/clang-alias": "../lib/llvm/bin/clang",
        }
    )
    assert [(k.relpath, k.package, k.path) for k in found] == [
        ("lib/libx.so", "_core", "_core/lib/libx.so.1"),
        ("lib/libx.so.1", "_core", "_core/lib/libx.so.1"),
    ]


def test_expansion_records_links_with_their_package(site: Path) -> None:
    from rocm_sdk._devel import get_devel_root

    get_devel_root()
    core_rows = rows(site, CORE_RECORD)
    assert [r for r in core_rows if r.startswith(f"{TOP}/")] == [f"{TOP}/{r}" for r in INTO_CORE]
    devel_rows = rows(site, DEVEL_RECORD)
    assert TOP in devel_rows and f".{TOP}.partial" in devel_rows  # the directories, whole
    assert f"{TOP}/.devel_links_state.json" in devel_rows
    assert all(f"{TOP}/{r}" in devel_rows for r in INTO_CORE)


def test_uninstalling_the_target_package_removes_its_links(site: Path) -> None:
    from rocm_sdk._devel import get_devel_root

    root = get_devel_root()
    uninstall(site, CORE_RECORD)
    assert not (site / CORE).exists()
    leftover = [r for r in INTO_CORE if os.path.lexists(root / r)]
    assert leftover == []
    dangling = [p for p in root.rglob("*") if p.is_symlink() and not p.exists()]
    assert dangling == [root / "lib" / "dangling"]  # the archive's own, inside the tree
    uninstall(site, DEVEL_RECORD)
    assert not root.exists()


def test_uninstalling_devel_first_leaves_the_package_whole(site: Path) -> None:
    from rocm_sdk._devel import get_devel_root

    root = get_devel_root()
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "x.pyc").write_bytes(b"")  # made later, in no RECORD
    uninstall(site, DEVEL_RECORD)
    assert not root.exists()
    assert all((site / CORE / rel).is_file() for rel in (*CORE_DATA, *CORE_PROGRAMS))
    uninstall(site, CORE_RECORD)
    assert not (site / CORE).exists()


def test_a_reinstalled_package_gets_its_links_back(site: Path) -> None:
    from rocm_sdk._devel import get_devel_root

    root = get_devel_root()
    files = {f"{CORE}/{r}": (site / CORE / r).read_bytes() for r in (*CORE_DATA, *CORE_PROGRAMS)}
    files[f"{CORE}/lib/libx.so.1"] = b"libx"
    uninstall(site, CORE_RECORD)  # what pip install --force-reinstall does first
    fake_install(site, "rocm-sdk-core", VERSION, files)
    assert not os.path.lexists(root / "lib" / "libx.so.1")
    assert get_devel_root() == root  # the fast path sees a new dist-info
    assert (root / "lib" / "libx.so").samefile(site / CORE / "lib" / "libx.so.1")
    assert all((root / r).exists() for r in INTO_CORE)
    assert [r for r in rows(site, CORE_RECORD) if r.startswith(f"{TOP}/")] == [
        f"{TOP}/{r}" for r in INTO_CORE
    ]


def test_the_fast_path_reads_no_manifest(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rocm_sdk import _devel

    _devel.get_devel_root()
    state = site / TOP / ".devel_links_state.json"
    before = state.stat().st_mtime_ns

    def boom(tree: Path) -> list[object]:
        raise AssertionError("the manifest was read")

    monkeypatch.setattr(_devel, "read_manifest", boom)
    _devel.get_devel_root()
    assert state.stat().st_mtime_ns == before
    with pytest.raises(AssertionError, match="manifest was read"):
        _devel.get_devel_root(verify=True)  # rocm-sdk init checks every link


def test_a_link_removed_by_hand_comes_back_with_init(site: Path) -> None:
    from rocm_sdk._devel import get_devel_root
    from rocm_sdk._devel_status import devel_status

    root = get_devel_root()
    (root / "include" / "hip_version.h").unlink()
    status = devel_status()
    assert status.state == "incomplete" and status.fix == "rocm-sdk init"
    get_devel_root(verify=True)
    assert (root / "include" / "hip_version.h").is_symlink() and devel_status().ok


def test_a_read_only_owner_record_is_a_warning(
    site: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from rocm_sdk._devel import get_devel_root

    if os.geteuid() == 0:
        (site / CORE_RECORD).unlink()  # root writes read-only files: a RECORD that is gone
        (site / CORE_RECORD).mkdir()
    else:
        (site / CORE_RECORD).chmod(0o444)
    with caplog.at_level(logging.WARNING):
        root = get_devel_root()
    assert (root / "lib" / "libx.so.1").is_symlink()  # expanded all the same
    assert f"{TOP}/lib/libx.so.1" in rows(site, DEVEL_RECORD)


@pytest.mark.parametrize(
    "entry",
    [
        {"relpath": "../escape", "target": "x", "package": "_p", "path": "_p/x"},
        {"relpath": "a", "target": "x", "package": "_p", "path": "../_p/x"},
        {"relpath": "a", "target": "x", "package": "_q", "path": "_p/x"},
        {"relpath": "a", "target": "", "package": "_p", "path": "_p/x"},
        {"relpath": "/abs", "target": "x", "package": "_p", "path": "_p/x"},
        {"relpath": "a", "target": "x", "package": "_p"},
        [1, 2],
    ],
)
def test_bad_manifest_entries_are_skipped(tmp_path: Path, entry: object) -> None:
    import json

    site = make_site(tmp_path, STANDARD)
    with importable(site):
        from rocm_sdk._external_links import EXTERNAL_LINKS_NAME, read_manifest

        tree = tmp_path / "tree"
        tree.mkdir()
        good = {"relpath": "b", "target": "../_p/y", "package": "_p", "path": "_p/y"}
        (tree / EXTERNAL_LINKS_NAME).write_text(json.dumps([entry, good]))
        assert [k.relpath for k in read_manifest(tree)] == ["b"]


def test_a_link_to_a_directory_of_links_goes_with_their_package(tmp_path: Path) -> None:
    """``include/rt/hcc_detail -> amd_detail``, a directory of links into core only: uv
    removes the emptied directory, pip the whole of it, so the link must go with core."""
    members = [
        *STANDARD,
        ("sym", f"{TOP}/include/rt/amd_detail/a.h", f"../../../../{CORE}/lib/libx_static.a"),
        ("sym", f"{TOP}/include/rt/hcc_detail", "amd_detail"),
        ("sym", f"{TOP}/include/own", "../lib/hipinc"),  # a directory of devel's own files
    ]
    site = make_site(tmp_path, members)
    with importable(site):
        from rocm_sdk._devel import get_devel_root

        root = get_devel_root()
        core_rows = rows(site, CORE_RECORD)
        assert f"{TOP}/include/rt/hcc_detail" in core_rows
        assert f"{TOP}/include/own" not in core_rows
        assert (root / "include/rt/hcc_detail/a.h").is_file()
        uninstall(site, CORE_RECORD)
        assert not os.path.lexists(root / "include/rt/hcc_detail")
        assert (root / "include/own/hip.h").is_file()

        fake_install(site, "rocm-sdk-core", VERSION, {f"{CORE}/lib/libx_static.a": b"a"})
        get_devel_root()
        assert (root / "include/rt/hcc_detail/a.h").read_bytes() == b"a"


def test_module_is_public_in_its_names(site: Path) -> None:
    mod: ModuleType = __import__("rocm_sdk._external_links", fromlist=["__all__"])
    assert all(hasattr(mod, name) for name in mod.__all__)
