"""Tests for build_tools.pep503: pages, determinism, HTML5 validity, and pip as the oracle.

pip runs with every configuration file and ``PIP_*`` variable removed and only our
``file://`` index, so nothing can come from anywhere else.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import html5lib  # type: ignore[import-untyped]
import pytest

from build_tools.pep503 import render_root, scan_dist_dir, write_simple_index
from kpack.errors import PackagingError
from kpack.wheelfile import Member, write_wheel
from kpack.wheelfile._sdist import write_sdist

EPOCH = 1_700_000_000
LIB_WHEEL = "tiny_lib-1.0-py3-none-any.whl"
APP_SDIST = "tiny_app-1.0.tar.gz"


def _metadata(name: str, *extra: str) -> bytes:
    return "\n".join(
        ["Metadata-Version: 2.1", f"Name: {name}", "Version: 1.0", *extra, ""]
    ).encode()


def make_dist(dest: Path) -> Path:
    """A wheel (``tiny-lib``) and an sdist (``Tiny.App``, depending on it) in ``dest``."""
    dest.mkdir(parents=True)
    write_wheel(
        dest,
        dist_name="tiny-lib",
        version="1.0",
        tag="py3-none-any",
        members=[Member("tiny_lib/__init__.py", b"VALUE = 42\n")],
        metadata=_metadata("tiny-lib"),
        epoch=EPOCH,
        jobs=1,
    )
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
        pkg_info=_metadata("Tiny.App", "Requires-Dist: tiny-lib==1.0"),
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


def test_layout_and_pages(index: Path) -> None:
    assert sorted(p.relative_to(index).as_posix() for p in index.rglob("*")) == [
        "index.html",
        "tiny-app",
        "tiny-app/index.html",
        f"tiny-app/{APP_SDIST}",
        "tiny-lib",
        "tiny-lib/index.html",
        f"tiny-lib/{LIB_WHEEL}",
    ]
    root = (index / "index.html").read_text()
    assert '<a href="tiny-app/">tiny-app</a>' in root and '<a href="tiny-lib/">' in root
    digest = hashlib.sha256((index / "tiny-lib" / LIB_WHEEL).read_bytes()).hexdigest()
    page = (index / "tiny-lib" / "index.html").read_text()
    assert f'<a href="{LIB_WHEEL}#sha256={digest}">{LIB_WHEEL}</a>' in page


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


def test_refuses_non_empty_destination_and_bad_names(tmp_path: Path) -> None:
    dist = make_dist(tmp_path / "dist")
    (tmp_path / "index").mkdir()
    (tmp_path / "index" / "keep").write_text("x")
    with pytest.raises(PackagingError, match="not empty"):
        write_simple_index(dist, tmp_path / "index")
    (dist / "broken.whl").write_bytes(b"")
    with pytest.raises(PackagingError, match=r"broken\.whl"):
        write_simple_index(dist, tmp_path / "fresh")
    assert not (tmp_path / "fresh").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dist", "index"]


@pytest.mark.slow
def test_pip_install_and_download(tmp_path: Path, index: Path) -> None:
    url = index.as_uri()
    target = tmp_path / "site"
    proc = pip(
        "install", "--index-url", url, "--no-build-isolation", "--target", str(target), "tiny-app"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (target / "tiny_lib" / "__init__.py").read_text() == "VALUE = 42\n"
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
