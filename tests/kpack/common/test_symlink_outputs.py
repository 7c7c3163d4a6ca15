"""No symlink is opened for writing: a symlink planted where an output goes (by an earlier run
or another user) is replaced or refused, never written through; the file it points to stays
as it was, and a refusal is one ``error:`` line."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from kpack.archive import KernelInput, write_kpack
from kpack.cli import main
from kpack.common.safepath import Root, open_new
from kpack.elf import plan_rpath_edit
from kpack.errors import PackagingError, UnsafePathError
from kpack.wheelfile import Member, write_wheel
from tests.kpack.wheel_fixtures import make_plain_wheel
from tests.progress_lines import without_progress

SPLIT_WHEEL = ["split-wheel", "--overlay-root", "torch/", "--device-package-prefix", "amd-torch"]
KERNELS = [KernelInput("lib/a.so#0", "gfx942", b"\x7fELF" + bytes(64))]


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file elsewhere on the machine that a planted symlink points at."""
    target = tmp_path / "elsewhere" / "precious"
    target.parent.mkdir()
    target.write_bytes(b"precious\n")
    return target


def _untouched(outside: Path) -> None:
    assert outside.read_bytes() == b"precious\n"
    assert sorted(p.name for p in outside.parent.iterdir()) == ["precious"]


def _one_error(capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    err = capsys.readouterr().err
    lines = without_progress(err)
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for needle in needles:
        assert needle in lines[0], err
    return lines[0]


# --- the helper ------------------------------------------------------------------------------


@pytest.mark.parametrize("dangling", [False, True])
def test_open_new_never_opens_what_is_there(tmp_path: Path, outside: Path, dangling: bool) -> None:
    link = tmp_path / "out.bin"
    link.symlink_to(outside.parent / "missing" if dangling else outside)
    with pytest.raises(FileExistsError):
        open_new(link)
    _untouched(outside)
    with open_new(tmp_path / "new.bin", mode=0o600) as f:
        f.write(b"x")
    assert (tmp_path / "new.bin").read_bytes() == b"x"
    assert (tmp_path / "new.bin").stat().st_mode & 0o777 == 0o600


def test_root_open_write_refuses_a_planted_symlink(tmp_path: Path, outside: Path) -> None:
    root = Root(tmp_path / "out")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "a.co").symlink_to(outside)
    with pytest.raises(UnsafePathError, match=r"a\.co already exists"):
        root.write_bytes("a.co", b"evil")
    _untouched(outside)


# --- library writers: a temporary sibling, renamed over the name ----------------------------


def test_writers_replace_a_planted_symlink_and_never_follow_it(
    tmp_path: Path, outside: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    kpack = out / "a.kpack"
    kpack.symlink_to(outside)
    write_kpack(kpack, KERNELS, group_name="a", gfx_arch_family="gfx942")
    wheel = out / "torch-2.9.0-py3-none-linux_x86_64.whl"
    wheel.symlink_to(outside)
    members = [Member("torch/x.py", b"")]
    metadata = b"Metadata-Version: 2.1\nName: torch\nVersion: 2.9.0\n"
    tag = "py3-none-linux_x86_64"
    write_wheel(
        out, dist_name="torch", version="2.9.0", tag=tag, members=members, metadata=metadata
    )
    src = tmp_path / "true"
    shutil.copy(shutil.which("true") or "/bin/true", src)
    edit = plan_rpath_edit(src, ["$ORIGIN/../lib"])
    assert edit is not None
    elf = out / "true"
    elf.symlink_to(outside)
    edit.write_to(elf)
    for path in (kpack, wheel, elf):
        assert path.is_file() and not path.is_symlink()
    _untouched(outside)


# --- kpack subcommands -----------------------------------------------------------------------


def test_extract_to_a_symlink_is_refused(
    tmp_path: Path, outside: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = tmp_path / "a.kpack"
    write_kpack(archive, KERNELS, group_name="a", gfx_arch_family="gfx942")
    out = tmp_path / "out"
    out.symlink_to(outside.parent)
    assert main(["extract", str(archive), "-o", str(out)]) == 2  # a usage error
    _one_error(capsys, str(out), "output is a symlink")
    _untouched(outside)


def _artifact(tmp_path: Path) -> Path:
    art = tmp_path / "blas_lib_generic"
    (art / "s" / "lib").mkdir(parents=True)
    (art / "s" / "lib" / "notes.txt").write_text("notes\n")
    (art / "artifact_manifest.txt").write_text("s\n")
    return art


def test_split_artifacts_over_a_planted_symlink(
    tmp_path: Path, outside: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An output dir that is a symlink is taken, as any existing one (an error); with
    --force it is replaced by the new dir, the directory it pointed to left as it was."""
    art = _artifact(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "blas_lib_generic").symlink_to(outside.parent)
    argv = ["split-artifacts", "--artifact-dir", str(art), "--output-dir", str(out)]
    assert main(argv) == 1
    _one_error(capsys, "in the way, not written by kpack split", "blas_lib_generic")
    _untouched(outside)
    assert main([*argv, "--force"]) == 0
    published = out / "blas_lib_generic"
    assert published.is_dir() and not published.is_symlink()
    assert (published / "s" / "lib" / "notes.txt").read_text() == "notes\n"
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "blas_lib_generic"
    ]  # beside the split's own record
    _untouched(outside)


@pytest.mark.parametrize(
    "planted",
    [
        "out/torch-2.9.0-py3-none-linux_x86_64.whl",
        "out-split-reports/torch-2.9.0-split-report.json",
    ],
)
def test_split_wheel_over_a_planted_symlink(
    tmp_path: Path, outside: Path, capsys: pytest.CaptureFixture[str], planted: str
) -> None:
    """A wheel or a report (beside the output dir) planted as a symlink is not ours: an error."""
    wheel = make_plain_wheel(tmp_path / "in")
    out = tmp_path / "out"
    link = tmp_path / planted
    link.parent.mkdir()
    link.symlink_to(outside)
    argv = [*SPLIT_WHEEL, "--input", str(wheel), "--output-dir", str(out)]
    assert main(argv) == 1
    _one_error(capsys, "in the way, not written by kpack split-wheel", link.name)
    _untouched(outside)
    # a dangling one (its target missing) is not ours either; --force replaces the link
    # itself, and the target is never created
    link.unlink()
    link.symlink_to(outside.parent / "created")
    assert main(argv) == 1
    assert main([*argv, "--force"]) == 0
    assert link.is_file() and not link.is_symlink()
    assert not (outside.parent / "created").exists()
    _untouched(outside)


def test_make_sample_tree_refuses_a_symlinked_output(tmp_path: Path, outside: Path) -> None:
    from sample_tree.make_sample_tree import make_sample_tree

    out = tmp_path / "tree"
    out.symlink_to(outside.parent)
    with pytest.raises(PackagingError, match="tree: a symlink not written by this tool"):
        make_sample_tree(out, cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists() and os.readlink(out) == str(outside.parent)
    _untouched(outside)
