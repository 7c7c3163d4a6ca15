from __future__ import annotations

from pathlib import Path

import pytest

from build_tools.artifacts import EntryKind, scan_artifacts
from build_tools.plan._globs import GlobSet
from build_tools.plan._namespace import merge
from kpack.errors import ArtifactError
from tests.build_tools.treeutil import add_artifact, write_manifest


def _catalog(tmp_path: Path, **arts: dict[str, bytes | str]):  # type: ignore[no-untyped-def]
    write_manifest(tmp_path)
    for name, files in arts.items():
        add_artifact(tmp_path, name, "stage", files)
    return scan_artifacts(tmp_path)


def test_identical_duplicates_are_fine(tmp_path: Path) -> None:
    cat = _catalog(
        tmp_path, a_lib_generic={"share/N.txt": b"same"}, b_lib_generic={"share/N.txt": b"same"}
    )
    ns = merge(cat.select(["a", "b"], ["lib"], ["generic"]))
    assert ns.get("share/N.txt") is not None


def test_conflicting_duplicates_name_both(tmp_path: Path) -> None:
    cat = _catalog(tmp_path, a_lib_generic={"lib/x": b"one"}, b_lib_generic={"lib/x": b"two"})
    with pytest.raises(ArtifactError) as info:
        merge(cat.select(["a", "b"], ["lib"], ["generic"]))
    text = str(info.value)
    assert "a_lib_generic" in text and "b_lib_generic" in text and "lib/x" in text


def test_same_size_different_bytes_conflict(tmp_path: Path) -> None:
    cat = _catalog(tmp_path, a_lib_generic={"lib/x": b"abc"}, b_lib_generic={"lib/x": b"abd"})
    with pytest.raises(ArtifactError):
        merge(cat.select(["a", "b"], ["lib"], ["generic"]))


def test_resolve_chains_dirs_and_dangling(tmp_path: Path) -> None:
    cat = _catalog(
        tmp_path,
        a_lib_generic={
            "lib/libx.so.1.2": b"elf",
            "lib/libx.so.1": "symlink:libx.so.1.2",
            "lib/libx.so": "symlink:libx.so.1",
            "llvm/bin/clang": b"clang",
            "lib/llvm": "symlink:../llvm",
            "bin/clang": "symlink:../lib/llvm/bin/clang",
            "lib/dangling": "symlink:nothere",
            "lib/loop1": "symlink:loop2",
            "lib/loop2": "symlink:loop1",
        },
    )
    ns = merge(cat.select(["a"], ["lib"], ["generic"]))
    assert ns.resolve("lib/libx.so").relpath == "lib/libx.so.1.2"  # type: ignore[union-attr]
    assert ns.resolve("bin/clang").relpath == "llvm/bin/clang"  # type: ignore[union-attr]
    assert ns.resolve("lib/llvm").kind is EntryKind.DIR  # type: ignore[union-attr]
    assert ns.resolve("lib/dangling") is None
    assert ns.resolve("lib/loop1") is None


def test_include_exclude(tmp_path: Path) -> None:
    cat = _catalog(
        tmp_path,
        a_lib_generic={"bin/rocprof-sys-run": b"x", "bin/other": b"y", "lib/cmake/a.cmake": b"z"},
    )
    arts = cat.select(["a"], ["lib"], ["generic"])
    ns = merge(arts, include=GlobSet.of(["bin/rocprof-*"]))
    files = {e.relpath for e in ns if e.kind is EntryKind.FILE}
    assert files == {"bin/rocprof-sys-run"}
    ns = merge(arts, exclude=GlobSet.of(["**/cmake/**"]))
    assert "lib/cmake/a.cmake" not in ns and "bin/other" in ns
