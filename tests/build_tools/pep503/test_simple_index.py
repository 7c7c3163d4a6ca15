"""Tests for build_tools.pep503: pages (HTML and PEP 691 JSON), PEP 658/714 metadata files,
determinism, HTML5 validity, and pip and uv as the oracles.

pip runs with every configuration file and ``PIP_*`` variable removed and only our index
(``file://`` or a server on 127.0.0.1), so nothing can come from anywhere else; uv likewise.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import html5lib  # type: ignore[import-untyped]
import pytest

from build_tools.pep503 import (
    render_root,
    scan_dist_dir,
    write_simple_index,
)
from kpack.errors import PackagingError
from kpack.wheelfile import Member, write_wheel
from kpack.wheelfile._sdist import write_sdist
from tests.build_tools.conftest import VERSION, build_dist
from tests.build_tools.pep503.index_server import serve_index
from tests.conftest import require

EPOCH = 1_700_000_000
LIB_WHEEL = "tiny_lib-1.0-py3-none-any.whl"
LIB2_WHEEL = "tiny_lib-2.0-py3-none-any.whl"
TOP_WHEEL = "tiny_top-1.0-py3-none-any.whl"
APP_SDIST = "tiny_app-1.0.tar.gz"


def _metadata(name: str, *extra: str, version: str = "1.0") -> bytes:
    return "\n".join(
        ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", *extra, ""]
    ).encode()


def _wheel(dest: Path, name: str, version: str, *extra: str) -> None:
    module = name.replace("-", "_")
    write_wheel(
        dest,
        dist_name=name,
        version=version,
        tag="py3-none-any",
        members=[Member(f"{module}/__init__.py", b"VALUE = 42\n" + b"#" * 50_000 + b"\n")],
        metadata=_metadata(name, *extra, version=version),
        epoch=EPOCH,
        jobs=1,
    )


def make_dist(dest: Path) -> Path:
    """Wheels ``tiny-lib`` 1.0 (Python >= 3.8) and 2.0 (Python >= 4: never for us),
    ``tiny-top`` (depending on ``tiny-lib``), and an sdist (``Tiny.App``, depending on
    ``tiny-lib``) in ``dest``."""
    dest.mkdir(parents=True)
    _wheel(dest, "tiny-lib", "1.0", "Requires-Python: >=3.8")
    _wheel(dest, "tiny-lib", "2.0", "Requires-Python: >=4")
    _wheel(dest, "tiny-top", "1.0", "Requires-Python: >=3.8", "Requires-Dist: tiny-lib>=1")
    setup = (
        b"from setuptools import setup\n"
        b"setup(name='Tiny.App', version='1.0', py_modules=['tiny_app'],\n"
        b"      install_requires=['tiny-lib==1.0'])\n"
    )
    write_sdist(
        dest,
        dist_name="Tiny.App",
        version="1.0",
        files=[Member("setup.py", setup), Member("tiny_app.py", b"from tiny_lib import VALUE\n")],
        pkg_info=_metadata("Tiny.App", "Requires-Python: <4,>=3.8", "Requires-Dist: tiny-lib==1.0"),
        epoch=EPOCH,
    )
    (dest / "report.json").write_text("{}")  # not an archive: not indexed
    return dest


def pip(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env |= {"PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pip", "--no-cache-dir", "--isolated", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=300,
    )


@pytest.fixture
def index(tmp_path: Path) -> Path:
    dist = make_dist(tmp_path / "dist")
    write_simple_index(dist, tmp_path / "index")
    return tmp_path / "index"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_layout_and_pages(index: Path) -> None:
    assert sorted(p.relative_to(index).as_posix() for p in index.rglob("*")) == sorted(
        [
            "index.html",
            "index.json",
            "tiny-app",
            f"tiny-app/{APP_SDIST}",
            "tiny-app/index.html",
            "tiny-app/index.json",
            "tiny-lib",
            "tiny-lib/index.html",
            "tiny-lib/index.json",
            f"tiny-lib/{LIB_WHEEL}",
            f"tiny-lib/{LIB_WHEEL}.metadata",
            f"tiny-lib/{LIB2_WHEEL}",
            f"tiny-lib/{LIB2_WHEEL}.metadata",
            "tiny-top",
            "tiny-top/index.html",
            "tiny-top/index.json",
            f"tiny-top/{TOP_WHEEL}",
            f"tiny-top/{TOP_WHEEL}.metadata",
        ]
    )
    root = (index / "index.html").read_text()
    assert '<a href="tiny-app/">tiny-app</a>' in root and '<a href="tiny-lib/">' in root
    lib = index / "tiny-lib"
    with zipfile.ZipFile(lib / LIB_WHEEL) as wheel:  # PEP 658: the wheel's METADATA, verbatim
        assert (lib / f"{LIB_WHEEL}.metadata").read_bytes() == wheel.read(
            "tiny_lib-1.0.dist-info/METADATA"
        )
    meta = _sha256(lib / f"{LIB_WHEEL}.metadata")
    page = (lib / "index.html").read_text()
    assert (
        f'<a href="{LIB_WHEEL}#sha256={_sha256(lib / LIB_WHEEL)}" '
        f'data-requires-python="&gt;=3.8" data-dist-info-metadata="sha256={meta}" '
        f'data-core-metadata="sha256={meta}">{LIB_WHEEL}</a>'
    ) in page
    app = (index / "tiny-app" / "index.html").read_text()  # an sdist: no metadata file
    assert f'data-requires-python="&lt;4,&gt;=3.8">{APP_SDIST}</a>' in app
    assert "data-core-metadata" not in app


def test_json_pages(index: Path) -> None:
    """PEP 691 (api-version 1.1, PEP 700): the same files, hashes and metadata as the HTML."""
    root = json.loads((index / "index.json").read_text())
    assert root == {
        "meta": {"api-version": "1.1"},
        "projects": [{"name": "tiny-app"}, {"name": "tiny-lib"}, {"name": "tiny-top"}],
    }
    lib = index / "tiny-lib"
    page = json.loads((lib / "index.json").read_text())
    assert page["meta"] == {"api-version": "1.1"} and page["name"] == "tiny-lib"
    assert page["versions"] == ["1.0", "2.0"]
    first = page["files"][0]
    meta = {"sha256": _sha256(lib / f"{LIB_WHEEL}.metadata")}
    assert first == {
        "filename": LIB_WHEEL,
        "url": LIB_WHEEL,
        "hashes": {"sha256": _sha256(lib / LIB_WHEEL)},
        "size": (lib / LIB_WHEEL).stat().st_size,
        "requires-python": ">=3.8",
        "core-metadata": meta,
        "dist-info-metadata": meta,
    }
    assert page["files"][1]["requires-python"] == ">=4"
    app = json.loads((index / "tiny-app" / "index.json").read_text())["files"][0]
    assert "core-metadata" not in app and app["requires-python"] == "<4,>=3.8"


def test_pages_are_valid_html5(index: Path) -> None:
    parser = html5lib.HTMLParser(strict=True)
    for page in sorted(index.rglob("index.html")):
        parser.parse(page.read_bytes())  # raises ParseError on any HTML5 parse error
    with pytest.raises(html5lib.html5parser.ParseError):
        parser.parse(b"<html><body><a href=x>y</body></html>")


def test_deterministic(tmp_path: Path, index: Path) -> None:
    dist = make_dist(tmp_path / "dist2")
    second = write_simple_index(dist, tmp_path / "index2")
    for page in index.rglob("*"):
        twin = tmp_path / "index2" / page.relative_to(index)
        assert twin.is_dir() if page.is_dir() else twin.read_bytes() == page.read_bytes()
    assert render_root(second) == render_root(scan_dist_dir(dist))
    given = scan_dist_dir(dist, digests={LIB_WHEEL: "0" * 64})  # the caller's hash is used
    assert [f.sha256 for p in given.projects for f in p.files][1] == "0" * 64
    assert [f.sha256 for p in given.projects for f in p.files][2] != "0" * 64


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every entry under ``root`` (a directory: None), symlinks not followed."""
    return {
        str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
        for p in sorted(root.rglob("*"))
    }


def test_a_rerun_replaces_its_own_files_and_leaves_the_rest(tmp_path: Path) -> None:
    """One output-directory rule (issue 22): a re-run writes the same bytes, a file it did
    not write stays, and one of its files that is gone from the dist goes from the index."""
    dist = make_dist(tmp_path / "dist")
    index = tmp_path / "index"
    write_simple_index(dist, index)
    first = _tree(tmp_path)
    assert first.pop(".assemble-shards.index.json")  # the record, beside the index
    (index / "keep").write_text("x")
    (index / "tiny-lib" / "notes.txt").write_text("mine")
    write_simple_index(dist, index)
    again = _tree(tmp_path)
    assert again.pop(".assemble-shards.index.json")
    assert again == {**first, "index/keep": b"x", "index/tiny-lib/notes.txt": b"mine"}
    (dist / TOP_WHEEL).unlink()
    write_simple_index(dist, index)
    assert not (index / "tiny-top").exists()  # emptied: its directory goes too
    assert (index / "keep").read_text() == "x" and (index / "tiny-lib" / "notes.txt").exists()
    assert "tiny-top" not in (index / "index.html").read_text()


def test_a_file_it_did_not_write_is_replaced_only_with_force(tmp_path: Path) -> None:
    dist = make_dist(tmp_path / "dist")
    index = tmp_path / "index"
    write_simple_index(dist, index)
    fresh = _tree(index)
    page = index / "tiny-lib" / "index.html"
    page.write_text("edited by hand")  # changed since: no longer ours
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (index / "index.json").unlink()
    (index / "index.json").symlink_to(victim)  # never followed, never replaced without force
    before = _tree(tmp_path)
    with pytest.raises(PackagingError) as info:
        write_simple_index(dist, index)
    assert info.value.message == (
        "cannot publish: 2 in the way, changed since assemble-shards wrote them (see --force)"
    )
    problems = sorted(info.value.problems)
    assert [p.split(" (")[0] for p in problems] == [
        "index/index.json: changed since this tool wrote it",  # now a symlink
        "index/tiny-lib/index.html: changed since this tool wrote it",
    ]
    assert _tree(tmp_path) == before
    write_simple_index(dist, index, force=True)
    assert _tree(index) == fresh and victim.read_text() == "precious"


def test_a_long_list_in_the_way_is_shown_short(tmp_path: Path) -> None:
    dist = make_dist(tmp_path / "dist")
    index = tmp_path / "index"
    index.mkdir()
    for name in ("tiny-lib", "tiny-top", "tiny-app"):
        (index / name).mkdir()
        (index / name / "index.html").write_text("someone else's")
        (index / name / "index.json").write_text("someone else's")
    with pytest.raises(PackagingError) as info:
        write_simple_index(dist, index)
    assert info.value.problems[-1] == "... and 1 more" and len(info.value.problems) == 6
    assert "6 in the way" in info.value.message


def test_bad_names_write_nothing(tmp_path: Path) -> None:
    dist = make_dist(tmp_path / "dist")
    (dist / "broken.whl").write_bytes(b"")
    with pytest.raises(PackagingError, match=r"broken\.whl"):
        write_simple_index(dist, tmp_path / "fresh" / "index")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dist"]


@pytest.mark.slow
def test_pip_install_and_download(tmp_path: Path, index: Path) -> None:
    url = index.as_uri()
    target = tmp_path / "site"
    proc = pip(
        "install", "--index-url", url, "--no-build-isolation", "--target", str(target), "tiny-app"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (target / "tiny_lib" / "__init__.py").read_text().startswith("VALUE = 42\n")
    assert (target / "tiny_app.py").exists()
    download = ("download", "--index-url", url, "--no-deps", "-d", str(tmp_path / "dl"))
    proc = pip(*download, "TINY_lib", "tiny.app", "--no-build-isolation")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in (tmp_path / "dl").iterdir()) == [APP_SDIST, LIB_WHEEL]


@pytest.mark.slow
def test_pip_checks_the_hash(tmp_path: Path, index: Path) -> None:
    wheel = index / "tiny-lib" / LIB_WHEEL
    data = wheel.read_bytes()
    wheel.unlink()  # break the hard link before tampering
    wheel.write_bytes(data + b"\0")
    download = ("download", "--index-url", index.as_uri(), "--no-deps", "-d", str(tmp_path))
    proc = pip(*download, "tiny-lib")
    assert proc.returncode != 0
    assert f"Expected sha256 {hashlib.sha256(data).hexdigest()}" in proc.stdout + proc.stderr


def _resolver_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    return env | {
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "UV_NO_CONFIG": "1",
        "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
        "UV_PYTHON_DOWNLOADS": "never",
    }


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, env=env, check=False, timeout=300)


def _no_wheel_fetched(files: list[str]) -> None:
    wheels = [name for name in files if name.endswith(".whl")]
    assert not wheels, f"a resolver downloaded wheels: {wheels}"


@pytest.mark.slow
def test_pip_dry_run_resolves_from_metadata_files(tmp_path: Path, index: Path) -> None:
    """pip reads the ``.metadata`` files and skips 2.0 by ``data-requires-python``: the
    report names tiny-top 1.0 and tiny-lib 1.0, and no wheel crossed the wire."""
    report = tmp_path / "report.json"
    with serve_index(index) as served:
        argv = [sys.executable, "-m", "pip", "--no-cache-dir", "--isolated", "install"]
        argv += ["--dry-run", "--ignore-installed", "--index-url", served.url]
        proc = _run([*argv, "--report", str(report), "tiny-top"], _resolver_env(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = {
        i["metadata"]["name"]: i["metadata"]["version"]
        for i in json.loads(report.read_text())["install"]
    }
    assert got == {"tiny-top": "1.0", "tiny-lib": "1.0"}
    _no_wheel_fetched(served.files())
    assert served.bytes_for(".metadata") > 0
    assert f"{LIB2_WHEEL}.metadata" not in served.files()  # Requires-Python >= 4


@pytest.mark.slow
def test_uv_compile_resolves_from_json_and_metadata_files(tmp_path: Path, index: Path) -> None:
    """uv asks for PEP 691 JSON, gets it, and resolves from the ``.metadata`` files."""
    uv = Path(sys.executable).with_name("uv")
    assert uv.is_file(), f"{uv} missing (the test extra installs uv)"
    (tmp_path / "req.in").write_text("tiny-top\n")
    with serve_index(index) as served:
        argv = [str(uv), "pip", "compile", str(tmp_path / "req.in"), "--index-url", served.url]
        argv += ["--python", sys.executable, "--no-header", "--no-annotate", "--no-cache"]
        proc = _run(argv, _resolver_env(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.split() == ["tiny-lib==1.0", "tiny-top==1.0"]
    _no_wheel_fetched(served.files())
    assert served.bytes_for(".metadata") > 0
    assert served.bytes_for(".json") > 0 and served.bytes_for(".html") == 0, served.requests


@pytest.mark.real
@pytest.mark.compile
@pytest.mark.slow
def test_resolvers_fetch_no_wheel_of_a_real_rocm_set(tmp_path: Path) -> None:
    """The kpack-split set of the real sample tree: pip and uv resolve
    ``rocm[libraries,device-gfx90a]`` from our index by fetching pages, metadata files and the
    small ``rocm`` sdist (which they build here, as its dependencies depend on the GPU)."""
    from sample_tree.make_sample_tree import make_sample_tree

    require(shutil.which("hipcc") is not None, "hipcc is not installed")
    tree = make_sample_tree(
        tmp_path / "artifacts", cache_dir=None, family="gfx90a-dcgpu", kpack_split=True
    )
    dist = build_dist(tree, tmp_path / "out")
    write_simple_index(dist, tmp_path / "index")
    env = _resolver_env(tmp_path) | {"ROCM_SDK_TARGET_FAMILY": "gfx90a"}
    want = f"rocm[libraries,device-gfx90a]=={VERSION}"
    expected = {"rocm", "rocm-sdk-core", "rocm-sdk-libraries", "rocm-sdk-device-gfx90a"}
    uv = str(Path(sys.executable).with_name("uv"))
    (tmp_path / "req.in").write_text(want + "\n")
    with serve_index(tmp_path / "index") as served:
        argv = [sys.executable, "-m", "pip", "--no-cache-dir", "--isolated", "install"]
        argv += ["--dry-run", "--ignore-installed", "--index-url", served.url, "--quiet"]
        report = tmp_path / "report.json"
        proc = _run([*argv, "--report", str(report), want], env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        got = {i["metadata"]["name"] for i in json.loads(report.read_text())["install"]}
        assert got == expected
        argv = [uv, "pip", "compile", str(tmp_path / "req.in"), "--index-url", served.url]
        argv += ["--python", sys.executable, "--no-header", "--no-annotate", "--no-cache"]
        proc = _run(argv, env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert {line.split("==")[0] for line in proc.stdout.split()} == expected
    _no_wheel_fetched(served.files())
    wheels = sum(p.stat().st_size for p in dist.glob("*.whl"))
    fetched = sum(size for _, _, size in served.requests)
    assert fetched < wheels // 100, (fetched, wheels)
