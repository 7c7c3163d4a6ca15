"""Family labels on artifacts: any label on a fat artifact of a kpack-split tree builds (the
split goes by the code objects' own targets), a label on pre-split archives must be a
target id, and a legacy tree's families must each be selectable and ship the same
libraries."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from build_tools.build_python_packages import main

from ..conftest import require
from .conftest import VERSION, build_dist, install
from .test_kpack_mode import _copy, _digests, _family_named, _kfd_topology, _self_test

pytestmark = [pytest.mark.real, pytest.mark.compile, pytest.mark.slow]

_NOTICE = "notice: GPU family labels the family table does not know: gfx-debian12"


@pytest.fixture(scope="module")
def fat_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require(shutil.which("hipcc") is not None, "hipcc is not installed")
    from sample_tree.make_sample_tree import make_sample_tree

    out = tmp_path_factory.mktemp("kpack") / "artifacts"
    return make_sample_tree(out, cache_dir=None, family="gfx90a-dcgpu", kpack_split=True)


def _errors(tree: Path, dest: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> list[str]:
    """The error lines of a failed build (which wrote nothing)."""
    argv = ["--artifact-dir", str(tree), "--dest-dir", str(dest), "--version", VERSION, *extra]
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 1, err
    assert not dest.exists() or not any(dest.iterdir())
    return [line for line in err.splitlines() if line.startswith("error:")], err


def test_fat_artifacts_with_an_unknown_family_label_build_install_and_self_test(
    fat_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real kpack-split tree with fat ``P_gfx-debian12`` artifacts builds in one
    command with one notice, gives the packages the ``P_generic`` form gives, installs,
    and passes ``rocm-sdk test`` on a gfx90a machine (a fake KFD topology)."""
    reference = build_dist(fat_tree, tmp_path / "reference")
    capsys.readouterr()
    tree = _family_named(fat_tree, tmp_path, "gfx-debian12")
    assert (tree / "rand_lib_gfx-debian12").is_dir() and (tree / "fft_lib_gfx-debian12").is_dir()
    dist = build_dist(tree, tmp_path / "out")
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if line.startswith("notice: GPU family")] == [
        f"{_NOTICE} (7 artifacts); kpack-split mode splits their fat binaries by the code "
        "objects' own targets"
    ], err
    assert _digests(dist) == _digests(reference)

    venv = tmp_path / "venv"
    install(dist, venv, f"rocm[libraries,device-gfx90a]=={VERSION}")
    gfx90a = {"ROCM_SDK_KFD_TOPOLOGY": str(_kfd_topology(tmp_path / "kfd90a", 90010))}
    test = _self_test(venv, **gfx90a)
    out = test.stdout + test.stderr
    assert test.returncode == 0, out[-6000:]
    assert "testKernelsFoundForInstalledTargets" in out and "OK" in out
    assert "no GPU detected" not in out


def test_a_known_family_label_gives_no_notice(
    fat_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _family_named(fat_tree, tmp_path, "gfx94X-dcgpu")
    assert main(["--artifact-dir", str(tree), "--dest-dir", str(tmp_path / "o"),
                 "--version", VERSION, "--dry-run"]) == 0  # fmt: skip
    assert "notice: GPU family" not in capsys.readouterr().err


@pytest.mark.parametrize("label", ["gfx9zz", "gfx94X-dcgpu", "gfx-debian12"])
def test_a_family_label_on_presplit_archives_is_an_error(
    fat_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], label: str
) -> None:
    """Archives are per target: a label there that is no target id is a typo, whether or
    not the family table knows it."""
    from kpack.split import split_artifact

    tree = _copy(fat_tree, tmp_path)
    source = tmp_path / "unsplit" / "rand_lib_generic"
    shutil.move(str(tree / "rand_lib_generic"), source)
    split_artifact(source, tree, prefix="rand_lib")
    (tree / "rand_lib_gfx90a:xnack+").rename(tree / f"rand_lib_{label}")
    errors, err = _errors(tree, tmp_path / "out", capsys)
    assert len(errors) == 1 and "pre-split .kpack archives" in errors[0], err
    assert f"rand_lib_{label}" in err, err


# --- legacy mode ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def legacy_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require(shutil.which("hipcc") is not None, "hipcc is not installed")
    from sample_tree.make_sample_tree import make_sample_tree

    out = tmp_path_factory.mktemp("legacy") / "artifacts"
    return make_sample_tree(out, cache_dir=None, family="gfx90a-dcgpu", kpack_split=False)


def _with_family(tree: Path, tmp_path: Path, family: str, names: tuple[str, ...]) -> Path:
    out = _copy(tree, tmp_path)
    for name in names:
        shutil.copytree(
            out / f"{name}_lib_gfx90a-dcgpu", out / f"{name}_lib_{family}", symlinks=True
        )
    return out


def test_legacy_unselectable_label_next_to_known_ones_is_one_error(
    legacy_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _with_family(legacy_tree, tmp_path, "gfx-debian12", ("rand", "fft"))
    errors, err = _errors(tree, tmp_path / "out", capsys)
    assert len(errors) == 1, err
    assert "no GPU can select next to gfx90a-dcgpu: gfx-debian12" in errors[0], err


def test_legacy_families_with_different_library_sets_are_one_error(
    legacy_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _with_family(legacy_tree, tmp_path, "gfx110X-all", ("rand",))
    errors, err = _errors(tree, tmp_path / "out", capsys)
    assert len(errors) == 1 and "ship different library sets" in errors[0], err
    assert "gfx90a-dcgpu: libhipsample.so.1" in err and "gfx110X-all:" not in err, err


def test_legacy_single_unknown_label_builds(
    legacy_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _copy(legacy_tree, tmp_path)
    for child in sorted(tree.glob("*_gfx90a-dcgpu")):
        child.rename(tree / child.name.replace("gfx90a-dcgpu", "gfx-debian12"))
    argv = ["--artifact-dir", str(tree), "--dest-dir", str(tmp_path / "out"), "--version", VERSION]
    assert main([*argv, "--dry-run"]) == 0, capsys.readouterr().err
    assert "rocm-sdk-libraries-gfx-debian12" in capsys.readouterr().out
