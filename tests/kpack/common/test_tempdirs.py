"""kpack.common.tempdirs: a temporary directory is named before it exists, so an interruption at
any point of its creation leaves nothing behind (each user checked here)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from build_tools.build_python_packages import run as build_run
from kpack import cli as cli_mod
from kpack import wheelsplit as spw
from kpack.archive import KernelInput, write_kpack
from kpack.common import staging as staging_mod
from kpack.common.boundary import Interrupted
from kpack.common.tempdirs import make_temp_dir, temp_dir_name
from tests.build_tools.treeutil import add_artifact, write_manifest


def test_names_are_fresh_and_directories_private(tmp_path: Path) -> None:
    names = {temp_dir_name(tmp_path, ".x-", ".tmp") for _ in range(100)}
    assert len(names) == 100 and not any(n.exists() for n in names)
    made = make_temp_dir(next(iter(names)))
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    with pytest.raises(FileExistsError):
        make_temp_dir(made)


def _interrupt_once_made(monkeypatch: pytest.MonkeyPatch, module: object) -> list[Path]:
    """``module.make_temp_dir`` creates the directory, then a SIGTERM 'arrives'."""
    made: list[Path] = []

    def make_then_signal(path: Path) -> Path:
        made.append(make_temp_dir(path))
        raise Interrupted(15)

    monkeypatch.setattr(module, "make_temp_dir", make_then_signal)
    return made


def test_build_interrupted_as_its_temp_dir_appears(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = tmp_path / "tree"
    write_manifest(tree)
    add_artifact(tree, "core-hip_lib_generic", "core/clr/stage", {"share/x.txt": b"x"})
    dest = tmp_path / "out"
    made = _interrupt_once_made(monkeypatch, staging_mod)
    with pytest.raises(Interrupted):
        build_run(["--artifact-dir", str(tree), "--dest-dir", str(dest), "--version", "7.99.0"])
    assert made and not made[0].exists()
    assert not dest.exists()  # made for the run, and empty again


def test_wheel_split_interrupted_as_its_temp_dirs_appear(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.kpack.wheel_fixtures import make_plain_wheel

    wheel = make_plain_wheel(tmp_path / "in")
    made = _interrupt_once_made(monkeypatch, staging_mod)
    out = tmp_path / "split" / "out"
    with pytest.raises(Interrupted):
        spw.split_wheel(wheel, out, spw.SplitOptions("torch/", "amd-device"))
    assert made and not made[0].exists()
    assert not (tmp_path / "split").exists()


def test_extract_interrupted_as_its_staging_dir_appears(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "a.kpack"
    write_kpack(archive, [KernelInput("lib/a.so#0", "gfx942", b"\x7fELF" + bytes(64))],
                group_name="a", gfx_arch_family="gfx942")  # fmt: skip
    made = _interrupt_once_made(monkeypatch, staging_mod)
    out = tmp_path / "x" / "kernels"
    assert cli_mod.main(["extract", str(archive), "-o", str(out)]) == 128 + 15
    assert made and not made[0].exists()
    assert not (tmp_path / "x").exists()
