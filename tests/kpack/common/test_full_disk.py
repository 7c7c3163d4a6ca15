"""A full output disk names the output being written, never the input (issue 29).

``kpack split-wheel`` on a full disk said the *input* wheel was damaged (the extraction's
reader boundary took the write's ``ENOSPC`` for bad zip data); ``kpack extract`` said a bare
``No space left on device``. Now a failed write names the file being written, a failed read
names the input, exit status 1, and nothing half-written is left. Tested with the disk
filling up under the output files (their raw file refuses bytes past a budget), and on a
real tmpfs too small for the output where a private mount namespace is allowed.
"""

from __future__ import annotations

import errno
import io
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kpack import cli
from kpack.archive import KernelInput, write_kpack
from kpack.archive import _write as archive_write
from kpack.common import outfile, safepath
from kpack.common.outfile import OutputFile, named_write_error
from kpack.errors import ArchiveError
from kpack.wheelfile import Member, write_wheel
from kpack.wheelfile import _source as wheel_source
from tests.kpack.bundle_fixtures import sample_bundle
from tests.kpack.wheel_fixtures import metadata
from tests.progress_lines import without_progress

REPO = Path(__file__).resolve().parents[3]
FULL = os.strerror(errno.ENOSPC)  # "No space left on device"
WHEEL = "torch-2.9.0-py3-none-linux_x86_64.whl"
SPLIT = ("--overlay-root", "torch/", "--device-package-prefix", "amd-torch-device")


class _FillsUp(io.FileIO):
    """A raw output file on a disk with ``left[0]`` bytes free: a write past them fails
    with ENOSPC after writing what fits, as write(2) does."""

    def __init__(self, fd: int, mode: str, *, closefd: bool, left: list[int]) -> None:
        super().__init__(fd, mode, closefd=closefd)
        self.left = left

    def write(self, data: Any) -> int:
        if self.left[0] <= 0:
            raise OSError(errno.ENOSPC, FULL)
        view = memoryview(data)[: self.left[0]]
        done = super().write(view)
        self.left[0] -= done or 0
        return done or 0


@pytest.fixture
def disk_fills_up(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """``arm(n)``: from now on, the outputs opened through safepath and the archive writer
    share ``n`` free bytes."""

    def arm(free: int) -> None:
        left = [free]

        def full_output_file(
            fd: int, path: str | os.PathLike[str], *, buffer_size: int = io.DEFAULT_BUFFER_SIZE
        ) -> OutputFile:
            return OutputFile(_FillsUp(fd, "wb", closefd=True, left=left), path, buffer_size)

        for module in (safepath, archive_write):
            monkeypatch.setattr(module, "output_file", full_output_file)

    return arm


def _wheel(dest: Path) -> Path:
    """A wheel with a 256 KiB member (random bytes: they deflate to about as much)."""
    members = [
        Member("torch/__init__.py", b""),
        Member("torch/lib/big.bin", os.urandom(256 << 10)),
    ]
    result = write_wheel(
        dest, dist_name="torch", version="2.9.0", tag="py3-none-linux_x86_64",
        members=members, metadata=metadata(),
    )  # fmt: skip
    return result.path


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _one_error(err: str) -> str:
    lines = without_progress(err)
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


# --- the file object ---------------------------------------------------------------------------


def test_every_failed_write_names_the_output(tmp_path: Path) -> None:
    path = tmp_path / "out.bin"
    for free, data in ((0, b"x" * 100), (10, b"x" * (1 << 20)), (10, b"x" * 100)):
        left = [free]
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        out = OutputFile(_FillsUp(fd, "wb", closefd=True, left=left), path, 4096)
        # a large write fails at once (it bypasses the buffer), a small one at the close
        with pytest.raises(OSError) as caught, out:
            out.write(data)
        assert (caught.value.errno, caught.value.filename) == (errno.ENOSPC, str(path))
        assert caught.value.strerror == FULL and out.closed


def test_an_error_naming_a_file_already_is_kept() -> None:
    named = OSError(errno.EIO, "Input/output error", "/the/input")
    assert named_write_error(named, "/the/output") is named
    bare = named_write_error(OSError(errno.EDQUOT, os.strerror(errno.EDQUOT)), "/out")
    assert (bare.errno, bare.filename) == (errno.EDQUOT, "/out")


def test_a_full_disk_under_an_archive_names_the_archive(
    tmp_path: Path, disk_fills_up: Callable[[int], None]
) -> None:
    kernels = [KernelInput("lib/a.so#0", "gfx942", os.urandom(64 << 10))]
    disk_fills_up(1000)
    archive = tmp_path / "a_gfx942.kpack"
    with pytest.raises(ArchiveError) as caught:
        write_kpack(archive, kernels, group_name="a", gfx_arch_family="gfx942", scheme="none")
    assert str(caught.value) == f"{archive}: cannot write archive: {FULL}"
    assert os.listdir(tmp_path) == []  # the temporary file is gone


# --- split-wheel and extract -------------------------------------------------------------------


@pytest.mark.parametrize("free", [0, 4096, 100_000])
def test_split_wheel_on_a_full_disk_names_the_output_not_the_input(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    disk_fills_up: Callable[[int], None],
    free: int,
) -> None:
    wheel = _wheel(tmp_path / "in")
    out = tmp_path / "out"
    disk_fills_up(free)
    rc = cli.main(["split-wheel", "--input", str(wheel), "--output-dir", str(out), *SPLIT])
    line = _one_error(capsys.readouterr().err)
    assert rc == 1
    assert line.startswith(f"error: {out}") and line.endswith(f": {FULL}"), line
    assert "damaged" not in line and str(wheel) not in line, line
    assert _tree(tmp_path) == ["in", f"in/{WHEEL}"]  # nothing half-written anywhere


def test_a_failed_read_of_the_input_names_the_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """EIO reading the wheel: the input is named, as a read error, not as damage."""

    def failing_chunks(*args: object, **kwargs: object) -> Iterator[bytes]:
        raise OSError(errno.EIO, os.strerror(errno.EIO))
        yield b""  # a generator, as member_chunks is

    wheel = _wheel(tmp_path / "in")
    monkeypatch.setattr(wheel_source, "member_chunks", failing_chunks)
    out = tmp_path / "out"
    rc = cli.main(["split-wheel", "--input", str(wheel), "--output-dir", str(out), *SPLIT])
    line = _one_error(capsys.readouterr().err)
    assert rc == 1
    assert line == f"error: {wheel}: cannot read (member 'torch/__init__.py'): {os.strerror(5)}"
    assert _tree(tmp_path) == ["in", f"in/{WHEEL}"]


@pytest.mark.parametrize("free", [0, 70_000])
def test_extract_on_a_full_disk_names_the_code_object_file(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    disk_fills_up: Callable[[int], None],
    free: int,
) -> None:
    bundle = tmp_path / "in.bundle"
    bundle.write_bytes(sample_bundle(["gfx900", "gfx1030"], size=64 << 10))
    out = tmp_path / "co"
    disk_fills_up(free)
    rc = cli.main(["extract", str(bundle), "-o", str(out)])
    line = _one_error(capsys.readouterr().err)
    assert rc == 1
    assert line.startswith(f"error: {out}") and line.endswith(f".co: {FULL}"), line
    assert _tree(tmp_path) == ["in.bundle"]


# --- a real full disk --------------------------------------------------------------------------


def _namespace_mounts() -> bool:
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    probe = subprocess.run([unshare, "-rm", "true"], capture_output=True, check=False)
    return probe.returncode == 0


needs_mounts = pytest.mark.skipif(
    not _namespace_mounts(), reason="no unprivileged mount namespace (unshare -rm) here"
)


def _on_tmpfs(
    mount: Path, size: str, *argv: str | Path
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """``python -m kpack ARGV`` with a tmpfs of ``size`` mounted at ``mount``, in a private
    mount namespace (nothing outside it sees the mount); and what the tmpfs held after."""
    mount.mkdir()
    left = mount.parent / "left-on-disk.txt"
    script = (
        f'm=$1; l=$2; shift 2; mount -t tmpfs -o size={size} tmpfs "$m" || exit 99; '
        '"$@"; rc=$?; (cd "$m" && find . -mindepth 1) > "$l"; exit $rc'
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "kpack", *map(str, argv)]
    proc = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, "sh", str(mount), str(left), *command],
        capture_output=True, text=True, check=False, env=env,
    )  # fmt: skip
    return proc, sorted(left.read_text().split()) if left.exists() else ["?"]


@needs_mounts
def test_split_wheel_on_a_real_full_disk(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "in")
    mount = tmp_path / "disk"
    out = mount / "out"
    argv = ("split-wheel", "--input", wheel, "--output-dir", out, "--tmp-dir", mount, *SPLIT)
    proc, left = _on_tmpfs(mount, "64k", *argv)
    line = _one_error(proc.stderr)
    assert proc.returncode == 1
    assert line.startswith(f"error: {mount}/") and line.endswith(f": {FULL}"), line
    assert "damaged" not in line and str(wheel) not in line, line
    assert left == [], left  # nothing half-written on the full disk


@needs_mounts
def test_extract_on_a_real_full_disk(tmp_path: Path) -> None:
    bundle = tmp_path / "in.bundle"
    bundle.write_bytes(sample_bundle(["gfx900", "gfx1030"], size=64 << 10))
    mount = tmp_path / "disk"
    proc, left = _on_tmpfs(mount, "16k", "extract", bundle, "-o", mount / "co")
    line = _one_error(proc.stderr)
    assert proc.returncode == 1
    assert line.startswith(f"error: {mount / 'co'}/") and line.endswith(f".co: {FULL}"), line
    assert left == [], left


def test_the_output_file_module_is_what_safepath_opens_with() -> None:
    """The fixture patches the names the writers use; they must be the module's."""
    assert safepath.output_file is outfile.output_file
    assert archive_write.output_file is outfile.output_file
