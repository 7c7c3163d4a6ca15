"""What a person and a CI log see while the builder works."""

from __future__ import annotations

import fcntl
import io
import os
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from kpack.common import progress as progress_module
from kpack.common.progress import LineProgress, make_progress

from .treeutil import add_artifact, write_manifest

REPO = Path(__file__).resolve().parents[2]
#: rich's cursor and style sequences: what a terminal does not print
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def _tree(root: Path) -> Path:
    write_manifest(root)
    add_artifact(root, "core-hip_lib_generic", "core/clr/stage", {"share/hip/version": b"5.2"})
    add_artifact(root, "core-runtime_lib_generic", "s", {"share/blob.bin": os.urandom(3 << 20)})
    return root


def _build(tree: Path, dest: Path, *extra: str, **kw: object) -> subprocess.CompletedProcess[str]:
    streams = kw or {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-m", "build_tools.build_python_packages", "--artifact-dir", str(tree),
         "--dest-dir", str(dest), "--version", "1.0", *extra],
        cwd=REPO, text=True, check=False, **streams,
    )  # fmt: skip


def test_a_ci_log_gets_a_line_per_phase_and_per_package(tmp_path: Path) -> None:
    proc = _build(_tree(tmp_path / "tree"), tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("notice:")]
    assert lines.pop() == f"report: {tmp_path / 'out' / 'report.md'}"  # the report: on stderr
    stamped = re.compile(r"^\[ *\d+\.\ds\] ")
    assert all(stamped.match(line) for line in lines), lines
    text = "\n".join(stamped.sub("", line) for line in lines)
    for phase in ("scanning", "3 artifacts, legacy mode", "planning", "planned 3 packages"):
        assert phase in text, text
    wrote = [line for line in text.splitlines() if line.startswith("wrote ")]
    built = sorted(p.name for p in (tmp_path / "out" / "dist").rglob("*") if p.is_file())
    assert sorted(w.split()[1] for w in wrote) == built  # each package, once
    assert all(re.search(r"\(\d+\.\d (kB|MB|GB)|\(\d+ B", w) and " s)" in w for w in wrote)
    assert text.splitlines()[-1] == "done"
    # stdout: one table of the packages written, then the absolute dist path, whatever the cwd
    out = proc.stdout.splitlines()
    assert out[-1] == str(tmp_path / "out" / "dist")
    assert out[0] == "Packages written: version 1.0, tag py3-none-linux_x86_64"
    assert out[2].split() == ["package", "files", "size"]
    assert "KB" not in proc.stdout and "MiB" not in proc.stdout


def test_quiet_prints_errors_and_the_output_path_only(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "tree")
    proc = _build(tree, tmp_path / "out", "-q")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout == f"{tmp_path / 'out' / 'dist'}\n"
    proc = _build(tree, tree / "inside", "-q")
    assert proc.returncode == 2 and proc.stderr.startswith("error: ")  # a usage error


def test_a_terminal_gets_a_live_display(tmp_path: Path) -> None:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = {**{k: v for k, v in os.environ.items() if k != "CI"}, "COLUMNS": "80", "TERM": "xterm"}
    try:
        proc = _build(
            _tree(tmp_path / "tree"), tmp_path / "out", stderr=slave, stdout=slave, env=env
        )
        os.close(slave)
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(master)
    screen = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0, screen
    assert "writing packages" in screen and "\x1b[" in screen  # rich's live bar
    assert re.search(r"\] wrote rocm-sdk-core \([0-9.]+ [kM]B, [0-9.]+ s\)", screen), screen
    # 80 columns: no line past them (but a path, as long as it is), a bar never past its total
    text = ANSI.sub("", screen).replace(str(tmp_path), "T")
    shown = [part for line in text.split("\n") for part in line.split("\r")]
    assert [line for line in shown if len(line) > 80] == []
    for done, total in re.findall(r"(\d+\.\d)/(\d+\.\d) (?:kB|MB|GB)", text):
        assert float(done) <= float(total), (done, total)


def test_a_long_file_reports_as_it_goes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress_module, "LARGE_FILE", 100)
    monkeypatch.setattr(progress_module, "LOG_EVERY", 0.0)
    out = io.StringIO()
    line = LineProgress(out)
    line.file_started("lib/libbig.so", 1000)
    line.advance(400)
    line.advance(600)
    text = out.getvalue()
    assert "compressing lib/libbig.so (1.0 kB)" in text
    assert "compressing lib/libbig.so: 40% of 1.0 kB" in text
    small = io.StringIO()
    LineProgress(small).file_started("lib/small.so", 10)
    assert small.getvalue() == ""


def test_make_progress_picks_by_stream() -> None:
    assert type(make_progress(quiet=True)).__name__ == "QuietProgress"
    assert type(make_progress(quiet=False, stream=io.StringIO())).__name__ == "LineProgress"


def test_the_bar_never_shows_more_done_than_its_total() -> None:
    # a wheel's METADATA and RECORD are read too: bytes the total did not foresee
    live = progress_module.RichProgress()
    try:
        live.set_total(1000, "writing 2 wheels")
        live.advance(600)
        live.advance(500)
        (task,) = live._bar.tasks
        assert task.total is not None and task.completed == 1100 <= task.total
        assert task.description == "writing 2 wheels"
    finally:
        live.close()


def test_a_package_line_on_a_terminal_fits_80_columns_whole() -> None:
    """The longest wheel name of a release, written: the line names its project and keeps
    its size (the file name would be cut at 80 columns, size and all)."""
    wheel = "rocm_sdk_device_gfx1250_strict-7.99.0.dev0-py3-none-manylinux_2_28_x86_64.whl"
    live = progress_module.RichProgress()
    try:
        console = live._bar.console
        console.width = 80
        with console.capture() as captured:
            live.package_done(wheel, 123_400_000, 4.25)
        line = captured.get().rstrip("\n")
    finally:
        live.close()
    assert len(line) <= 80 and "\n" not in line, line
    assert line.endswith("] wrote rocm-sdk-device-gfx1250-strict (123.4 MB, 4.2 s)"), line
