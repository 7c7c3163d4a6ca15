"""What ``kpack split-wheel`` tells a person and a CI log (issue 33, item 5), on a real wheel
(jax-rocm7-plugin, 8 MB, three fat extension modules): log lines in a CI log, a live display
on a terminal, both on stderr; one list on stdout, in natural target order and decimal
units, at 80 columns without a line past them; ``-q``: the output path only."""

from __future__ import annotations

import fcntl
import json
import os
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from kpack.targets import target_order
from tests.dist_listing import read_listing
from tests.pypi_inputs import JAX_PLUGIN, pypi_wheel

REPO = Path(__file__).resolve().parents[3]
#: rich's cursor and style sequences: what a terminal does not print
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
STAMPED = re.compile(r"^\[ *\d+\.\ds\] ")
#: a size as the tools print it, and the sizes a user must never see
SIZE = r"\d+(?:\.\d)? (?:B|kB|MB|GB)"
FOREIGN_UNITS = re.compile(r"\d+\.\d\d MB|\bMiB\b|\bKiB\b|\bGiB\b|\bKB\b|\d{5,} bytes")


def _argv(wheel: Path, out: Path, *after: str, before: tuple[str, ...] = ()) -> list[str]:
    return [sys.executable, "-m", "kpack", *before, "split-wheel", "--input", str(wheel),
            "--output-dir", str(out), "--device-package-prefix", "jax-device", *after]  # fmt: skip


def _env(**more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "CI")}
    return {**env, "COLUMNS": "80", **more}


@pytest.fixture(scope="module")
def wheel() -> Path:
    return pypi_wheel(JAX_PLUGIN)


def test_a_ci_log_gets_stamped_lines_and_stdout_one_list(wheel: Path, tmp_path: Path) -> None:
    out = tmp_path / "dist"
    proc = subprocess.run(
        _argv(wheel, out), capture_output=True, text=True, cwd=tmp_path, env=_env()
    )
    assert proc.returncode == 0, proc.stderr
    log = proc.stderr.splitlines()
    stamped = [line for line in log if STAMPED.match(line)]
    text = "\n".join(STAMPED.sub("", line) for line in stamped)
    assert text.startswith(f"reading {wheel.name}")
    assert re.search(rf"splitting the device code out of 3 fat binaries \({SIZE}\)", text)
    assert re.search(rf"^\d+ kernels in 6 archives \({SIZE}\)$", text, re.M)
    assert re.search(rf"^writing 7 wheels from {SIZE} of input$", text, re.M)
    written = sorted(p.name for p in out.iterdir() if p.suffix == ".whl")
    wrote = re.findall(rf"^wrote (\S+) \(({SIZE}), \d+\.\d s\)$", text, re.M)
    assert sorted(name for name, _ in wrote) == written  # every wheel, once, as it completes
    # the rest of stderr: where the report went (the notes are in it)
    rest = [line for line in log if not STAMPED.match(line)]
    reports = tmp_path / "dist-split-reports"
    assert rest == [f"split report, with 6 notes: {reports}"], rest
    # stdout: one table of the wheels written, then the output path
    lines = proc.stdout.splitlines()
    assert lines[-1] == str(out)
    assert all(len(line) <= 80 and line == line.rstrip() for line in lines), lines
    assert not FOREIGN_UNITS.search(proc.stdout + proc.stderr)
    listing = read_listing("\n".join(lines[:-1]))  # each wheel named, one line each
    assert sorted(listing.rows) == written
    assert listing.title.startswith("Split jax-rocm7-plugin (")


def test_the_report_lists_targets_in_natural_order(wheel: Path, tmp_path: Path) -> None:
    out = tmp_path / "dist"
    proc = subprocess.run(_argv(wheel, out, "-q"), capture_output=True, text=True, env=_env())
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout == f"{out}\n"  # -q: the output path only
    (report,) = (tmp_path / "dist-split-reports").glob("*.json")
    data = json.loads(report.read_text())
    gpus = [g["target"] for g in data["gpus"]]
    keys = [w["key"] for w in data["device_wheels"]]
    # an oracle apart from target_order: GFX versions as numbers
    assert gpus[:2] == ["gfx908", "gfx90a"] and "gfx1030" in gpus and "gfx1100" in gpus
    assert (
        gpus.index("gfx942") < gpus.index("gfx1030") < gpus.index("gfx1100") < gpus.index("gfx1200")
    )
    assert gpus == sorted(gpus, key=target_order)
    assert keys == ["gfx908", "gfx90a", "gfx9-4-generic", "gfx10-3-generic", "gfx11-generic",
                    "gfx12-generic"]  # fmt: skip
    markdown = report.with_suffix(".md").read_text()
    assert not FOREIGN_UNITS.search(markdown)
    assert all(re.fullmatch(r"-?" + SIZE, w) for w in re.findall(r"\| (-?[\d.]+ \w+) \|", markdown))


def test_quiet_before_the_subcommand_too(wheel: Path, tmp_path: Path) -> None:
    out = tmp_path / "dist"
    proc = subprocess.run(
        _argv(wheel, out, before=("-q",)), capture_output=True, text=True, env=_env()
    )
    assert (proc.returncode, proc.stderr, proc.stdout) == (0, "", f"{out}\n")


def _run_in_pty(argv: list[str], cwd: Path) -> tuple[int, str]:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    try:
        proc = subprocess.Popen(argv, stdout=slave, stderr=slave, cwd=cwd, env=_env(TERM="xterm"))
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
        code = proc.wait()
    finally:
        os.close(master)
    return code, b"".join(chunks).decode(errors="replace")


def test_a_terminal_gets_a_live_display_within_80_columns(wheel: Path, tmp_path: Path) -> None:
    code, screen = _run_in_pty(_argv(wheel, tmp_path / "dist"), tmp_path)
    assert code == 0, screen
    assert "\x1b[" in screen and "wrote jax-device-gfx908 (" in screen  # rich's live display
    text = ANSI.sub("", screen).replace(str(tmp_path), "T")  # a path is as long as it is
    shown = [part for line in text.split("\n") for part in line.split("\r")]
    too_long = [line for line in shown if len(line) > 80]
    assert too_long == [], too_long
    for done, total in re.findall(r"(\d+\.\d)/(\d+\.\d) (?:kB|MB|GB)", ANSI.sub("", screen)):
        assert float(done) <= float(total), (done, total)
