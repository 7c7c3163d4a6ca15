"""A legacy set's resolve-without-download index, as a kpack set's: ``build-python-packages
--index`` on the real legacy sample tree, one family and two. pip resolves ``rocm`` from the
pages, the PEP 658 metadata files and the small ``rocm`` sdist, and fetches no wheel; a
two-family set has one repository per family (``index/<family>/``, the shared wheels and
that family's sdist and devel wheel, as TheRock's per-family indexes), each resolving its
own family's wheels. assemble-shards indexes the one-family set as the builder does."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

import pytest

from build_tools.assemble_shards import main as assemble
from build_tools.build_python_packages import main as build
from tests.build_tools.conftest import VERSION
from tests.build_tools.pep503.index_server import serve_index
from tests.build_tools.pep503.test_simple_index import _no_wheel_fetched, _resolver_env, _run
from tests.conftest import require

pytestmark = [pytest.mark.real, pytest.mark.compile, pytest.mark.slow]

WANT = f"rocm[libraries,devel]=={VERSION}"


def _build(tree: Path, dest: Path, index: Path) -> Path:
    argv = ["--artifact-dir", str(tree), "--dest-dir", str(dest), "--version", VERSION]
    assert build([*argv, "--index", str(index), "-q"]) == 0
    return dest / "dist"


def _resolve(index: Path, tmp: Path) -> dict[str, str]:
    """pip's dry-run install of :data:`WANT` from ``index`` served over HTTP: project ->
    sha256 of the file it chose; no wheel fetched."""
    report = tmp / "pip-report.json"
    with serve_index(index) as served:
        argv = [sys.executable, "-m", "pip", "--no-cache-dir", "--isolated", "install"]
        argv += ["--dry-run", "--ignore-installed", "--index-url", served.url, "--quiet"]
        proc = _run([*argv, "--report", str(report), WANT], _resolver_env(tmp))
        assert proc.returncode == 0, proc.stdout + proc.stderr
    _no_wheel_fetched(served.files())
    assert served.bytes_for(".metadata") > 0
    return {
        i["metadata"]["name"].lower(): i["download_info"]["archive_info"]["hashes"]["sha256"]
        for i in json.loads(report.read_text())["install"]
    }


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_one_family_legacy_set(sample_tree: Path, tmp_path: Path) -> None:
    dist = _build(sample_tree, tmp_path / "out", tmp_path / "index")
    got = _resolve(tmp_path / "index", tmp_path)
    wanted = {
        "rocm": f"rocm-{VERSION}.tar.gz",
        "rocm-sdk-core": f"rocm_sdk_core-{VERSION}-py3-none-linux_x86_64.whl",
        "rocm-sdk-devel": f"rocm_sdk_devel-{VERSION}-py3-none-linux_x86_64.whl",
        "rocm-sdk-libraries-gfx90a-dcgpu": (
            f"rocm_sdk_libraries_gfx90a_dcgpu-{VERSION}-py3-none-linux_x86_64.whl"
        ),
    }
    assert got == {project: _sha256(dist / name) for project, name in wanted.items()}
    # assemble-shards gives the same index of the same set
    argv = ["--input", str(dist), "--dest-dir", str(tmp_path / "asm")]
    assert assemble([*argv, "--index", str(tmp_path / "asm-index"), "-q"]) == 0
    pages = sorted(p.relative_to(tmp_path / "index") for p in (tmp_path / "index").rglob("*"))
    assert pages == sorted(
        p.relative_to(tmp_path / "asm-index") for p in (tmp_path / "asm-index").rglob("*")
    )
    for rel in pages:
        if (tmp_path / "index" / rel).is_file():
            assert (tmp_path / "index" / rel).read_bytes() == (
                tmp_path / "asm-index" / rel
            ).read_bytes(), rel


def test_a_two_family_legacy_set_has_an_index_per_family(sample_tree: Path, tmp_path: Path) -> None:
    from sample_tree.make_sample_tree import make_sample_tree

    require(shutil.which("hipcc") is not None, "hipcc is not installed")
    other = make_sample_tree(tmp_path / "other", family="gfx110X-all", kpack_split=False)
    tree = tmp_path / "artifacts"
    shutil.copytree(sample_tree, tree, symlinks=True)
    for artifact in other.glob("*_gfx110X-all"):
        shutil.copytree(artifact, tree / artifact.name, symlinks=True)
    dist = _build(tree, tmp_path / "out", tmp_path / "index")
    families = ["gfx110X-all", "gfx90a-dcgpu"]
    assert sorted(p.name for p in dist.iterdir() if p.is_dir()) == families
    assert sorted(p.name for p in (tmp_path / "index").iterdir()) == families
    for family in families:
        got = _resolve(tmp_path / "index" / family, tmp_path)
        lib = family.lower().replace("-", "_")
        assert got == {
            "rocm": _sha256(dist / family / f"rocm-{VERSION}.tar.gz"),
            "rocm-sdk-core": _sha256(dist / f"rocm_sdk_core-{VERSION}-py3-none-linux_x86_64.whl"),
            "rocm-sdk-devel": _sha256(
                dist / family / f"rocm_sdk_devel-{VERSION}-py3-none-linux_x86_64.whl"
            ),
            f"rocm-sdk-libraries-{family.lower()}": _sha256(
                dist / f"rocm_sdk_libraries_{lib}-{VERSION}-py3-none-linux_x86_64.whl"
            ),
        }, family
