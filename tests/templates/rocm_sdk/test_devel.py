"""rocm_sdk._devel: expanding the devel tarball into a synthetic site-packages."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.templates.tpl_kit import fake_install, importable, rocm_sdk_tree, tar_bytes
from tests.templates.tpl_rendering import context

VERSION = "7.1.0"
CTX = context("legacy", ("gfx94X-dcgpu",), nonce="_v7", version=VERSION)
TOP = "_rocm_sdk_devel_v7"
CORE = "_rocm_sdk_core_v7"

Members = list[tuple[str, str, bytes | str | None]]

STANDARD: Members = [
    ("dir", TOP, None),
    ("file", f"{TOP}/__init__.py", b""),
    ("sym", f"{TOP}/lib/libx.so", "libx.so.1"),  # alias before its target (Q4)
    ("sym", f"{TOP}/lib/libx.so.1", f"../../{CORE}/lib/libx.so.1"),
    ("file", f"{TOP}/lib/llvm/bin/clang", b"clang"),
    ("sym", f"{TOP}/bin/amdclang", "../lib/llvm/bin/clang"),
    ("sym", f"{TOP}/bin/tool", f"../../{CORE}/bin/tool"),
    ("sym", f"{TOP}/bin/clang-alias", "../lib/llvm/bin/clang"),
    ("sym", f"{TOP}/include/hip", "../lib/hipinc"),
    ("file", f"{TOP}/lib/hipinc/hip.h", b"h"),
    ("sym", f"{TOP}/lib/dangling", "not-there"),
    ("hard", f"{TOP}/lib/llvm/bin/clang++", f"{TOP}/lib/llvm/bin/clang"),
    ("file", f"{TOP}/lib/cmake/hip/hip-config.cmake", b"cmake"),
    # files of core that devel reaches (TheRock's devel tarball links what core ships)
    ("sym", f"{TOP}/include/hip_version.h", f"../../{CORE}/include/hip_version.h"),
    ("sym", f"{TOP}/share/hip/version", f"../../../{CORE}/share/hip/version"),
    ("sym", f"{TOP}/lib/cmake/x/x-config.cmake", f"../../../../{CORE}/lib/cmake/x/x-config.cmake"),
    ("sym", f"{TOP}/lib/libx_static.a", f"../../{CORE}/lib/libx_static.a"),
    ("sym", f"{TOP}/libexec/helper", f"../../{CORE}/libexec/helper"),
]
#: files of core that are not programs: devel reaches them through relative symlinks
CORE_DATA = (
    "include/hip_version.h",
    "share/hip/version",
    "lib/cmake/x/x-config.cmake",
    "lib/libx_static.a",
)
#: programs of core: hard links (they find their prefix from /proc/self/exe)
CORE_PROGRAMS = ("bin/tool", "libexec/helper")


def make_site(
    tmp_path: Path,
    members: Members,
    compression: str = "",
    *,
    record: bool = True,
    extra_files: int = 0,
) -> Path:
    site = tmp_path / "site"
    rocm_sdk_tree(CTX, tmp_path / "rocm")
    shutil.copytree(tmp_path / "rocm" / "src" / "rocm_sdk", site / "rocm_sdk")
    fake_install(
        site,
        "rocm-sdk-core",
        VERSION,
        {
            f"{CORE}/__init__.py": b"",
            f"{CORE}/lib/libx.so.1": b"libx",
            **{f"{CORE}/{rel}": b"#!/bin/sh\n" for rel in CORE_PROGRAMS},
            **{f"{CORE}/{rel}": rel.encode() for rel in CORE_DATA},
        },
        modes={f"{CORE}/{rel}": 0o755 for rel in CORE_PROGRAMS},
    )
    members = members + [
        ("file", f"{TOP}/share/f{i:04d}.txt", b"x" * 2000) for i in range(extra_files)
    ]
    name = "_devel.tar.xz" if compression else "_devel.tar"
    dist_info = fake_install(
        site,
        "rocm-sdk-devel",
        VERSION,
        {
            "rocm_sdk_devel/__init__.py": b"",
            f"rocm_sdk_devel/{name}": tar_bytes(members, compression),
        },
    )
    if not record:
        (dist_info / "RECORD").unlink()
    return site


@pytest.fixture
def devel(tmp_path: Path) -> Iterator[tuple[Path, ModuleType]]:
    site = make_site(tmp_path, STANDARD)
    with importable(site):
        from rocm_sdk import _devel

        yield site, _devel


def record_rows(site: Path) -> list[list[str]]:
    record = site / f"rocm_sdk_devel-{VERSION}.dist-info" / "RECORD"
    with open(record, newline="") as f:
        return [row for row in csv.reader(f) if row]


def assert_complete(site: Path) -> None:
    root = site / TOP
    assert (root / "__init__.py").is_file()
    assert not (site / "rocm_sdk_devel" / "_devel.tar").exists()
    assert not (site / f".{TOP}.partial").exists()
    core_lib = site / CORE / "lib" / "libx.so.1"
    for name in ("libx.so.1", "libx.so"):  # a library keeps one file identity: a symlink
        path = root / "lib" / name
        assert path.is_symlink() and path.samefile(core_lib), name
        assert not os.readlink(path).startswith("/"), os.readlink(path)  # relative
    assert core_lib.stat().st_nlink == 1  # no hard link: no second copy in another layer
    for rel in CORE_DATA:  # headers, CMake and data files, static libraries: one identity
        path, real = root / rel, site / CORE / rel
        assert path.is_symlink() and path.samefile(real), rel
        assert not os.readlink(path).startswith("/") and real.stat().st_nlink == 1, rel
    for rel in CORE_PROGRAMS:
        path = root / rel
        assert not path.is_symlink() and path.samefile(site / CORE / rel), rel
    assert (root / "bin" / "clang-alias").samefile(root / "lib/llvm/bin/clang")
    assert not (root / "bin" / "clang-alias").is_symlink()
    assert os.readlink(root / "bin" / "amdclang") == "../lib/llvm/bin/clang"
    assert (root / "include" / "hip").is_symlink() and (root / "include/hip/hip.h").is_file()
    assert (root / "lib" / "dangling").is_symlink()
    assert (root / "lib/llvm/bin/clang++").samefile(root / "lib/llvm/bin/clang")
    paths = [row[0] for row in record_rows(site)]
    assert len(paths) == len(set(paths))
    for rel in (
        "__init__.py",
        "lib/libx.so",
        "bin/amdclang",
        "include/hip",
        "lib/dangling",
        ".devel_reconcile.lock",
        "lib/cmake/hip/hip-config.cmake",
    ):
        assert [f"{TOP}/{rel}", "", ""] in record_rows(site)


def test_expand(devel: tuple[Path, ModuleType]) -> None:
    site, _devel = devel
    root = _devel.get_devel_root()
    assert root == site / TOP
    assert_complete(site)


def test_second_call_changes_nothing(devel: tuple[Path, ModuleType]) -> None:
    site, _devel = devel
    _devel.get_devel_root()
    before = record_rows(site)
    assert _devel.expand(_devel.locate_devel()) is False
    assert _devel.get_devel_root() == site / TOP
    assert record_rows(site) == before


def test_xz_tarball(tmp_path: Path) -> None:
    site = make_site(tmp_path, STANDARD, "xz")
    with importable(site):
        from rocm_sdk import _devel

        _devel.get_devel_root()
    assert not (site / "rocm_sdk_devel" / "_devel.tar.xz").exists()
    assert_complete(site)


def test_stale_tree_is_replaced(devel: tuple[Path, ModuleType]) -> None:
    site, _devel = devel
    (site / TOP / "lib").mkdir(parents=True)
    (site / TOP / "__init__.py").write_text("")
    (site / TOP / "lib" / "leftover").write_text("old")
    _devel.get_devel_root()
    assert not (site / TOP / "lib" / "leftover").exists()
    assert_complete(site)


def test_system_install_is_refused(tmp_path: Path) -> None:
    site = make_site(tmp_path, STANDARD, record=False)
    with importable(site):
        from rocm_sdk import _devel
        from rocm_sdk._errors import DevelError

        with pytest.raises(DevelError, match="RECORD"):
            _devel.get_devel_root()
    assert not (site / TOP).exists()


def test_not_installed(tmp_path: Path) -> None:
    site = make_site(tmp_path, STANDARD)
    shutil.rmtree(site / "rocm_sdk_devel")
    with importable(site):
        from rocm_sdk import _devel

        with pytest.raises(ModuleNotFoundError, match=r"rocm\[devel\]"):
            _devel.get_devel_root()


def test_missing_init_is_an_error(tmp_path: Path) -> None:
    site = make_site(tmp_path, [m for m in STANDARD if not m[1].endswith("__init__.py")])
    with importable(site):
        from rocm_sdk import _devel
        from rocm_sdk._errors import DevelError

        with pytest.raises(DevelError, match=r"__init__\.py"):
            _devel.get_devel_root()


UNSAFE: dict[str, Members] = {
    "dotdot": [("file", f"{TOP}/../evil", b"x")],
    "absolute": [("file", "/tmp/evil-rocm-test", b"x")],
    "outside_top": [("file", "other/evil", b"x")],
    "absolute_symlink": [("sym", f"{TOP}/lib/evil", "/etc/passwd")],
    "escaping_symlink": [("sym", f"{TOP}/lib/evil", "../../../evil")],
    "escaping_via_dir_link": [("sym", f"{TOP}/up", ".."), ("sym", f"{TOP}/lib/evil", "../up/../x")],
    "into_own_final_name": [("sym", f"{TOP}/lib/evil", f"../../{TOP}/x")],
    "member_under_link": [("sym", f"{TOP}/lnk", f"../{CORE}/lib"), ("sym", f"{TOP}/lnk/evil", "x")],
    "file_then_link_same_place": [("file", f"{TOP}/lib/a/b", b"x"), ("sym", f"{TOP}/lib/a", ".")],
    "hardlink_through_link": [
        ("sym", f"{TOP}/lnk", f"../{CORE}/lib"),
        ("hard", f"{TOP}/h", f"{TOP}/lnk/libx.so.1"),
    ],
    "hardlink_outside": [("hard", f"{TOP}/h", f"{CORE}/lib/libx.so.1")],
    "duplicate": [("file", f"{TOP}/__init__.py", b"again")],
}


@pytest.mark.parametrize("case", sorted(UNSAFE))
def test_unsafe_members_are_refused(tmp_path: Path, case: str) -> None:
    site = make_site(tmp_path, STANDARD + UNSAFE[case])
    before = sorted(p.name for p in tmp_path.iterdir())
    core_before = sorted(str(p) for p in (site / CORE).rglob("*"))
    with importable(site):
        from rocm_sdk import _devel
        from rocm_sdk._errors import UnsafeArchiveError

        with pytest.raises(UnsafeArchiveError):
            _devel.get_devel_root()
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert sorted(str(p) for p in (site / CORE).rglob("*")) == core_before
    assert not (site / TOP).exists() and not (site / f".{TOP}.partial").exists()
    assert (site / "rocm_sdk_devel" / "_devel.tar").exists()
    assert not Path("/tmp/evil-rocm-test").exists()


CRASH = r"""
import os, sys
from rocm_sdk import _devel, _tar_expand
point = sys.argv[1]
if point == "extract":
    real, calls = _tar_expand._write_file, []
    def crashing(*args):
        calls.append(1)
        if len(calls) == 3:
            os._exit(9)
        return real(*args)
    _tar_expand._write_file = crashing
elif point == "rename":
    real_rename = os.rename
    def rename_then_crash(a, b):
        real_rename(a, b)
        os._exit(9)
    _devel.os.rename = rename_then_crash
elif point == "record":
    def crash(*args):
        os._exit(9)
    _devel.LockedRecord.append = crash
print(_devel.get_devel_root())
"""


@pytest.mark.parametrize("point", ["extract", "record", "rename"])
def test_interrupted_expansion_is_redone(tmp_path: Path, point: str) -> None:
    site = make_site(tmp_path, STANDARD)
    env = dict(os.environ, PYTHONPATH=str(site))
    crashed = subprocess.run([sys.executable, "-c", CRASH, point], env=env, capture_output=True)
    assert crashed.returncode == 9, crashed.stderr
    assert (site / "rocm_sdk_devel" / "_devel.tar").exists()
    with importable(site):
        from rocm_sdk import _devel

        assert not _devel.is_expanded(_devel.locate_devel())
        assert _devel.get_devel_root() == site / TOP
    assert_complete(site)


CONCURRENT = r"""
from rocm_sdk import _devel
print(_devel.get_devel_root())
"""


def test_concurrent_expansions(tmp_path: Path) -> None:
    site = make_site(tmp_path, STANDARD, extra_files=300)
    env = dict(os.environ, PYTHONPATH=str(site))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CONCURRENT],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [r[1] for r in results]
    assert {r[0].strip() for r in results} == {str(site / TOP)}
    assert_complete(site)
    assert len(list((site / TOP / "share").glob("f*.txt"))) == 300
