"""A recorded output the user changed is named with what changed (issue 33, item 5): its
size, its contents, its kind, a link's target, what was added to a directory (kpack
split's tests) — never "not written by this tool", kept for what the tool never wrote."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from kpack.common.outputs import publish
from kpack.errors import PackagingError
from tests.kpack.common.outputs_kit import REC, TOOL, publish_files, snapshot, stage


def _refused(out: Path, tmp: Path) -> PackagingError:
    before = snapshot(out)
    with pytest.raises(PackagingError) as info:
        publish_files(out, tmp, {"a.whl": b"new", "tree/x": b"new"})
    assert snapshot(out) == before  # nothing replaced, nothing removed
    return info.value


def _grow(out: Path) -> None:
    (out / "a.whl").write_bytes(b"a1 and more")


def _same_size(out: Path) -> None:
    (out / "a.whl").write_bytes(b"b2")


def _copied_over(out: Path) -> None:
    shutil.copy(out / "a.whl", out / "copy")
    os.replace(out / "copy", out / "a.whl")


def _now_a_dir(out: Path) -> None:
    (out / "a.whl").unlink()
    (out / "a.whl").mkdir()
    (out / "a.whl" / "f").write_bytes(b"f")


def _grown_in_dir(out: Path) -> None:
    (out / "tree" / "x").write_bytes(b"x1234")


CASES: list[tuple[Callable[[Path], None], str]] = [
    (_grow, "a.whl: changed since this tool wrote it (size 2 -> 11 bytes)"),
    (_same_size, "a.whl: changed since this tool wrote it (other contents, same size)"),
    (
        _copied_over,
        "a.whl: changed since this tool wrote it (replaced by a copy (same contents, "
        "another inode))",
    ),
    (_now_a_dir, "a.whl: changed since this tool wrote it (a directory now, a file when written)"),
    (_grown_in_dir, "tree/x: changed since this tool wrote it (size 2 -> 5 bytes)"),
]


@pytest.mark.parametrize(("change", "problem"), CASES, ids=[c.__name__ for c, _ in CASES])
def test_a_changed_output_says_what_changed(
    tmp_path: Path, change: Callable[[Path], None], problem: str
) -> None:
    out = tmp_path / "out"
    publish_files(out, tmp_path, {"a.whl": b"a1", "tree/x": b"x1"})
    change(out)
    error = _refused(out, tmp_path)
    assert error.problems == (problem,)
    assert "1 in the way, changed since t wrote it (see --force)" in str(error)
    assert "not written by" not in str(error)


def test_a_link_retargeted_names_both_targets(tmp_path: Path) -> None:
    out, staged = tmp_path / "out", tmp_path / "staged"
    staged.mkdir()
    (staged / "l").symlink_to("a")
    publish(out, staged, ["l"], record=REC, tool=TOOL, force=False)
    (out / "l").unlink()
    (out / "l").symlink_to("b")
    with pytest.raises(PackagingError) as info:
        publish(
            out, stage(tmp_path / "s2", {"l": b"file"}), ["l"], record=REC, tool=TOOL, force=False
        )
    assert info.value.problems == ("l: changed since this tool wrote it (link target 'a' -> 'b')",)


def test_changed_and_foreign_outputs_are_counted_apart(tmp_path: Path) -> None:
    out = tmp_path / "out"
    publish_files(out, tmp_path, {"a.whl": b"a1"})
    _grow(out)
    (out / "b.whl").write_bytes(b"mine")
    with pytest.raises(PackagingError) as info:
        publish_files(out, tmp_path, {"a.whl": b"new", "b.whl": b"new"})
    assert "2 in the way, 1 changed since t wrote them, 1 not written by it (see --force)" in str(
        info.value
    )
    assert info.value.problems == (
        "a.whl: changed since this tool wrote it (size 2 -> 11 bytes)",
        "b.whl: a file not written by this tool",
    )
