"""A clean uninstall (issue 33, item 2) on sets built by the builder from the real sample
trees: after ``rocm-sdk init`` (the devel tree expanded, device files linked), uninstalling
every package of the set in any order, with pip (the venv's and this project's) or uv,
leaves site-packages as it was before the install; links ``rocm-sdk init`` made into a
package go when that package goes, and come back when it does."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from ..conftest import require
from .conftest import VERSION, build_dist

pytestmark = [pytest.mark.real, pytest.mark.compile, pytest.mark.slow]

ALL = f"rocm[libraries,devel,profiler]=={VERSION}"
#: What ``pip freeze | xargs pip uninstall -y`` passes: pip removes them in this order
#: (core before devel), the order that left 129 dangling links behind.
PIP_ORDER = (
    "rocm",
    "rocm-profiler",
    "rocm-sdk-core",
    "rocm-sdk-devel",
    "rocm-sdk-libraries-gfx90a-dcgpu",
)
UV = Path(sys.executable).with_name("uv")


def _env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PIP_", "UV_", "ROCM_SDK_", "VIRTUAL_ENV", "PYTHON"))
    }
    return {**env, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "UV_NO_CACHE": "1"}


def _run(*cmd: str | Path, venv: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = _env()
    if venv is not None:
        env["VIRTUAL_ENV"] = str(venv)
    proc = subprocess.run(
        [str(c) for c in cmd], capture_output=True, text=True, env=env, check=False, timeout=600
    )
    assert proc.returncode == 0, f"{cmd}:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
    return proc


class Venv:
    """A fresh venv and the installer that fills and empties it: ``pip`` (the venv's own),
    ``pip-project`` (this project's newer pip, run with ``--python``) or ``uv``."""

    def __init__(self, root: Path, installer: str) -> None:
        self.root, self.installer = root, installer
        if installer == "uv":
            require(UV.is_file(), "uv is not installed beside the test interpreter")
            _run(UV, "venv", "-q", "--python", sys.executable, root)
        else:
            _run(sys.executable, "-m", "venv", root)
        self.python = root / "bin" / "python"
        self.site = next(root.glob("lib/python*/site-packages"))
        self.baseline = sorted(os.listdir(self.site))

    def _pip(self) -> list[str | Path]:
        if self.installer == "uv":
            return [UV, "pip"]
        if self.installer == "pip-project":
            return [sys.executable, "-m", "pip", "--python", self.python]
        return [self.python, "-m", "pip"]

    def install(self, dist: Path, *requirements: str, reinstall: bool = False) -> None:
        args: list[str | Path] = [*self._pip(), "install", "-q", "--no-index", "--find-links", dist]
        if self.installer == "uv":
            args.insert(3, "--offline")
        else:
            args.insert(3, "--no-cache-dir")  # the rocm sdist is built from this dist
        if reinstall:
            args += ["--no-deps", "--reinstall" if self.installer == "uv" else "--force-reinstall"]
        _run(*args, *requirements, venv=self.root)

    def uninstall(self, names: Sequence[str]) -> None:
        yes = [] if self.installer == "uv" else ["-y"]
        _run(*self._pip(), "uninstall", "-q", *yes, *names, venv=self.root)

    def rocm_sdk(self, *args: str) -> subprocess.CompletedProcess[str]:
        return _run(self.python, "-m", "rocm_sdk", *args, venv=self.root)

    def leftovers(self) -> list[str]:
        """What is in site-packages beyond the baseline, with everything under it."""
        extra = sorted(set(os.listdir(self.site)) - set(self.baseline))
        out: list[str] = []
        for name in extra:
            top = self.site / name
            out.append(name)
            if top.is_dir() and not top.is_symlink():
                out += [str(p.relative_to(self.site)) for p in sorted(top.rglob("*"))][:20]
        return out


def dangling(tree: Path) -> list[str]:
    return sorted(str(p) for p in tree.rglob("*") if p.is_symlink() and not p.exists())


@pytest.fixture(scope="module")
def dist(sample_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_dist(sample_tree, tmp_path_factory.mktemp("out"))


@pytest.fixture(scope="module")
def kpack_dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require(shutil.which("hipcc") is not None, "hipcc is not installed")
    from sample_tree.make_sample_tree import make_sample_tree

    tree = tmp_path_factory.mktemp("kpack") / "artifacts"
    make_sample_tree(tree, cache_dir=None, family="gfx90a-dcgpu", kpack_split=True)
    return build_dist(tree, tmp_path_factory.mktemp("kpack-out"))


def _installed(dist: Path, root: Path, installer: str, requirement: str = ALL) -> Venv:
    venv = Venv(root, installer)
    venv.install(dist, requirement)
    check = subprocess.run(
        [venv.python, "-m", "rocm_sdk", "init", "--check"], capture_output=True, text=True
    )
    assert check.returncode == 1 and "rocm-sdk init" in check.stderr, check.stderr
    venv.rocm_sdk("init", "--quiet")
    assert venv.rocm_sdk("init", "--check").stdout.startswith(
        "rocm-sdk: the devel tree is expanded and complete at "
    )
    return venv


ORDERS: dict[str, list[Sequence[str]]] = {
    "pip-order": [PIP_ORDER],  # one command, as pip uninstall of the set runs
    "one-by-one": [[name] for name in PIP_ORDER],
    "devel-first": [["rocm-sdk-devel"], [n for n in PIP_ORDER if n != "rocm-sdk-devel"]],
    "reversed": [[name] for name in reversed(PIP_ORDER)],
}


@pytest.mark.parametrize("installer", ["pip", "pip-project", "uv"])
@pytest.mark.parametrize("order", sorted(ORDERS))
def test_uninstalling_the_set_leaves_nothing(
    dist: Path, tmp_path: Path, installer: str, order: str
) -> None:
    venv = _installed(dist, tmp_path / "venv", installer)
    devel = venv.site / "_rocm_sdk_devel"
    assert devel.is_dir() and dangling(devel) == []
    for names in ORDERS[order]:
        venv.uninstall(names)
        if devel.exists():  # a link whose target went is gone with it
            assert dangling(devel) == []
    assert venv.leftovers() == []


def test_device_links_and_uninstall_in_pip_order(kpack_dist: Path, tmp_path: Path) -> None:
    """A kpack set: the device wheel's files linked into the devel tree; removing the set in
    pip's order (the device wheel after core and devel) leaves nothing."""
    requirement = f"rocm[libraries,devel,profiler,device-gfx90a]=={VERSION}"
    venv = _installed(kpack_dist, tmp_path / "venv", "pip", requirement)
    devel = venv.site / "_rocm_sdk_devel"
    device_links = [p for p in devel.rglob("*.kpack") if p.is_symlink()]
    assert device_links, sorted(str(p) for p in devel.rglob("*"))[:50]
    order = ["rocm", "rocm-profiler", "rocm-sdk-core", "rocm-sdk-devel", "rocm-sdk-device-gfx90a",
             "rocm-sdk-libraries"]  # fmt: skip
    venv.uninstall(order)
    assert venv.leftovers() == []


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_links_go_with_their_package_and_come_back(
    dist: Path, tmp_path: Path, installer: str
) -> None:
    venv = _installed(dist, tmp_path / "venv", installer)
    devel = venv.site / "_rocm_sdk_devel"
    into_core = [
        p for p in devel.rglob("*") if p.is_symlink() and "_rocm_sdk_core" in os.readlink(p)
    ]
    assert into_core
    venv.uninstall(["rocm-sdk-core"])
    assert dangling(devel) == [] and not any(os.path.lexists(p) for p in into_core)
    assert (devel / "__init__.py").is_file()  # devel's own files stay

    venv.install(dist, f"rocm-sdk-core=={VERSION}")
    assert venv.rocm_sdk("path", "--root").stdout.strip() == str(devel)  # the fast path sees it
    assert all(p.is_symlink() and p.exists() for p in into_core)
    check = venv.rocm_sdk("init", "--check").stdout
    assert check.startswith("rocm-sdk: the devel tree is expanded")

    venv.install(dist, f"rocm-sdk-core=={VERSION}", reinstall=True)  # removes the old files' links
    venv.rocm_sdk("path", "--root")
    assert all(p.is_symlink() and p.exists() for p in into_core)
    venv.uninstall(PIP_ORDER)
    assert venv.leftovers() == []
