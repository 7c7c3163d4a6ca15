"""A split planned in place, as values, without binaries: a scanned artifact and planned
transforms (stand-ins for what the transform returns) go in; the artifacts the split would
write come out (what the package builder puts in its catalog)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kpack.artifact.names import ArtifactId
from kpack.artifact.planned import PlannedArchive, TransformedBinary
from kpack.artifact.tree import Artifact, Entry, EntryKind
from kpack.bundle import IndexedBundle
from kpack.databases import DatabaseMatch, Handler
from kpack.elf import ElfEdit
from kpack.split import _inplan, _jobs
from kpack.split._plan import SplitOptions
from kpack.split._scan import ArtifactScan, DatabaseFile
from kpack.transform import ExtractedKernel, TransformPlan

ROOT = Path("/nonexistent/blas_lib_generic")
ART = ArtifactId("blas", "lib", "generic")


def _kernel(index: int, target: str, size: int) -> ExtractedKernel:
    bundle = IndexedBundle(0, 64, "zstd", 3, ())
    return ExtractedKernel(
        index=index,
        target=target,
        triple=f"hipv4-amdgcn-amd-amdhsa--{target}",
        size=size,
        data=None,
        bundle=bundle,
        offset=index * 1000,
        section=memoryview(b""),
        name="t",
    )


def _transform(source: Path, name: str, targets: dict[str, int]) -> TransformPlan:
    edit = ElfEdit(source, 4096, (), b"marker")
    kernels = tuple(_kernel(i, t, s) for i, (t, s) in enumerate(sorted(targets.items())))
    return TransformPlan(
        source=source,
        edit=edit,
        kernel_name=name,
        search_paths=("x",),
        removed_bytes=1000,
        kernels=kernels,
        notes=(),
    )


def _entry(stage: str, relpath: str, kind: EntryKind, source: Path, size: int = 0) -> Entry:
    mode = 0o755 if kind is EntryKind.DIR or relpath.endswith(".so") else 0o644
    return Entry(
        relpath=relpath, kind=kind, source=source, artifact=ART, stage=stage, size=size, mode=mode
    )


def _scan() -> ArtifactScan:
    handler = Handler("rocblas", "", ())
    db = DatabaseMatch(handler, "gfx942", "gfx942")
    return ArtifactScan(
        path=ROOT,
        stages=("a/stage", "b/stage"),
        kept=(
            _entry("b/stage", "lib", EntryKind.DIR, ROOT / "b/stage/lib"),
            _entry("a/stage", "lib", EntryKind.DIR, ROOT / "a/stage/lib"),
            _entry("a/stage", "include/a.h", EntryKind.FILE, ROOT / "h", 5),
        ),
        fat=(
            _entry("b/stage", "lib/libb.so", EntryKind.FILE, ROOT / "b/stage/lib/libb.so", 9000),
            _entry("a/stage", "lib/liba.so", EntryKind.FILE, ROOT / "a/stage/lib/liba.so", 8000),
        ),
        databases=(
            DatabaseFile(
                _entry("a/stage", "lib/x/T_gfx942.co", EntryKind.FILE, ROOT / "db", 10), db
            ),
        ),
        notes=(),
    )


@pytest.fixture
def split(monkeypatch: pytest.MonkeyPatch) -> _inplan.PlannedSplit:
    kernels = {
        "a/stage/lib/liba.so": {"gfx942": 300, "gfx9-4-generic": 200},
        "b/stage/lib/libb.so": {"gfx942": 50, "gfx90a:xnack+": 70},
    }
    artifact = Artifact(ART, ROOT, ("a/stage", "b/stage"), ())

    def classify(
        path: Path, stages: tuple[str, ...], entries: object, handlers: object, **kw: object
    ) -> object:
        # the split classifies the catalog's entries: it does not walk the artifact again
        assert (path, stages, entries) == (artifact.path, artifact.stages, artifact.entries)
        return _scan()

    monkeypatch.setattr(_inplan, "classify_entries", classify)
    monkeypatch.setattr(  # the transforms are planned in-process: one job at a time
        _jobs,
        "plan_host_transform",
        lambda source, kernel_name, search_paths: _transform(
            source, kernel_name, kernels[kernel_name]
        ),
    )
    [result] = _inplan.plan_in_place([(artifact, SplitOptions())], fat_of=lambda path: None, jobs=1)
    assert result is not None
    return result


def _by_target(split: _inplan.PlannedSplit) -> dict[str, Artifact]:
    return {a.id.target: a for a in split.outputs}


def test_host_binaries_carry_their_planned_transform(split: _inplan.PlannedSplit) -> None:
    generic = _by_target(split)["generic"]
    files = {e.relpath: e for e in generic.entries if e.kind is EntryKind.FILE}
    assert set(files) == {"lib/liba.so", "lib/libb.so", "include/a.h"}  # the database left
    liba = files["lib/liba.so"]
    assert isinstance(liba.planned, TransformedBinary)
    assert liba.size == 4096 - 0 + len(b"marker") and liba.stage == "a/stage"
    assert files["include/a.h"].planned is None


def test_one_archive_per_full_target_in_the_first_contributing_stage(
    split: _inplan.PlannedSplit,
) -> None:
    archives = {a.target: a for a in split.archives}
    assert sorted(archives) == ["gfx9-4-generic", "gfx90a:xnack+", "gfx942"]
    gfx942 = archives["gfx942"]
    assert gfx942.key == "blas_lib_gfx942/a/stage/.kpack/blas_lib_gfx942.kpack"
    assert [k.kernel_name for k in gfx942.kernels] == ["a/stage/lib/liba.so", "b/stage/lib/libb.so"]
    assert gfx942.original_bytes == 350
    only_b = archives["gfx90a:xnack+"]
    assert only_b.key.startswith("blas_lib_gfx90a:xnack+/b/stage/.kpack/")


def test_target_artifacts_hold_archives_and_moved_database_files(
    split: _inplan.PlannedSplit,
) -> None:
    gfx942 = _by_target(split)["gfx942"]
    entries = {(e.stage, e.relpath): e for e in gfx942.entries}
    archive = entries[("a/stage", ".kpack/blas_lib_gfx942.kpack")]
    assert isinstance(archive.planned, PlannedArchive) and archive.size == 350
    assert entries[("a/stage", ".kpack")].kind is EntryKind.DIR
    database = entries[("a/stage", "lib/x/T_gfx942.co")]
    assert database.planned is None and database.source == ROOT / "db"
    assert {r for s, r in entries if entries[(s, r)].kind is EntryKind.DIR} >= {"lib", "lib/x"}
    assert gfx942.stages == ("a/stage", "b/stage")  # both contributed kernels


def test_the_dry_run_description_names_every_output(split: _inplan.PlannedSplit) -> None:
    lines = split.describe()
    text = "\n".join(lines)
    # two stages: none is said in the header, each archive says its own
    assert lines[0] == "split blas_lib_generic:", lines
    assert lines[1].startswith("  2 fat binaries, "), lines
    assert lines[1].endswith(f"; {len(split.archives)} archives, 1 database file"), lines
    for archive in split.archives:
        where = archive.key.split("/")[1]  # <artifact>/<stage dir>/stage/.kpack/<file>
        line = next(x for x in lines if x.startswith(f"  {archive.target}: "))
        assert line.endswith(f"uncompressed, in {where}/stage"), line
    assert "a/stage/lib/x/T_gfx942.co -> blas_lib_gfx942" in text
