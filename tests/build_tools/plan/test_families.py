"""A legacy tree (no ``flags.KPACK_SPLIT_ARTIFACTS`` in therock_manifest.json) with several
GPU families: each one must be a family a GPU of the family table selects, else one error
naming the artifact dirs and how to fix it, exit status 1, nothing written (issue 29)."""

from __future__ import annotations

from pathlib import Path

import pytest

from build_tools.build_python_packages import main
from build_tools.plan._families import selectable_by
from build_tools.targets import load_family_table
from tests.build_tools.treeutil import add_artifact, write_manifest

PROCESSORS = ("gfx1100", "gfx1101", "gfx90a", "gfx942")
#: The shipped family table (manifests/targets.yaml), which the error names.
TABLE = load_family_table().source


@pytest.mark.parametrize(
    ("label", "selected_by"),
    [
        ("gfx110X-all", ("gfx1100", "gfx1101")),
        ("gfx110X-dgpu", ("gfx1100", "gfx1101")),
        ("gfx90a-dcgpu", ("gfx90a",)),
        ("gfx942", ("gfx942",)),
        ("gfx942:xnack+", ("gfx942",)),
        ("gfx94X-dcgpu", ("gfx942",)),
        ("gfx999X-all", ()),  # the selector's pattern, but no GPU of the table
        ("gfx999X-bogus", ()),
        ("gfx110X-bogus", ()),  # no suffix the selector tries
        ("dgpu-all", ()),  # in the table, but no GPU selects it by its target
        ("gfx-debian12", ()),
        ("gfx9-4-generic", ("gfx942",)),  # the generic target serving gfx942
    ],
)
def test_which_gpus_select_a_family(label: str, selected_by: tuple[str, ...]) -> None:
    assert selectable_by(label, PROCESSORS) == selected_by


def _legacy_tree(root: Path, *families: str) -> Path:
    """TheRock's layout: base and core artifacts, and rand/blas libraries per family."""
    write_manifest(root, kpack=None)  # no KPACK_SPLIT_ARTIFACTS flag: legacy mode
    add_artifact(root, "core-hip_lib_generic", "core/clr/stage", {"share/hip/version": b"5.2"})
    for family in families:
        for name in ("rand", "blas"):
            files = {f"lib/{name}/library/{name}_{family}.dat": f"{name} {family}\n"}
            add_artifact(root, f"{name}_lib_{family}", f"{name}/stage", files)
    return root


def _build(tree: Path, dest: Path, *extra: str) -> int:
    return main(["--artifact-dir", str(tree), "--dest-dir", str(dest), "--version", "1.0", *extra])


@pytest.mark.parametrize("bogus", ["gfx999X-bogus", "gfx999X-all"])
def test_a_family_no_gpu_selects_next_to_a_real_one_is_one_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bogus: str
) -> None:
    """``gfx999X-all`` built two libraries packages and two ``rocm`` sdists (exit 0)."""
    tree = _legacy_tree(tmp_path / "tree", "gfx110X-all", bogus)
    dest = tmp_path / "out"
    (dest / "dist").mkdir(parents=True)
    (dest / "dist" / "previous.whl").write_bytes(b"old")
    assert _build(tree, dest, "-q") == 1
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: {tree}: GPU family labels no GPU can select next to gfx110X-all: {bogus}; the "
        "rocm selector installs the family named for the GPU's target (gfx1100: gfx110X-all, "
        "gfx110X-dgpu, gfx1100-dgpu, gfx1100), for the GPUs of "
        f"{TABLE}: rename these artifacts for one of its "
        "families (or give --targets-cmake), or build them apart"
    ], err
    assert f"  - {bogus}: blas_lib_{bogus}, rand_lib_{bogus}" in err.splitlines(), err
    assert "rand_lib_gfx110X-all" not in err
    # nothing written: the dest dir holds what it held
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*")) == [
        "dist",
        "dist/previous.whl",
    ]
    assert _build(tree, tmp_path / "new", "--dry-run") == 1  # refused while planning
    assert not (tmp_path / "new").exists()


def test_every_label_no_gpu_selects_is_named_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _legacy_tree(tmp_path / "tree", "gfx94X-dcgpu", "gfx999X-bogus", "gfx-debian12")
    assert _build(tree, tmp_path / "out", "-q") == 1
    lines = capsys.readouterr().err.splitlines()
    assert sum(line.startswith("error:") for line in lines) == 1, lines
    assert "next to gfx94X-dcgpu: gfx-debian12, gfx999X-bogus;" in lines[0], lines
    assert lines[1:] == [
        "  - gfx-debian12: blas_lib_gfx-debian12, rand_lib_gfx-debian12",
        "  - gfx999X-bogus: blas_lib_gfx999X-bogus, rand_lib_gfx999X-bogus",
    ]
    assert not (tmp_path / "out").exists()


def test_families_every_gpu_can_select_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _legacy_tree(tmp_path / "tree", "gfx110X-all", "gfx94X-dcgpu", "gfx90a")
    assert _build(tree, tmp_path / "out", "--dry-run") == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    for family in ("gfx110X-all", "gfx94X-dcgpu", "gfx90a"):
        assert f"rocm-sdk-libraries-{family}" in out


def test_a_family_table_that_knows_the_gpu_makes_it_selectable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fix the error names: TheRock's targets file declaring the GPU and its family."""
    tree = _legacy_tree(tmp_path / "tree", "gfx110X-all", "gfx999X-all")
    cmake = tmp_path / "therock_amdgpu_targets.cmake"
    cmake.write_text(
        'therock_add_amdgpu_target(gfx1100 "RX 7900" FAMILY gfx110X-all)\n'
        'therock_add_amdgpu_target(gfx9990 "Next" FAMILY gfx999X-all)\n'
    )
    argv = ("--targets-cmake", str(cmake), "--dry-run")
    assert _build(tree, tmp_path / "out", *argv) == 0, capsys.readouterr().err
    assert _build(tree, tmp_path / "out", "--dry-run") == 1
    assert f"for the GPUs of {TABLE}" in (capsys.readouterr().err)


def test_one_family_of_any_name_still_builds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing to select between: the ``rocm`` sdist's default is that family."""
    tree = _legacy_tree(tmp_path / "tree", "gfx999X-bogus")
    assert _build(tree, tmp_path / "out", "--dry-run") == 0, capsys.readouterr().err
