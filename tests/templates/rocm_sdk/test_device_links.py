"""rocm_sdk._device_links: mirroring device wheel files into the devel tree (§10)."""

from __future__ import annotations

import csv
import json
import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.templates.tpl_kit import fake_install, importable, rocm_sdk_tree, tar_bytes
from tests.templates.tpl_rendering import context

VERSION = "7.1.0"
CTX = context("kpack", ("gfx942", "gfx1201"), nonce="_v7", version=VERSION)
TOP = "_rocm_sdk_devel_v7"
LIBS = "_rocm_sdk_libraries_v7"


def install_device(
    site: Path, target: str, version: str = VERSION, links: list[dict[str, str]] | None = None
) -> Path:
    kpack = f".kpack/blas_lib_{target}.kpack"
    default = [{"relpath": kpack, "target": f"../../{LIBS}/{kpack}"}]
    manifest = {"version": version, "links": links if links is not None else default}
    files = {
        f"{LIBS}/{kpack}": f"code for {target}".encode(),
        f"{LIBS}/.devel_links/{target}.json": json.dumps(manifest).encode(),
    }
    installed: Path = fake_install(site, f"rocm-sdk-device-{target}", version, files)
    return installed


def record(dist_info: Path) -> list[str]:
    with open(dist_info / "RECORD", newline="") as f:
        return [row[0] for row in csv.reader(f) if row]


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[Path, ModuleType]]:
    site = tmp_path / "site"
    rocm_sdk_tree(CTX, tmp_path / "rocm")
    shutil.copytree(tmp_path / "rocm" / "src" / "rocm_sdk", site / "rocm_sdk")
    fake_install(site, "rocm-sdk-libraries", VERSION, {f"{LIBS}/__init__.py": b""})
    members = [
        ("dir", TOP, None),
        ("file", f"{TOP}/__init__.py", b""),
        ("sym", f"{TOP}/.kpack/blas_lib_gfx942.kpack", "stale-symlink"),
    ]
    fake_install(
        site,
        "rocm-sdk-devel",
        VERSION,
        {
            "rocm_sdk_devel/__init__.py": b"",
            "rocm_sdk_devel/_devel.tar": tar_bytes(members),
        },
    )
    with importable(site):
        from rocm_sdk import _devel

        yield site, _devel


def test_links_device_files_and_records_them(site: tuple[Path, ModuleType]) -> None:
    path, _devel = site
    dist_info = install_device(path, "gfx942")
    root = _devel.get_devel_root()
    linked = root / ".kpack" / "blas_lib_gfx942.kpack"
    archive = path / LIBS / ".kpack" / "blas_lib_gfx942.kpack"
    # the stale symlink from the tarball was replaced by a relative one to the archive: one
    # file identity (a hard link becomes a copy in another container layer)
    assert linked.is_symlink() and linked.samefile(archive)
    assert os.readlink(linked) == f"../../{LIBS}/.kpack/blas_lib_gfx942.kpack"
    assert archive.stat().st_nlink == 1
    assert record(dist_info).count(f"{TOP}/.kpack/blas_lib_gfx942.kpack") == 1


def test_fast_path_changes_nothing(site: tuple[Path, ModuleType]) -> None:
    path, _devel = site
    dist_info = install_device(path, "gfx942")
    _devel.get_devel_root()
    stamp = (dist_info / "RECORD").stat().st_mtime_ns
    content = (dist_info / "RECORD").read_bytes()
    from rocm_sdk._device_links import reconcile_device_links

    assert reconcile_device_links(path, path / TOP, VERSION) == 0
    assert (dist_info / "RECORD").read_bytes() == content
    assert (dist_info / "RECORD").stat().st_mtime_ns == stamp


def test_device_wheel_added_later(site: tuple[Path, ModuleType]) -> None:
    path, _devel = site
    install_device(path, "gfx942")
    root = _devel.get_devel_root()
    later = install_device(path, "gfx1201")
    assert _devel.get_devel_root() == root
    assert (root / ".kpack" / "blas_lib_gfx1201.kpack").samefile(
        path / LIBS / ".kpack" / "blas_lib_gfx1201.kpack"
    )
    assert f"{TOP}/.kpack/blas_lib_gfx1201.kpack" in record(later)


def test_duplicate_record_rows_are_repaired(site: tuple[Path, ModuleType]) -> None:
    path, _devel = site
    dist_info = install_device(path, "gfx942")
    _devel.get_devel_root()
    with open(dist_info / "RECORD", "a") as f:
        f.write(f"{TOP}/.kpack/blas_lib_gfx942.kpack,,\n")
    _devel.get_devel_root()
    rows = record(dist_info)
    assert len(rows) == len(set(rows))


def test_version_mismatch_is_skipped_with_warning(
    site: tuple[Path, ModuleType], caplog: pytest.LogCaptureFixture
) -> None:
    path, _devel = site
    install_device(path, "gfx942", version="7.0.0")
    post = install_device(path, "gfx1201", version=f"{VERSION}.post1")
    with caplog.at_level(logging.WARNING):
        root = _devel.get_devel_root()
    assert (
        not (root / ".kpack" / "blas_lib_gfx942.kpack").exists()
        or (root / ".kpack" / "blas_lib_gfx942.kpack").is_symlink()
    )
    assert "7.0.0" in caplog.text
    assert (root / ".kpack" / "blas_lib_gfx1201.kpack").is_file()  # .postN is accepted
    assert post.exists()


def test_unsafe_manifest_entries_are_ignored(
    site: tuple[Path, ModuleType], caplog: pytest.LogCaptureFixture
) -> None:
    path, _devel = site
    bad = [
        {"relpath": "../escape", "target": "x"},
        {"relpath": "ok/file", "target": "/etc/passwd"},
        {"relpath": "ok/out", "target": "../../../outside"},
    ]
    install_device(path, "gfx942", links=bad)
    with caplog.at_level(logging.WARNING):
        root = _devel.get_devel_root()
    assert not (path / "escape").exists()
    assert not (root / "ok" / "file").exists() and not (root / "ok" / "out").exists()


def test_uninstalled_device_links_are_in_its_record(site: tuple[Path, ModuleType]) -> None:
    """pip uninstall removes every RECORD path: emulate it and check devel stays sound."""
    path, _devel = site
    dist_info = install_device(path, "gfx942")
    root = _devel.get_devel_root()
    for rel in record(dist_info):
        target = path / rel
        if target.is_file() or target.is_symlink():
            target.unlink()
    shutil.rmtree(dist_info)
    assert not (root / ".kpack" / "blas_lib_gfx942.kpack").exists()
    assert (path / LIBS / "__init__.py").is_file()
    assert _devel.get_devel_root() == root
    assert not os.path.lexists(root / ".kpack" / "blas_lib_gfx942.kpack")
