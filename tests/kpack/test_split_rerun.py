"""Re-running a split into the same output dir (TheRock's incremental builds do): what the
last run wrote is replaced, atomically; what it did not write is never touched without
``--force``; every other file stays."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_split import HANDLERS, BlasTree, blas_tree, listing, names_in

from kpack.errors import ArtifactError
from kpack.split import _output, _record, split_artifact

PREFIX = "blas_lib"


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> BlasTree:
    tmp = tmp_path_factory.mktemp("blas")
    return blas_tree(tmp / "artifacts", tmp / "build")


def _split(tree: BlasTree, out: Path, **kwargs: object) -> list[str]:
    result = split_artifact(tree.artifact, out, handlers=HANDLERS, **kwargs)  # type: ignore[arg-type]
    return [p.name for p in result.outputs]


def test_rerun_replaces_its_own_output_and_leaves_the_rest(tree: BlasTree, tmp_path: Path) -> None:
    out = tmp_path / "artifacts"
    (out / "other_lib_generic").mkdir(parents=True)
    (out / "other_lib_generic" / "keep.txt").write_text("not ours")
    (out / "notes.txt").write_text("not ours either")
    first = _split(tree, out)
    before = listing(out)
    record = out / f".kpack-split-{PREFIX}.json"
    assert set(json.loads(record.read_text())["names"]) == set(first)
    assert _split(tree, out) == first  # no --force needed
    assert listing(out) == before
    assert (out / "other_lib_generic" / "keep.txt").read_text() == "not ours"
    assert not [p for p in out.iterdir() if p.name.startswith(".partial")]


def test_rerun_removes_what_only_the_last_run_wrote(tree: BlasTree, tmp_path: Path) -> None:
    out = tmp_path / "out"
    wide = _split(tree, out)
    narrow = _split(tree, out, gpu_targets=["gfx942"])
    assert set(narrow) < set(wide)
    assert names_in(out) == narrow
    assert set(json.loads((out / f".kpack-split-{PREFIX}.json").read_text())["names"]) == set(
        narrow
    )


def test_a_file_the_tool_did_not_write_needs_force(tree: BlasTree, tmp_path: Path) -> None:
    out = tmp_path / "out"
    _split(tree, out)
    intruder = out / f"{PREFIX}_generic" / "mine.txt"
    intruder.write_text("user file")
    with pytest.raises(ArtifactError, match=r"did not write.*--force") as info:
        _split(tree, out)
    assert info.value.problems == (f"{PREFIX}_generic",)
    assert intruder.read_text() == "user file"
    _split(tree, out, force=True)
    assert not intruder.exists()
    _split(tree, out)  # recorded again: the next run needs no --force


def test_a_changed_file_needs_force(tree: BlasTree, tmp_path: Path) -> None:
    out = tmp_path / "out"
    _split(tree, out)
    manifest = out / f"{PREFIX}_gfx942" / "artifact_manifest.txt"
    manifest.write_text(manifest.read_text() + "edited/stage\n")
    with pytest.raises(ArtifactError, match="did not write") as info:
        _split(tree, out)
    assert info.value.problems == (f"{PREFIX}_gfx942",)
    assert "edited/stage" in manifest.read_text()


def test_a_dir_from_another_tool_or_a_lost_record_needs_force(
    tree: BlasTree, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    _split(tree, out)
    record = out / f".kpack-split-{PREFIX}.json"
    for damage in ("", "{not json", json.dumps({"format": "other", "names": {}})):
        record.write_text(damage)
        with pytest.raises(ArtifactError, match="did not write"):
            _split(tree, out)
    record.unlink()
    with pytest.raises(ArtifactError, match="did not write"):
        _split(tree, out)


def test_two_prefixes_share_an_output_dir(tree: BlasTree, tmp_path: Path) -> None:
    out = tmp_path / "out"
    _split(tree, out)
    _split(tree, out, prefix="rocblas_lib")
    mine = listing(out)
    _split(tree, out)
    _split(tree, out, prefix="rocblas_lib")
    assert listing(out) == mine
    assert (out / ".kpack-split-rocblas_lib.json").is_file()


def test_a_failed_publish_puts_the_last_output_back(
    tree: BlasTree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    _split(tree, out)
    before = listing(out)
    record_bytes = (out / f".kpack-split-{PREFIX}.json").read_bytes()

    def fail(path: Path, names: object) -> None:
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(_output, "write_record", fail)
    with pytest.raises(OSError, match="No space"):
        _split(tree, out)
    assert listing(out) == before
    assert (out / f".kpack-split-{PREFIX}.json").read_bytes() == record_bytes


def test_error_lists_stay_short(tmp_path: Path) -> None:
    out = tmp_path / "out"
    names = [f"x_lib_gfx90{i}" for i in range(8)]
    for name in names:
        (out / name).mkdir(parents=True)
    staging = _output.Staging(out, force=False, record=_record.record_path(out, "x_lib"))
    with staging, pytest.raises(ArtifactError) as info:
        staging.check_free(names)
    assert info.value.problems == (*names[:3], "... and 5 more")
    assert len(info.value.message) < 100  # the path goes before it, the list after
