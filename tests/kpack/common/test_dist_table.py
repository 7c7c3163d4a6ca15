"""Lists of distributions within 80 columns (kpack.common.dist_table): the longest names a
release holds, read back from the drawn table into the very file names."""

from __future__ import annotations

import io

import pytest

from kpack.common.dist_table import Listed, dist_table
from kpack.common.tables import print_tables
from tests.dist_listing import read_listing

VERSION = "7.10.0a20251031"
PROJECTS = (
    "rocm_sdk_core",
    "rocm_sdk_libraries_gfx94x_dcgpu",
    "rocm_sdk_device_gfx1250_strict",
    "rocm_sdk_device_gfx11_generic",
    "rocm_sdk_device_gfx12_5_generic",
    "gfx110X-all/rocm_sdk_devel",  # a multi-family legacy dist/: a directory per family
)


def _names(tag: str) -> list[str]:
    return [f"{p}-{VERSION}-py3-none-{tag}.whl" for p in PROJECTS] + [
        f"rocm-{VERSION}.tar.gz",
        f"gfx110X-all/rocm-{VERSION}.tar.gz",
    ]


def _drawn(
    files: list[Listed],
    monkeypatch: pytest.MonkeyPatch,
    *,
    title: str = "Packages written",
    subject: str | None = None,
) -> str:
    monkeypatch.setenv("COLUMNS", "80")
    header = ("files", "size")
    numeric = frozenset({0, 1})
    table = dist_table(title=title, files=files, header=header, numeric=numeric, subject=subject)
    out = io.StringIO()
    print_tables([table], stream=out)
    return out.getvalue()


@pytest.mark.parametrize("tag", ["manylinux_2_28_x86_64", "win_amd64", "linux_x86_64"])
def test_the_longest_names_fit_and_read_back(tag: str, monkeypatch: pytest.MonkeyPatch) -> None:
    names = _names(tag)
    files = [Listed(path=n, cells=(str(i), f"{i}.5 MB")) for i, n in enumerate(names)]
    text = _drawn(files, monkeypatch)
    listing = read_listing(text)  # every line within 80 columns, one line per row
    assert listing.title == f"Packages written: version {VERSION}, tag py3-none-{tag}"
    assert listing.header == ("package", "files", "size")
    assert sorted(listing.rows) == sorted(names)  # each file named, none lost
    assert all(listing.rows[n] == (str(i), f"{i}.5 MB") for i, n in enumerate(names))
    assert "rocm-sdk-device-gfx1250-strict  " in text and "rocm (sdist)" in text
    assert "gfx110X-all/rocm-sdk-devel" in text


@pytest.mark.parametrize(
    "odd",
    [
        "rocm_sdk_core-7.10.0-py3-none-linux_x86_64.whl",  # another version
        f"rocm_sdk_core-{VERSION}-cp312-cp312-linux_x86_64.whl",  # another tag
        f"rocm_sdk_core-{VERSION}-1-py3-none-linux_x86_64.whl",  # a build tag
        f"PyYAML-{VERSION}-py3-none-linux_x86_64.whl",  # a name not normalized
        "notes.txt",
    ],
)
def test_names_that_share_nothing_are_shown_whole(
    odd: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without one version and tag to state once, each row names its file as it is (a
    long name folds inside its column, never past the width)."""
    names = [f"rocm_sdk_libraries-{VERSION}-py3-none-linux_x86_64.whl", odd]
    text = _drawn([Listed(path=n, cells=("1", "2 B")) for n in names], monkeypatch)
    lines = text.splitlines()
    assert lines[0] == "Packages written" and "version" not in text
    assert all(len(line) <= 80 for line in lines)
    assert lines[2].split()[0] == "file"
    flat = "".join(text.split())
    assert all(n in flat for n in names)


def test_a_subject_in_the_title_is_shortened_like_the_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tag = "cp311-cp311-manylinux_2_28_x86_64"
    split = [Listed(path=f"torch_device_gfx942-2.9.0-{tag}.whl", cells=("1", "2 B"))]
    same = f"torch-2.9.0-{tag}.whl"
    text = _drawn(split, monkeypatch, title="Split {subject}", subject=same)
    assert read_listing(text).title == f"Split torch: version 2.9.0, tag {tag}"
    other = f"torch-2.9.0+rocm7.1-{tag}.whl"  # finalized: the outputs' version differs
    text = _drawn(split, monkeypatch, title="Split {subject}", subject=other)
    assert read_listing(text).title == f"Split {other}: version 2.9.0, tag {tag}"
