"""Re-running the builder into the same ``--dest-dir``: what it wrote before is replaced,
every other file is left alone, a file it did not write is never overwritten without
``--force``, and a failed publish leaves everything as it was."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from build_tools.build import RECORD
from build_tools.build_python_packages import main
from kpack.common import outputs as outputs_module
from kpack.common.output_record import FORMAT, read_record
from kpack.common.outputs import publish
from kpack.errors import PackagingError

from .treeutil import add_artifact, write_manifest

WHEEL = "rocm_sdk_core-{v}-py3-none-linux_x86_64.whl"


def _tree(root: Path) -> Path:
    write_manifest(root)
    add_artifact(root, "core-hip_lib_generic", "core/clr/stage", {"share/hip/version": b"5.2"})
    add_artifact(root, "blas_lib_gfx90a", "blas/stage", {"share/blas/x.dat": b"x"})
    return root


def _build(tree: Path, dest: Path, *extra: str, version: str = "1.0") -> int:
    argv = ["--artifact-dir", str(tree), "--dest-dir", str(dest), "--version", version, "-q"]
    return main([*argv, *extra])


def _snapshot(root: Path, *, record: bool = True) -> dict[str, bytes]:
    files = {p.relative_to(root).as_posix(): p for p in root.rglob("*") if p.is_file()}
    return {k: p.read_bytes() for k, p in files.items() if record or k != RECORD}


def test_a_rerun_replaces_its_outputs_and_keeps_everything_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree, dest = _tree(tmp_path / "tree"), tmp_path / "out"
    (dest / "dist").mkdir(parents=True)
    (dest / "dist" / "other-1.0-py3-none-any.whl").write_bytes(b"someone else's")
    (dest / "notes.txt").write_text("keep me")
    assert _build(tree, dest) == 0, capsys.readouterr().err
    first = _snapshot(dest, record=False)
    recorded = read_record(dest / RECORD, "build-python-packages", force=False)
    assert sorted(r for r, e in recorded.items() if e.kind == "file") == sorted(
        [
            "dist/rocm-1.0.tar.gz",
            f"dist/{WHEEL.format(v='1.0')}",
            "dist/rocm_sdk_devel-1.0-py3-none-linux_x86_64.whl",
            "dist/rocm_sdk_libraries_gfx90a-1.0-py3-none-linux_x86_64.whl",
            "report.json",
            "report.md",
        ]
    )
    assert _build(tree, dest) == 0  # the same again: identical bytes, nothing refused
    assert _snapshot(dest, record=False) == first
    assert _build(tree, dest, version="2.0") == 0  # another version: 1.0's outputs go
    names = sorted(p.name for p in (dest / "dist").iterdir())
    assert names == [
        "other-1.0-py3-none-any.whl",
        "rocm-2.0.tar.gz",
        WHEEL.format(v="2.0"),
        "rocm_sdk_devel-2.0-py3-none-linux_x86_64.whl",
        "rocm_sdk_libraries_gfx90a-2.0-py3-none-linux_x86_64.whl",
    ]
    assert (dest / "dist" / "other-1.0-py3-none-any.whl").read_bytes() == b"someone else's"
    assert (dest / "notes.txt").read_text() == "keep me"
    assert sorted(p.name for p in dest.iterdir() if p.name.startswith(".")) == [RECORD]


def test_a_file_it_did_not_write_is_refused_with_a_short_list_then_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree, dest = _tree(tmp_path / "tree"), tmp_path / "out"
    (dest / "dist").mkdir(parents=True)
    names = ("rocm_sdk_core", "rocm_sdk_devel", "rocm_sdk_libraries_gfx90a")
    wheels = [f"{n}-1.0-py3-none-linux_x86_64.whl" for n in names]
    for name in ("rocm-1.0.tar.gz", *wheels):
        (dest / "dist" / name).write_bytes(b"not the builder's")
    (dest / "report.json").write_text("{}")
    (dest / "report.md").write_text("mine")
    before = _snapshot(dest)
    assert _build(tree, dest) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (
        f"error: {dest}: cannot publish: 6 in the way, not written by build-python-packages "
        "(see --force)"
    )
    assert len(err) == 7 and err[-1] == "  - ... and 1 more", err  # 5 shown, then the count
    assert all(len(line.replace(str(dest), "DEST")) <= 100 for line in err), err
    assert _snapshot(dest) == before and not (dest / RECORD).exists()
    assert _build(tree, dest, "--force") == 0, capsys.readouterr().err
    assert (dest / "report.md").read_text() != "mine"
    assert [
        p.name for p in (dest / "dist").iterdir() if p.read_bytes() == b"not the builder's"
    ] == []


def test_a_recorded_output_rewritten_by_someone_else_is_theirs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree, dest = _tree(tmp_path / "tree"), tmp_path / "out"
    assert _build(tree, dest) == 0
    (dest / "report.md").write_text("edited by hand after the build")
    assert _build(tree, dest) == 1
    assert "  - report.md: changed since this tool wrote it" in capsys.readouterr().err
    assert (dest / "report.md").read_text() == "edited by hand after the build"
    assert _build(tree, dest, version="2.0") == 1  # not removed as a stale output either


def test_staged_trees_are_recorded_and_replaced_too(tmp_path: Path) -> None:
    tree, dest = _tree(tmp_path / "tree"), tmp_path / "out"
    assert _build(tree, dest) == 0
    assert _build(tree, dest, "--no-build-packages") == 0  # the packages of before go
    assert sorted(p.name for p in dest.iterdir()) == sorted(
        [RECORD, "rocm", "rocm-sdk-core", "rocm-sdk-devel", "rocm-sdk-libraries-gfx90a"]
    )
    (dest / "rocm-sdk-core" / "marker").write_text("x")  # a user's file in a recorded tree
    assert _build(tree, dest, "--no-build-packages") == 1
    assert (dest / "rocm-sdk-core" / "marker").read_text() == "x"
    assert _build(tree, dest, "--no-build-packages", "--force") == 0  # replaced when asked
    assert not (dest / "rocm-sdk-core" / "marker").exists()


# --- kpack.common.outputs.publish: all or nothing ----------------------------------------------


def _staged(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


@pytest.mark.parametrize("fail_at", [1, 2, 3, 4, 5, 6, 7])
def test_a_publish_failing_at_any_step_puts_everything_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_at: int
) -> None:
    dest = tmp_path / "dest"
    publish(
        dest := _staged(dest, {"keep.txt": b"theirs"}),
        _staged(tmp_path / "s1", {"dist/a.whl": b"a1", "dist/old.whl": b"o", "r.json": b"r1"}),
        ["dist/a.whl", "dist/old.whl", "r.json"],
        record=".rec",
        tool="t",
        force=False,
    )
    before = _snapshot(dest)
    staged = _staged(tmp_path / "s2", {"dist/a.whl": b"a2", "sub/new.whl": b"n", "r.json": b"r2"})
    calls = 0
    real = os.rename

    def failing(src: object, dst: object) -> None:
        nonlocal calls
        calls += 1
        if calls == fail_at:
            raise OSError(28, "No space left on device")
        real(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(outputs_module.os, "rename", failing)
    with pytest.raises(Exception, match="cannot publish the outputs: No space left on device"):
        publish(
            dest,
            staged,
            ["dist/a.whl", "sub/new.whl", "r.json"],
            record=".rec",
            tool="t",
            force=False,
        )
    monkeypatch.undo()
    assert _snapshot(dest) == before
    assert sorted(p.name for p in dest.iterdir()) == [".rec", "dist", "keep.txt", "r.json"]


def test_a_publish_that_succeeds_removes_stale_outputs_and_empty_dirs(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    first = _staged(tmp_path / "s1", {"dist/x/a.whl": b"a", "r.json": b"r"})
    publish(dest, first, ["dist/x/a.whl", "r.json"], record=".rec", tool="t", force=False)
    second = _staged(tmp_path / "s2", {"dist/b.whl": b"b", "r.json": b"r"})
    publish(dest, second, ["dist/b.whl", "r.json"], record=".rec", tool="t", force=False)
    assert _snapshot(dest).keys() == {".rec", "dist/b.whl", "r.json"}
    assert not (dest / "dist" / "x").exists()
    doc = json.loads((dest / ".rec").read_text())
    assert doc["tool"] == "t" and sorted(doc["outputs"]) == ["dist", "dist/b.whl", "r.json"]


def test_an_edited_record_never_reaches_outside(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    victim = tmp_path / "victim"
    victim.write_bytes(b"v")
    entry = {"kind": "file", "size": 1, "sha256": hashlib.sha256(b"v").hexdigest()}
    doc = {"format": FORMAT, "tool": "t", "outputs": {"../victim": entry}}
    (dest / ".rec").write_text(json.dumps(doc))
    staged = _staged(tmp_path / "s", {"a": b"a"})
    with pytest.raises(PackagingError, match=r"untrusted record.*'\.\.' path component"):
        publish(dest, staged, ["a"], record=".rec", tool="t", force=False)
    assert victim.read_bytes() == b"v" and not (dest / "a").exists()
    publish(dest, staged, ["a"], record=".rec", tool="t", force=True)  # ignored, with force
    assert victim.read_bytes() == b"v" and (dest / "a").read_bytes() == b"a"


def test_a_wheel_it_wrote_and_the_user_changed_says_what_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree, dest = _tree(tmp_path / "tree"), tmp_path / "out"
    assert _build(tree, dest) == 0
    wheel = dest / "dist" / WHEEL.format(v="1.0")
    written = wheel.stat().st_size
    with wheel.open("ab") as f:
        f.write(b"appended by hand")
    capsys.readouterr()
    assert _build(tree, dest) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"error: {dest}: cannot publish: 1 in the way, changed since build-python-packages "
        "wrote it (see --force)",
        f"  - dist/{wheel.name}: changed since this tool wrote it (size {written} -> "
        f"{written + 16} bytes)",
    ]
