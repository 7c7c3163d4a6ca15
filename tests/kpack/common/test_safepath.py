"""The containment rule: validated relative paths, writes that never leave their root."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

import pytest

from kpack.common.safepath import Root, resolve_in_tree, safe_component, safe_relpath
from kpack.errors import ArtifactError, UnsafePathError


@pytest.mark.parametrize(
    "value",
    [
        "",
        "/etc/passwd",
        "../x",
        "a/../../x",
        "a/./b",
        "a//b",
        "C:/x",
        "c:x",
        "a\\b",
        "a\x00b",
        "a\nb",
        ".",
        "..",
        "x" * 256,
        "a/" + "x" * 256,
        "/".join(["abc"] * 1100),
    ],
)
def test_safe_relpath_refuses(value: str) -> None:
    with pytest.raises(UnsafePathError):
        safe_relpath(value, what="member")


def test_safe_relpath_names_the_source_and_uses_the_given_error(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError) as info:
        safe_relpath("../../x", what="bundle triple", source=tmp_path / "f.so", error=ArtifactError)
    assert "f.so" in str(info.value) and "bundle triple" in str(info.value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("a", "a"), ("a/b.c", "a/b.c"), ("lib/libx.so.1", "lib/libx.so.1"), ("x" * 255, "x" * 255)],
)
def test_safe_relpath_accepts(value: str, expected: str) -> None:
    assert safe_relpath(value, what="member") == PurePosixPath(expected)


def test_dir_suffix_only_when_allowed() -> None:
    assert safe_relpath("a/b/", what="m", allow_dir_suffix=True) == PurePosixPath("a/b")
    with pytest.raises(UnsafePathError):
        safe_relpath("a/b/", what="m")


@pytest.mark.parametrize("value", ["a/b", ".", "..", "", "x" * 256, "gfx\x01"])
def test_safe_component_refuses(value: str) -> None:
    with pytest.raises(UnsafePathError):
        safe_component(value, what="name")


def test_root_writes_inside(tmp_path: Path) -> None:
    root = Root(tmp_path / "out")
    (tmp_path / "out").mkdir()
    path = root.write_bytes("a/b/c.bin", b"xyz")
    assert path == tmp_path / "out" / "a" / "b" / "c.bin"
    assert path.read_bytes() == b"xyz"


def test_root_refuses_escape_and_existing(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    root = Root(tmp_path / "out")
    with pytest.raises(UnsafePathError):
        root.write_bytes("../evil", b"x")
    root.write_bytes("f", b"1")
    with pytest.raises(UnsafePathError, match="already exists"):
        root.write_bytes("f", b"2")
    assert (tmp_path / "out" / "f").read_bytes() == b"1"
    assert not (tmp_path / "evil").exists()


def test_root_never_writes_through_a_symlink(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "d").symlink_to(outside)
    (out / "f").symlink_to(outside / "target")
    root = Root(out)
    with pytest.raises(UnsafePathError, match="symlink"):
        root.write_bytes("d/x", b"x")
    with pytest.raises(UnsafePathError):
        root.write_bytes("f", b"x")
    assert list(outside.iterdir()) == []


def test_root_symlink_targets_stay_inside(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    root = Root(tmp_path / "out")
    root.symlink("lib/libx.so", "libx.so.1")
    root.symlink("lib/sub/liby.so", "../liby.so.1")
    for target in ("../../etc/passwd", "/etc/passwd", "../../x", "a/../../../x", ""):
        with pytest.raises(UnsafePathError):
            root.symlink("lib/z", target)
    assert os.readlink(tmp_path / "out" / "lib" / "libx.so") == "libx.so.1"


def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "a" / "b" / "file").write_text("x")
    (tmp_path / "secret").write_text("s")
    return tree


def test_resolve_in_tree_follows_inside_links(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    (tree / "l1").symlink_to("a/b")
    (tree / "a" / "l2").symlink_to("../l1/file")
    got = resolve_in_tree(tree, tree / "a" / "l2", error=ArtifactError)
    assert got == (tree / "a" / "b" / "file").resolve()


@pytest.mark.parametrize(
    "links",
    [
        {"x": "../secret"},
        {"x": "/etc/passwd"},
        # a chain: each hop looks harmless, together they climb out
        {"a/b/l1": "../l2", "a/l2": "../l3", "l3": "../secret"},
        {"a/b/deep": "../../a/../../secret"},
        # a loop
        {"p": "q", "q": "p"},
    ],
)
def test_resolve_in_tree_refuses_escapes_at_any_depth(
    tmp_path: Path, links: dict[str, str]
) -> None:
    tree = _tree(tmp_path)
    for name, target in links.items():
        (tree / name).symlink_to(target)
    first = tree / next(iter(links))
    with pytest.raises(ArtifactError):
        resolve_in_tree(tree, first, error=ArtifactError)


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("lib/.kpack/blas_lib_gfx90a:xnack+.kpack", "characters ':'"),
        ('bin/a"b.dll', "characters '\"'"),
        ("bin/NUL.txt", "a reserved or dotted name"),
        ("bin/com1", "a reserved or dotted name"),
        ("bin/trailing.", "a reserved or dotted name"),
        ("lib/.kpack/blas_lib_gfx1100.kpack", None),
        ("bin/amdhip64_7.dll", None),
    ],
)
def test_windows_name_problem(path: str, why: str | None) -> None:
    from kpack.common.safepath import windows_name_problem

    assert windows_name_problem(path) == why


@pytest.mark.parametrize(
    ("names", "found"),
    [
        (["Foo.py", "foo.py"], ["'Foo.py' and 'foo.py'"]),
        (["a/B/x", "a/b/y", "a/b/z"], ["'a/B' and 'a/b'"]),  # the directories, once
        (["A", "a/x"], ["'A' and 'a'"]),  # a file and a directory
        (["Stra\u00dfe.py", "strasse.py"], ["'Stra\u00dfe.py' and 'strasse.py'"]),  # casefold
        (["x/y", "x/y", "X1/y", "x/Y1"], []),  # exact duplicates are another check's
        (["bad\udcff", "BAD\udcff"], ["'bad\\xff' and 'BAD\\xff'"]),
    ],
)
def test_case_collisions(names: list[str], found: list[str]) -> None:
    from kpack.common.safepath import case_collisions

    assert case_collisions(names) == found


def test_case_collisions_are_linear_in_the_names() -> None:
    import time

    from kpack.common.safepath import case_collisions

    deep = ["/".join(["d"] * 2000) + f"/{i}" for i in range(500)]  # 4 KB names
    start = time.perf_counter()
    assert case_collisions(deep) == []
    assert time.perf_counter() - start < 2.0


def test_utf8_names_and_how_they_are_shown() -> None:
    from kpack.common.safepath import is_utf8, shown_name

    raw = os.fsdecode(b"include/bad\xff\xfe.h")
    assert not is_utf8(raw) and is_utf8("caf\u00e9.h")
    assert shown_name(raw) == "include/bad\\xff\\xfe.h"
    assert shown_name("caf\u00e9.h") == "caf\u00e9.h"
    assert shown_name("\ud800") == "\\ud800"  # a surrogate no byte decodes to


@pytest.mark.parametrize(
    ("tag", "windows"),
    [
        ("py3-none-win_amd64", True),
        ("cp311-cp311-win32", True),
        ("py3-none-win_arm64", True),
        ("py3-none-manylinux_2_28_x86_64.win_amd64", True),
        ("win_amd64", True),
        ("py3-none-linux_x86_64", False),
        ("py3-none-any", False),
        ("cp311-cp311-macosx_11_0_arm64", False),
        ("py3-winx-linux_x86_64", False),
    ],
)
def test_windows_platform(tag: str, windows: bool) -> None:
    from kpack.common.safepath import windows_platform

    assert windows_platform(tag) is windows
