"""TheRock's rocm-kpack call sites in a venv holding only what TheRock's build venv holds.

TheRock's CMake runs our ``rocm_kpack`` tools with ``PYTHONPATH=<kpack>/python`` in its build
venv, made from its top-level ``requirements.txt`` (at the commit ``test_call_sites`` names).
Of the packages this project imports, that file lists pyelftools, zstandard, msgpack, PyYAML,
jinja2 and packaging; it has no ``deflate``, ``isal`` or ``rich`` (our optional
accelerators), and the rest of its list (build, meson, boto3, ...) brings none of them. The
venv here holds exactly those six, each at the lowest version TheRock's file allows, and is
cached (``<cache>/therock-venv/<key>``; made once with pip).

Every call site runs there and in the project's venv, on the same inputs: the same files come
out, byte for byte, but the ``.kpack`` archives, whose bytes depend on the libzstd inside
zstandard (TheRock allows ``zstandard>=0.19.0``, we pin 0.25.0): they hold the same code
objects under the same keys, and their bytes are equal exactly when both venvs' libzstd is.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from kpack.archive import KpackArchive
from sample_tree.debian_inputs import default_cache_dir
from tests.conftest import require
from tests.pypi_inputs import JAX_PLUGIN, pypi_wheel
from tests.rocm_kpack.test_call_sites import (
    CALL_SITES,
    THEROCK,
    Inputs,
    make_inputs,
    run,
    tree_digest,
)

#: The lines of TheRock's requirements.txt that name a package this project imports, at the
#: lowest version each allows (``pyelftools>=0.29``, ``zstandard>=0.19.0``, ``msgpack>=1.1.0``,
#: ``PyYAML==6.0.2``, ``jinja2>=3.0.0``, ``packaging==25.0``).
THEROCK_REQUIREMENTS = (
    "pyelftools==0.29",
    "zstandard==0.19.0",
    "msgpack==1.1.0",
    "PyYAML==6.0.2",
    "jinja2==3.0.0",
    "packaging==25.0",
)
#: Ours, which TheRock's venv does not have: the by-path tools must not need them.
ACCELERATORS = ("deflate", "isal", "rich")


def _make_venv(where: Path) -> None:
    """A venv at ``where`` with :data:`THEROCK_REQUIREMENTS`, made beside it and renamed into
    place when complete (only its ``bin/python`` is used, so the move does not matter)."""
    partial = where.with_name(f"{where.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    steps = [
        [sys.executable, "-m", "venv", str(partial)],
        [str(partial / "bin/python"), "-m", "pip", "install", "--disable-pip-version-check",
         "--no-input", "--only-binary=:all:", *THEROCK_REQUIREMENTS],
    ]  # fmt: skip
    for cmd in steps:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            require(False, f"cannot make TheRock's venv ({' '.join(cmd[:4])}): {proc.stderr}")
    partial.rename(where)


@pytest.fixture(scope="module")
def therock_python() -> str:
    """``bin/python`` of the cached venv with TheRock's requirements only."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    key = hashlib.sha256("\n".join((sys.executable, version, *THEROCK_REQUIREMENTS)).encode())
    where = default_cache_dir() / "therock-venv" / key.hexdigest()[:16]
    if not (where / "bin/python").exists():
        where.parent.mkdir(parents=True, exist_ok=True)
        _make_venv(where)
    return str(where / "bin/python")


@pytest.fixture(scope="module")
def inputs(
    tmp_path_factory: pytest.TempPathFactory, debian_package: Callable[[str], Path]
) -> Inputs:
    return make_inputs(tmp_path_factory, debian_package)


def libzstd(python: str) -> str:
    code = "import zstandard; print(zstandard.ZSTD_VERSION)"
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    return proc.stdout.strip()


def test_the_venv_is_theirs(therock_python: str, tmp_path: Path) -> None:
    """The premise: none of our accelerators imports there; TheRock's floor of zstandard
    bundles another libzstd than our pin."""
    for name in ACCELERATORS:
        proc = subprocess.run([therock_python, "-c", f"import {name}"], capture_output=True)
        assert proc.returncode == 1 and b"ModuleNotFoundError" in proc.stderr, name
    assert libzstd(therock_python) == "(1, 5, 2)"
    assert libzstd(sys.executable) == "(1, 5, 7)"


@pytest.mark.parametrize(
    "module",
    [
        "rocm_kpack.tools.split_artifacts",
        "rocm_kpack.tools.bulk_unbundle",
        "rocm_kpack.tools.recombine_artifacts",
    ],
)
def test_the_tools_answer_by_path_and_by_module(
    therock_python: str, module: str, tmp_path: Path
) -> None:
    path = Path(__file__).resolve().parents[2] / "python" / (module.replace(".", "/") + ".py")
    for argv in ([str(path), "--help"], ["-m", module, "--help"]):
        proc = run(argv, tmp_path, python=therock_python)
        assert proc.returncode == 0, f"{THEROCK}: {proc.stderr}"
        assert "usage:" in proc.stdout


def kernels(kpack: Path) -> dict[tuple[str, str], str]:
    with KpackArchive.open(kpack) as archive:
        keys = archive.keys()
        return {k: hashlib.sha256(archive.read(*k)).hexdigest() for k in keys}


@pytest.mark.real
@pytest.mark.compile
@pytest.mark.parametrize("name", list(CALL_SITES))
def test_call_site_in_therock_venv_gives_our_outputs(
    inputs: Inputs, therock_python: str, name: str
) -> None:
    site = CALL_SITES[name]
    site.prepare(inputs)
    base = inputs.work / "out" / name.replace(" ", "_").replace(",", "")
    ours, theirs = base.with_name(base.name + ".ours"), base.with_name(base.name + ".theirs")
    for out, python in ((ours, sys.executable), (theirs, therock_python)):
        proc = run(site.argv(inputs, out), inputs.work, python=python)
        assert proc.returncode == 0, f"{THEROCK} {site.where} ({python}): {proc.stderr}"
        assert "Traceback" not in proc.stderr
        site.check(out)
    want, got = tree_digest(ours), tree_digest(theirs)
    assert sorted(got) == sorted(want)
    differing = sorted(rel for rel in want if got[rel] != want[rel])
    for rel in differing:  # only archives, holding the same code objects
        assert rel.endswith(".kpack") and (ours / rel).is_file(), rel
        assert kernels(theirs / rel) == kernels(ours / rel), rel
    # archives compressed in each venv (the splits; the recombine copies the shards' archives
    # and bulk_unbundle writes raw code objects) differ exactly when their libzstd does
    compressed = "split" in name
    same_zstd = libzstd(therock_python) == libzstd(sys.executable)
    assert bool(differing) == (compressed and not same_zstd), differing


def test_the_wheel_splitter_there_names_the_missing_module(
    therock_python: str, tmp_path: Path
) -> None:
    """A wheel's bytes depend on libdeflate: without ``deflate`` the wheel splitter does not
    write wheels of other bytes, it says what to install, before any work, and writes
    nothing."""
    wheel = str(pypi_wheel(JAX_PLUGIN))
    out = str(tmp_path / "out")
    argv = ["-m", "rocm_kpack.tools.split_python_wheels", "--input", wheel,
            "--output-dir", out, "--device-package-prefix", "jax-device"]  # fmt: skip
    proc = run(argv, tmp_path, python=therock_python)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "error: writing a wheel needs the Python module 'deflate' (libdeflate: wheel bytes "
        "depend on it, zlib's would differ), which is not installed: pip install 'deflate==0.9.0'"
    ]
    assert list(tmp_path.iterdir()) == []
