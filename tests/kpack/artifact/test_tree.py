"""kpack.artifact.tree: the one walker and entry model of an artifact, for the package
builder and ``kpack split-artifacts`` alike."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from build_tools.artifacts import scan_artifact as builder_scan
from kpack.artifact.names import ArtifactId
from kpack.artifact.tree import EntryKind, read_stages, walk_stages
from kpack.errors import ArtifactError
from kpack.split._scan import scan_artifact as splitter_scan


def _artifact(root: Path, stages: tuple[str, ...] = ("lib/stage", "run/stage")) -> Path:
    art = root / "blas_lib_generic"
    for stage in stages:
        (art / stage / "lib" / "sub").mkdir(parents=True)
    (art / "artifact_manifest.txt").write_text("".join(f"{s}\n" for s in stages))
    lib = art / "lib/stage/lib"
    (lib / "libx.so.1").write_bytes(b"\x7fELF not really")
    (lib / "libx.so.1").chmod(0o755)
    (lib / "sub" / "data.txt").write_text("hello")
    os.symlink("libx.so.1", lib / "libx.so")
    os.symlink("sub", lib / "subdir")  # a link to a directory: recorded, never walked
    (art / "run/stage/lib/tool").write_text("#!/bin/sh\n")
    return art


def test_every_path_is_recorded_once_and_links_are_not_followed(tmp_path: Path) -> None:
    art = _artifact(tmp_path)
    stages = read_stages(art)
    entries = walk_stages(art, stages, ArtifactId.parse(art.name))
    got = [(e.stage, e.relpath, e.kind, e.link) for e in entries]
    assert got == [
        ("lib/stage", "lib", EntryKind.DIR, None),
        ("lib/stage", "lib/libx.so", EntryKind.SYMLINK, "libx.so.1"),
        ("lib/stage", "lib/libx.so.1", EntryKind.FILE, None),
        ("lib/stage", "lib/sub", EntryKind.DIR, None),
        ("lib/stage", "lib/sub/data.txt", EntryKind.FILE, None),
        ("lib/stage", "lib/subdir", EntryKind.SYMLINK, "sub"),
        ("run/stage", "lib", EntryKind.DIR, None),
        ("run/stage", "lib/sub", EntryKind.DIR, None),
        ("run/stage", "lib/tool", EntryKind.FILE, None),
    ]
    by = {e.relpath: e for e in entries if e.stage == "lib/stage"}
    assert by["lib/libx.so.1"].mode == 0o755 and by["lib/libx.so.1"].size == 15
    assert by["lib/sub/data.txt"].origin == "blas_lib_generic:lib/sub/data.txt"


def test_the_builder_and_the_splitter_see_the_same_entries(tmp_path: Path) -> None:
    art = _artifact(tmp_path)
    built = builder_scan(art)
    split = splitter_scan(art, ())
    assert split.kept == built.entries and not split.fat and not split.databases
    assert [e.source for e in built.entries] == [e.source for e in split.kept]


def test_a_missing_stage_is_an_error_for_the_builder_and_skipped_by_the_splitter(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    art = _artifact(tmp_path)
    (art / "artifact_manifest.txt").write_text("lib/stage\nrun/stage\ngone/stage\n")
    with pytest.raises(ArtifactError, match="'gone/stage' does not exist"):
        builder_scan(art)
    assert splitter_scan(art, ()).stages == ("lib/stage", "run/stage")
    assert "'gone/stage' does not exist; skipped" in caplog.text


def test_a_link_out_of_its_stage_or_a_fifo_is_refused(tmp_path: Path) -> None:
    art = _artifact(tmp_path)
    os.symlink("../../../../outside", art / "lib/stage/lib/escape")
    with pytest.raises(ArtifactError, match="escape"):
        walk_stages(art, read_stages(art), None)
    os.unlink(art / "lib/stage/lib/escape")
    os.mkfifo(art / "run/stage/lib/pipe")
    with pytest.raises(ArtifactError, match="not a regular file, directory or symlink"):
        walk_stages(art, read_stages(art), None)
