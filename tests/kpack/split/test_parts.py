"""Archive parts (kpack.split._parts): no archive over the limit every reader loads.

A small limit is injected (``max_archive_bytes``) so a handful of synthetic kernels need
parts; every archive is then read under HRX's rules (``hrx_reader``), the markers name the
parts their binaries use, and the runtime's lookup (``kpack.resolve``, the C runtime's
rules) finds every kernel in a flattened install.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kpack.artifact.names import ArtifactId
from kpack.artifact.tree import Artifact, read_stages, walk_stages
from kpack.errors import ArchiveError
from kpack.resolve import read_kpack_ref, resolve_binary
from kpack.split import (
    SplitOptions,
    SplitResult,
    plan_in_place,
    split_artifact,
    spool_planned,
)
from kpack.transform import inspect_fat_binary
from kpack.verify import verify_binary
from tests.kpack.hrx_reader import hrx_read
from tests.kpack.split.test_split import Fat, flatten, make_fat, manifest, put

STAGE = "math-libs/BLAS/rocBLAS/stage"
LIMIT = 2600
TARGETS = ["gfx942", "gfx90a:xnack-"]
LIBS = ("lib/liba.so.1", "lib/libb.so.1", "lib/sub/libc.so.1")


def tree(root: Path, build: Path, *, base_size: int = 600) -> tuple[Path, dict[str, Fat]]:
    art = root / "blas_lib_gfx94X-dcgpu"
    fats = {}
    for number, rel in enumerate(LIBS):
        fat = make_fat(build, f"lib{number}", [TARGETS] * (3 - number), base_size=base_size)
        put(art, STAGE, rel, fat.path, 0o755)
        fats[rel] = fat
    manifest(art, STAGE)
    return art, fats


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Fat]]:
    tmp = tmp_path_factory.mktemp("parts")
    return tree(tmp / "artifacts", tmp / "build")


@pytest.fixture(scope="module")
def parted(
    inputs: tuple[Path, dict[str, Fat]], tmp_path_factory: pytest.TempPathFactory
) -> SplitResult:
    return split_artifact(
        inputs[0], tmp_path_factory.mktemp("out") / "out", max_archive_bytes=LIMIT, jobs=2
    )


def test_no_archive_exceeds_the_limit_and_hrx_reads_every_one(
    inputs: tuple[Path, dict[str, Fat]], parted: SplitResult
) -> None:
    out = parted.outputs[0].parent
    expected = {
        (f"{STAGE}/{rel}#{index}", target): data
        for rel, fat in inputs[1].items()
        for index, per_target in fat.expected.items()
        for target, data in per_target.items()
    }
    found: dict[tuple[str, str], bytes] = {}
    names: dict[str, list[str]] = {}
    for path in sorted(p for p in out.rglob("*.kpack") if p.is_file()):
        assert path.stat().st_size <= LIMIT, path
        contents = hrx_read(path)
        assert not set(contents) & set(found), "a kernel in two parts"
        found.update(contents)
        (target,) = {t for _, t in contents}
        names.setdefault(target, []).append(path.name)
        assert path.parent == out / f"blas_lib_{target}" / STAGE / ".kpack"
    assert found == expected
    for target in TARGETS:
        count = len(names[target])
        assert count >= 3, names
        assert sorted(names[target]) == sorted(
            [f"blas_lib_{target}.kpack"]
            + [f"blas_lib-part{k}_{target}.kpack" for k in range(2, count + 1)]
        )
    assert any("archive parts" in n for n in parted.notes)


def test_markers_name_the_parts_their_kernels_are_in(parted: SplitResult) -> None:
    out = parted.outputs[0].parent
    parts_of: dict[str, set[str]] = {}
    for path in (p for p in out.rglob("*.kpack") if p.is_file()):
        group = path.name.rpartition("_")[0]
        for key, _ in hrx_read(path):
            parts_of.setdefault(key.rpartition("#")[0], set()).add(group)
    for rel in LIBS:
        ref = read_kpack_ref(parted.outputs[0] / STAGE / rel)
        assert ref is not None
        up = "../" * rel.count("/")
        groups = sorted(parts_of[f"{STAGE}/{rel}"] - {"blas_lib"})
        assert ref.search_paths == (
            f"{up}.kpack/blas_lib_@GFXARCH@.kpack",
            *(f"{up}.kpack/{g}_@GFXARCH@.kpack" for g in groups),
        )
    # the first library's kernels straddle parts 1 and 2
    first = read_kpack_ref(parted.outputs[0] / STAGE / LIBS[0])
    assert first is not None and first.search_paths[1:] == (
        "../.kpack/blas_lib-part2_@GFXARCH@.kpack",
    )


def test_the_runtime_lookup_finds_every_kernel_in_the_parts(
    parted: SplitResult, tmp_path: Path
) -> None:
    flat = flatten(parted.outputs[0].parent, ["blas_lib_"], tmp_path / "install")
    seen_parts = set()
    for rel in LIBS:
        report = verify_binary(flat / rel)
        assert report.targets == tuple(sorted(TARGETS))
        for agent in ("gfx942:sramecc+:xnack-", "gfx90a:xnack-"):
            res = resolve_binary(flat / rel, [agent], env={}, with_generic=False)
            assert not res.missing, [m.reason for m in res.missing]
            seen_parts |= {lk.archive.name for lk in res.lookups if lk.archive is not None}
    assert any("-part" in name for name in seen_parts)


def test_under_the_limit_nothing_changes(
    inputs: tuple[Path, dict[str, Fat]], tmp_path: Path
) -> None:
    whole = split_artifact(inputs[0], tmp_path / "out", jobs=1)
    # at 3200 bytes the first library's kernels fill part 1, the others go to part 2
    parted = split_artifact(inputs[0], tmp_path / "parted", max_archive_bytes=3200, jobs=1)
    assert len(parted.archives) == 4
    assert [a.path.name for a in whole.archives] == [
        "blas_lib_gfx90a:xnack-.kpack",
        "blas_lib_gfx942.kpack",
    ]
    for rel in LIBS:
        ref = read_kpack_ref(whole.outputs[0] / STAGE / rel)
        assert ref is not None and len(ref.search_paths) == 1
    # a binary whose kernels all sit in part 1 is byte-identical either way
    first = LIBS[0]
    assert (whole.outputs[0] / STAGE / first).read_bytes() == (
        parted.outputs[0] / STAGE / first
    ).read_bytes()
    for rel in LIBS[1:]:
        ref = read_kpack_ref(parted.outputs[0] / STAGE / rel)
        assert ref is not None and len(ref.search_paths) == 2


def test_a_kernel_larger_than_the_limit_is_refused(
    inputs: tuple[Path, dict[str, Fat]], tmp_path: Path
) -> None:
    with pytest.raises(ArchiveError, match="no archive of at most 900 bytes holds it"):
        split_artifact(inputs[0], tmp_path / "out", max_archive_bytes=900, jobs=1)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_an_empty_code_object_is_refused(tmp_path: Path) -> None:
    """A bundle entry of 0 bytes is no code object; HRX refuses an archive holding one
    (original_size 0), so the split stops and names it instead of writing that archive."""
    art = tmp_path / "blas_lib_gfx94X-dcgpu"
    fat = make_fat(tmp_path / "build", "empty", [["gfx942"], ["gfx942"]], base_size=0)
    put(art, STAGE, "lib/libempty.so", fat.path, 0o755)
    manifest(art, STAGE)
    with pytest.raises(ArchiveError, match=r"libempty.so#1', 'gfx942'\): the code object is empty"):
        split_artifact(art, tmp_path / "out", jobs=1)
    shutil.rmtree(tmp_path / "build")


def test_the_package_builder_cuts_the_same_parts(
    inputs: tuple[Path, dict[str, Fat]], parted: SplitResult, tmp_path: Path
) -> None:
    """The builder plans its split in place (nothing written) and streams the archives from
    spools: the same parts, the same markers, and archives HRX reads."""
    art = inputs[0]
    stages = read_stages(art)
    artifact = Artifact(ArtifactId("blas", "lib", "generic"), art, stages,
                        walk_stages(art, stages, ArtifactId.parse(art.name)))  # fmt: skip
    options = SplitOptions(max_archive_bytes=LIMIT)
    [planned] = plan_in_place([(artifact, options)], fat_of=inspect_fat_binary, jobs=2)
    assert planned is not None and planned.spec.limit == LIMIT
    out = parted.outputs[0].parent
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.kpack") if p.is_file())
    assert sorted(a.key for a in planned.archives) == written
    for fat, content in planned.transformed:
        ref = read_kpack_ref(parted.outputs[0] / fat.stage / fat.relpath)
        assert ref is not None and content.transform.search_paths == ref.search_paths
    laid = spool_planned([planned], tmp_path, jobs=1)
    for key, archive in laid.items():
        path = tmp_path / "streamed" / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"".join(bytes(c) for c in archive.chunks()))
        assert path.stat().st_size <= LIMIT
        assert path.read_bytes() == (out / key).read_bytes()  # the same archive, byte for byte
        assert hrx_read(path)
