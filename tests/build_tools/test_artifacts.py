from __future__ import annotations

from pathlib import Path

import pytest

from build_tools.artifacts import ArtifactId, EntryKind, scan_artifacts
from kpack.errors import ArtifactError

from .treeutil import add_artifact, write_manifest


def test_scan_model(tmp_path: Path) -> None:
    write_manifest(tmp_path)
    add_artifact(
        tmp_path,
        "core-hip_lib_generic",
        "core/clr/stage",
        {
            "lib/libx.so.1": b"x",
            "lib/libx.so": "symlink:libx.so.1",
            "share/empty": "dir:",
        },
    )
    (tmp_path / ".cache").mkdir()  # hidden: skipped with a notice
    (tmp_path / "README").write_text("ignored")  # a file: skipped with a notice
    cat = scan_artifacts(tmp_path)
    assert not cat.kpack_split
    ids = [a.id for a in cat.artifacts]
    assert ArtifactId("core-hip", "lib", "generic") in ids
    art = next(a for a in cat.artifacts if a.id.name == "core-hip")
    kinds = {e.relpath: e.kind for e in art.entries}
    assert kinds["lib/libx.so"] is EntryKind.SYMLINK
    assert kinds["share/empty"] is EntryKind.DIR
    assert [e.relpath for e in art.entries] == sorted(e.relpath for e in art.entries)


def test_kpack_flag_true(tmp_path: Path) -> None:
    write_manifest(tmp_path, kpack=True)
    assert scan_artifacts(tmp_path).kpack_split


def test_missing_flags_means_legacy(tmp_path: Path) -> None:
    write_manifest(tmp_path, kpack=None)
    assert not scan_artifacts(tmp_path).kpack_split


def test_missing_therock_manifest(tmp_path: Path) -> None:
    add_artifact(tmp_path, "core-hip_lib_generic", "s", {"lib/a": b"a"})
    with pytest.raises(ArtifactError, match=r"therock_manifest\.json is missing.*base_lib_generic"):
        scan_artifacts(tmp_path)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{not json", "malformed JSON"),
        ("[]", "JSON object"),
        ('{"flags": {"KPACK_SPLIT_ARTIFACTS": "ON"}}', "must be JSON true or false"),
        ('{"flags": []}', "'flags' must be"),
    ],
)
def test_bad_therock_manifest(tmp_path: Path, raw: str, message: str) -> None:
    path = write_manifest(tmp_path, raw=raw)
    with pytest.raises(ArtifactError, match=message) as info:
        scan_artifacts(tmp_path)
    assert str(path) in str(info.value)


def test_artifact_without_manifest(tmp_path: Path) -> None:
    write_manifest(tmp_path)
    (tmp_path / "blas_lib_generic" / "stage").mkdir(parents=True)
    with pytest.raises(ArtifactError, match=r"blas_lib_generic.*no artifact_manifest\.txt"):
        scan_artifacts(tmp_path)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("/abs/stage", "is absolute"),
        ("a/../../b", "has '..' path component"),
        (".", "has '.' path component"),
        ("s/sub", "'s/sub' lies inside stage directory 's'"),
        ("missing/stage", "does not exist"),
    ],
)
def test_bad_manifest_lines(tmp_path: Path, line: str, message: str) -> None:
    write_manifest(tmp_path)
    add_artifact(tmp_path, "blas_lib_generic", "s", {"x": b"x"}, manifest=f"s\n{line}\n")
    with pytest.raises(ArtifactError, match=message) as info:
        scan_artifacts(tmp_path)
    assert "blas_lib_generic/artifact_manifest.txt" in str(info.value)


@pytest.mark.parametrize("link", ["../../../../../etc/passwd", "/etc/passwd", "../../.."])
def test_symlink_out_of_tree(tmp_path: Path, link: str) -> None:
    write_manifest(tmp_path)
    add_artifact(tmp_path, "blas_lib_generic", "s", {"lib/evil": f"symlink:{link}"})
    with pytest.raises(ArtifactError, match="leads outside") as info:
        scan_artifacts(tmp_path)
    assert "lib/evil" in str(info.value)


def test_stage_dir_symlink_escape(tmp_path: Path) -> None:
    write_manifest(tmp_path)
    outside = tmp_path.parent / (tmp_path.name + "-outside")
    outside.mkdir()
    art = tmp_path / "blas_lib_generic"
    art.mkdir()
    (art / "artifact_manifest.txt").write_text("s\n")
    (art / "s").symlink_to(outside)
    with pytest.raises(ArtifactError):
        scan_artifacts(tmp_path)


def test_archives_are_read_into_a_spool(tmp_path: Path) -> None:
    """Archives are inputs (:mod:`kpack.artifact.packed`): read only into a spool, and an
    empty one is no zstd stream."""
    (tmp_path / "blas_lib_generic.tar.zst").write_bytes(b"")
    with pytest.raises(ArtifactError, match="no spool directory"):
        scan_artifacts(tmp_path)
    spool = tmp_path.parent / (tmp_path.name + "-spool")
    spool.mkdir()
    with pytest.raises(ArtifactError, match=r"blas_lib_generic\.tar\.zst: is not a zstd stream"):
        scan_artifacts(tmp_path, spool=spool)


def test_kpack_mode_takes_family_named_artifacts_as_unsplit_input(tmp_path: Path) -> None:
    """TheRock writes unsplit components under the family name (``artifacts-unsplit/``);
    one without device code is host content: it becomes ``P_generic`` in the plan."""
    from build_tools.kpack_split import plan_fat_splits

    write_manifest(tmp_path, kpack=True)
    add_artifact(tmp_path, "blas_dev_gfx94X-dcgpu", "s", {"include/x.h": b"x"})
    catalog = scan_artifacts(tmp_path)
    assert "blas_dev_gfx94X-dcgpu" in {a.id.dirname for a in catalog.artifacts}
    planned, split = plan_fat_splits(catalog, ["blas"], {})
    assert not split.splits
    names = {a.id.dirname for a in planned.artifacts}
    assert "blas_dev_generic" in names and "blas_dev_gfx94X-dcgpu" not in names
    (dev,) = [a for a in planned.artifacts if a.id.dirname == "blas_dev_generic"]
    assert {e.relpath for e in dev.entries} >= {"include/x.h"}
    assert {e.artifact.target for e in dev.entries} == {"generic"}
