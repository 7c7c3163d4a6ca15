"""Re-running a split into the same output dir (TheRock's incremental builds do): what the
last run wrote is replaced, atomically; what it did not write is never touched without
``--force``; every other file stays."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kpack.artifact import output as _output
from kpack.common import outputs as outputs_module
from kpack.errors import PackagingError, RocmPackagingError
from kpack.split import split_artifact
from tests.kpack.split.test_split import HANDLERS, BlasTree, blas_tree, listing, names_in

PREFIX = "blas_lib"


def _recorded_names(record: Path) -> set[str]:
    """The top-level names a split's record lists."""
    return {rel for rel in json.loads(record.read_text())["outputs"] if "/" not in rel}


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
    assert _recorded_names(record) == set(first)
    assert _split(tree, out) == first  # no --force needed
    assert listing(out) == before
    assert (out / "other_lib_generic" / "keep.txt").read_text() == "not ours"
    assert not [p for p in out.iterdir() if ".staging-" in p.name]


def test_rerun_removes_what_only_the_last_run_wrote(tree: BlasTree, tmp_path: Path) -> None:
    out = tmp_path / "out"
    wide = _split(tree, out)
    narrow = _split(tree, out, gpu_targets=["gfx942"])
    assert set(narrow) < set(wide)
    assert names_in(out) == narrow
    assert _recorded_names(out / f".kpack-split-{PREFIX}.json") == set(narrow)


def test_a_file_the_tool_did_not_write_needs_force(tree: BlasTree, tmp_path: Path) -> None:
    out = tmp_path / "out"
    _split(tree, out)
    intruder = out / f"{PREFIX}_generic" / "mine.txt"
    intruder.write_text("user file")
    with pytest.raises(PackagingError, match=r"changed since kpack split wrote it \(see") as e:
        _split(tree, out)
    added = f"{PREFIX}_generic: changed since this tool wrote it (mine.txt: added)"
    assert e.value.problems == (added,)
    assert intruder.read_text() == "user file"
    _split(tree, out, force=True)
    assert not intruder.exists()
    _split(tree, out)  # recorded again: the next run needs no --force


def test_a_changed_file_needs_force(tree: BlasTree, tmp_path: Path) -> None:
    out = tmp_path / "out"
    _split(tree, out)
    manifest = out / f"{PREFIX}_gfx942" / "artifact_manifest.txt"
    before = manifest.stat().st_size
    manifest.write_text(manifest.read_text() + "edited/stage\n")
    with pytest.raises(PackagingError, match="changed since kpack split wrote it") as info:
        _split(tree, out)
    assert info.value.problems == (
        f"{PREFIX}_gfx942: changed since this tool wrote it (artifact_manifest.txt: size "
        f"{before} -> {before + 13} bytes)",
    )
    assert "edited/stage" in manifest.read_text()


def test_a_dir_from_another_tool_or_a_lost_record_needs_force(
    tree: BlasTree, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    _split(tree, out)
    record = out / f".kpack-split-{PREFIX}.json"
    for damage in ("", "{not json", json.dumps({"format": "other", "names": {}})):
        record.write_text(damage)
        with pytest.raises(PackagingError, match="untrusted record of earlier outputs"):
            _split(tree, out)
    record.unlink()
    with pytest.raises(PackagingError, match="not written by kpack split"):
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

    def fail(tool: str, entries: object) -> bytes:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(outputs_module, "record_bytes", fail)
    with pytest.raises(PackagingError, match="No space"):
        _split(tree, out)
    assert listing(out) == before
    assert (out / f".kpack-split-{PREFIX}.json").read_bytes() == record_bytes


def test_error_lists_stay_short(tmp_path: Path) -> None:
    out = tmp_path / "out"
    names = [f"x_lib_gfx90{i}" for i in range(8)]
    for name in names:
        (out / name).mkdir(parents=True)
        (out / name / "mine.txt").write_text("a user's")  # an empty dir would hold nothing
    staging = _output.Staging(out, force=False, record=out / ".kpack-split-x_lib.json")
    with staging, pytest.raises(RocmPackagingError) as info:
        staging.check_free(names)
    shown = tuple(f"{n}: a directory not written by this tool" for n in names[:5])
    assert info.value.problems == (*shown, "... and 3 more")
    assert len(info.value.message) < 100  # the path goes before it, the list after
