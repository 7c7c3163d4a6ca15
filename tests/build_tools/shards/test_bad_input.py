"""Hostile and careless input to assemble-shards (issue 20): shard dirs, their reports, the
output places and ``--targets-cmake``. Each case gives one ``error:`` line naming the input
and what is wrong, exit status 1, and leaves every file under the test's temp dir (the
shards, the output and everything around them) as it was."""

from __future__ import annotations

import base64
import errno
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from build_tools.assemble_shards import main
from build_tools.shards.archives import archive_problems
from build_tools.shards.scan import _classify
from kpack.common import staging as staging_mod
from kpack.common.tempdirs import make_temp_dir
from tests.build_tools.shards.test_assembly import TAG, VERSION, make_shard

REPO = Path(__file__).resolve().parents[3]
DEVICE = f"rocm_sdk_device_gfx1200-{VERSION}-{TAG}.whl"
CORE = f"rocm_sdk_core-{VERSION}-{TAG}.whl"
REPORT_A = "a/dist's report.json"  # the shard whose report the cases edit, as errors name it


def _snapshot(root: Path) -> dict[str, tuple[int, bytes | str | None]]:
    out: dict[str, tuple[int, bytes | str | None]] = {}
    for p in sorted(root.rglob("*")):
        mode = p.lstat().st_mode
        if p.is_symlink():
            content: bytes | str | None = os.readlink(p)
        elif p.is_file():
            content = p.read_bytes()
        else:
            content = None
        out[str(p.relative_to(root))] = (mode, content)
    return out


def _error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _fails(
    root: Path,
    argv: list[str],
    capsys: pytest.CaptureFixture[str],
    *needles: str,
    status: int = 1,
) -> str:
    """Run the CLI on ``argv``: exit ``status`` (1; 2 for a usage error), one error line
    holding ``needles``, and nothing under ``root`` changed."""
    before = _snapshot(root)
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == status, err
    _error_line(err)
    for needle in needles:
        assert needle in err, err
    assert _snapshot(root) == before
    return err


@pytest.fixture
def shards(tmp_path: Path) -> tuple[Path, Path]:
    """Two shards as the builder writes them: ``S/dist`` with ``S/report.json``."""
    return make_shard(tmp_path / "a", ("gfx1200",)), make_shard(tmp_path / "b", ("gfx1201",))


def _argv(a: Path, b: Path, dest: Path, *extra: str | Path) -> list[str]:
    return [str(x) for x in ("--input", a, "--input", b, "--dest-dir", dest, *extra)]


def _edit_report(shard: Path, edit: Callable[[dict[str, object]], None]) -> None:
    path = shard.parent / "report.json"
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


# --- the shards' reports --------------------------------------------------------------------


def _set(key: str, index: int, field: str, value: object) -> Callable[[dict[str, object]], None]:
    def edit(doc: dict[str, object]) -> None:
        rows = doc[key]
        assert isinstance(rows, list)
        rows[index][field] = value

    return edit


def _set_version(value: str) -> Callable[[dict[str, object]], None]:
    def edit(doc: dict[str, object]) -> None:
        doc["version"] = value

    return edit


HUGE_VERSION = "1.0.dev" + "9" * 5000  # packaging: ValueError, not InvalidVersion


REPORT_CASES: dict[str, tuple[Callable[[dict[str, object]], None], str]] = {
    # json reads NaN, which is no JSON and no number a report can hold
    "nan": (
        _set("targets", 0, "saving", float("nan")),
        "targets[0].saving: expected float, got nan",
    ),
    "infinite": (_set("targets", 0, "saving", float("inf")), "expected float, got inf"),
    "version-not-pep440": (
        _set_version("1.0\nerror: a second line"),
        r"version: not a PEP 440 version: '1.0\nerror: a second line'",
    ),
    "version-over-the-digit-limit": (
        _set_version(HUGE_VERSION),
        "version: not a PEP 440 version: '1.0.dev999",
    ),
    "device-row-other-target": (
        _set("device_wheels", 0, "target", "gfx942\n| x |"),
        f"device row for {DEVICE} names target 'gfx942\\n| x |', the wheel's is gfx1200",
    ),
    "device-row-of-a-generic-wheel": (
        _set("device_wheels", 0, "wheel", CORE),
        f"device row for {CORE} names target 'gfx1200', but it is no device wheel",
    ),
    "generic-row-of-a-device-wheel": (
        _set("generic", 0, "wheel", DEVICE),
        f"generic row for the device wheel {DEVICE}",
    ),
    # a device row's counts are checked against the wheel (its one data.bin: 0 kernels, 1 file)
    "kernels-not-the-wheels": (
        _set("device_wheels", 0, "kernels", 999999),
        f"{REPORT_A}: device row for {DEVICE} says 999999 kernels, the wheel holds 0",
    ),
    "database-files-not-the-wheels": (
        _set("device_wheels", 0, "database_files", 7),
        f"{REPORT_A}: device row for {DEVICE} says 7 database files, the wheel holds 1",
    ),
    "database-files-negative": (
        _set("device_wheels", 0, "database_files", -5),
        "device_wheels[0].database_files: expected int >= 0, got -5",
    ),
    "kernels-not-an-integer": (
        _set("device_wheels", 0, "kernels", 1.5),
        "device_wheels[0].kernels: expected int, got 1.5",
    ),
    "kernels-a-boolean": (
        _set("device_wheels", 0, "kernels", True),
        "device_wheels[0].kernels: expected int, got True",
    ),
    "kernels-a-string": (
        _set("device_wheels", 0, "kernels", "0"),
        "device_wheels[0].kernels: expected int, got '0'",
    ),
    "size-negative": (_set("generic", 0, "size", -1), "generic[0].size: expected int >= 0, got -1"),
    "row-names-no-file": (
        _set("generic", 0, "wheel", "x\n" * 3),
        r"report.json lists 'x\nx\nx\n', which no shard holds",
    ),
}


@pytest.mark.parametrize("case", sorted(REPORT_CASES))
def test_bad_report(
    case: str, shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = shards
    edit, needle = REPORT_CASES[case]
    _edit_report(a, edit)
    _fails(tmp_path, _argv(a, b, tmp_path / "out"), capsys, needle)


def test_a_huge_bad_value_is_shown_short(
    shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = shards
    _edit_report(a, _set("device_wheels", 0, "size", "9" * 1_000_000))
    err = _fails(tmp_path, _argv(a, b, tmp_path / "out"), capsys, "device_wheels[0].size")
    assert max(len(line) for line in err.splitlines()) < 300


def test_a_report_beside_that_is_a_symlink(
    shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = shards
    elsewhere = tmp_path / "elsewhere.json"
    (a.parent / "report.json").rename(elsewhere)
    (a.parent / "report.json").symlink_to(elsewhere)
    needle = f"{a.parent / 'report.json'}: is a symlink; refusing to read a report from elsewhere"
    _fails(tmp_path, _argv(a, b, tmp_path / "out"), capsys, needle)


def test_a_report_beside_that_is_a_directory(
    shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = shards
    (a.parent / "report.json").unlink()
    (a.parent / "report.json").mkdir()
    needle = f"{a.parent / 'report.json'}: not a regular file"
    _fails(tmp_path, _argv(a, b, tmp_path / "out"), capsys, needle)


def test_two_reports_for_one_shard(
    shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = shards
    (a / "report.json").write_bytes((a.parent / "report.json").read_bytes())
    needle = f"{a / 'report.json'} and {a.parent / 'report.json'}: two reports for one shard"
    _fails(tmp_path, _argv(a, b, tmp_path / "out"), capsys, needle)


def _run_cli(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """In a child, so an input that blocks fails the test instead of hanging it."""
    script = REPO / "build_tools" / "assemble_shards.py"
    return subprocess.run(
        [sys.executable, str(script), *argv], capture_output=True, text=True, timeout=120
    )


def test_a_report_beside_that_is_a_fifo(shards: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = shards
    (a.parent / "report.json").unlink()
    os.mkfifo(a.parent / "report.json")
    before = _snapshot(tmp_path)
    proc = _run_cli(_argv(a, b, tmp_path / "out"))
    assert proc.returncode == 1, proc.stderr
    assert _error_line(proc.stderr) == "error: invalid shard input", proc.stderr
    assert f"  - {a.parent / 'report.json'}: not a regular file" in proc.stderr
    assert _snapshot(tmp_path) == before


def test_a_version_flag_over_the_digit_limit(
    shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = shards
    argv = _argv(a, b, tmp_path / "out", "--version", HUGE_VERSION)
    err = _fails(tmp_path, argv, capsys, "error: --version '1.0.dev999", status=2)
    assert "is not a PEP 440 version" in err and len(err) < 300


# --- the command line ------------------------------------------------------------------------

USAGE_CASES: dict[str, tuple[list[str], str]] = {
    "unknown-flag": (
        ["--bogus"],
        "error: assemble-shards: unrecognized arguments: --bogus (see assemble-shards --help)",
    ),
    "missing-dest-dir": (
        ["--dest-dir"],
        "error: assemble-shards: argument --dest-dir: expected one argument "
        "(see assemble-shards --help)",
    ),
    "output-replaced": (
        ["--output", "dist"],
        "error: assemble-shards: --output was replaced by --dest-dir OUT, which writes the "
        "merged files to OUT/dist/ and report.json and report.md beside them, as the "
        "builder's --dest-dir (see assemble-shards --help)",
    ),
    "bad-verbosity": (
        ["-q", "-v"],
        "error: assemble-shards: argument -v/--verbose: not allowed with argument -q/--quiet "
        "(see assemble-shards --help)",
    ),
}


@pytest.mark.parametrize("case", sorted(USAGE_CASES))
def test_a_usage_error_is_one_line_and_exit_2(
    case: str, shards: tuple[Path, Path], tmp_path: Path
) -> None:
    """Not argparse's usage block: the project's one ``error:`` line, and argparse's exit
    status 2."""
    a, b = shards
    extra, line = USAGE_CASES[case]
    before = _snapshot(tmp_path)
    proc = _run_cli([*_argv(a, b, tmp_path / "out"), *extra])
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", line + "\n")
    assert _snapshot(tmp_path) == before


def test_a_missing_required_flag_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    needle = "error: assemble-shards: the following arguments are required: --input, --dest-dir"
    err = _fails(tmp_path, ["-q"], capsys, needle, status=2)
    assert err.count("\n") == 1 and "usage:" not in err
    # --output alone (the flag assemble-shards took before --dest-dir): what replaced it
    err = _fails(tmp_path, ["--output", "dist"], capsys, "--output was replaced by", status=2)
    assert err.count("\n") == 1 and "required" not in err


# --- the shards' files ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        (b"evil\nerror: x.whl", r"'evil\nerror: x.whl'"),
        (DEVICE.encode() + b"\n", repr(DEVICE + "\n")),
        (b"\xff.whl", r"'\udcff.whl'"),
    ],
)
def test_a_file_name_that_is_not_printable(
    name: bytes,
    shown: str,
    shards: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    a, b = shards
    with open(os.fsencode(a) + b"/" + name, "wb"):
        pass
    needle = f"{a}: file name {shown} is not printable"
    _fails(tmp_path, _argv(a, b, tmp_path / "out"), capsys, needle)


def test_two_wheels_of_one_project(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # without reports: the report check would not catch it either
    a = make_shard(tmp_path / "a", ("gfx1200",), report=False)
    b = make_shard(tmp_path / "b", ("gfx1201",), report=False)
    other = f"rocm_sdk_device_gfx1200-{VERSION}-1-{TAG}.whl"  # a build tag
    (b / other).write_bytes((a / DEVICE).read_bytes())
    needle = f"two files of rocm-sdk-device-gfx1200: {b / other} and {a / DEVICE}"
    _fails(tmp_path, _argv(a, b, tmp_path / "out"), capsys, needle)


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("foo", "device wheel for 'foo', which is not a gfx target"),
        ("gfx942_xnack", "device wheel for 'gfx942-xnack', which is not a gfx target"),
        ("gfx7-9-generic", "device wheel for gfx7-9-generic, a generic target the generic-target"),
    ],
)
def test_a_device_wheel_for_no_gfx_target(
    target: str, reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = make_shard(tmp_path / "a", ("gfx1200",), report=False)
    b = make_shard(tmp_path / "b", ("gfx1201",), report=False)
    name = f"rocm_sdk_device_{target.replace('-', '_')}-{VERSION}-{TAG}.whl"
    (b / name).write_bytes((b / f"rocm_sdk_device_gfx1201-{VERSION}-{TAG}.whl").read_bytes())
    _fails(tmp_path, _argv(a, b, tmp_path / "out"), capsys, f"{b / name}: {reason}")


# --- where the output goes -------------------------------------------------------------------


def test_output_inside_a_shard(
    shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = shards
    out = a / "merged"
    needle = f"--dest-dir {out} is inside the shard {a}"
    _fails(tmp_path, _argv(a, b, out), capsys, needle, status=2)


def test_index_inside_a_shard(
    shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = shards
    index = b / "simple"
    argv = _argv(a, b, tmp_path / "out", "--index", index)
    _fails(tmp_path, argv, capsys, f"--index {index} is inside the shard {b}", status=2)


def test_a_shard_in_the_way_of_the_outputs(
    shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A shard that is ``OUT/dist`` (or inside it) would be replaced by the merged files; one
    in ``OUT`` would have its report replaced by the merged one."""
    a, b = shards
    dest = a.parent  # OUT/dist is the shard a
    needle = f"the shard {a} is in --dest-dir {dest}/dist, which the merged files replace"
    _fails(tmp_path, _argv(a, b, dest), capsys, needle, status=2)
    inner = a / "sub"
    inner.mkdir()
    needle = f"the shard {inner} is in --dest-dir {dest}/dist, which the merged files replace"
    _fails(tmp_path, _argv(inner, b, dest), capsys, needle, status=2)
    inner.rmdir()
    moved = a.rename(a.parent / "shard")  # its report.json is dest/report.json
    needle = f"the shard {moved} is in --dest-dir {dest}: the merged report.json would be written"
    _fails(tmp_path, _argv(moved, b, dest), capsys, needle, status=2)


def test_the_report_place_is_a_directory(
    shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = shards
    (tmp_path / "m" / "report.md").mkdir(parents=True)  # an empty one counts as free
    (tmp_path / "m" / "report.md" / "notes").write_text("mine")
    needle = f"error: {tmp_path / 'm'}: cannot publish: 1 in the way, not written by "
    argv = _argv(a, b, tmp_path / "m", "--index", tmp_path / "index")
    err = _fails(tmp_path, argv, capsys, needle, "  - report.md: a directory not written by")
    assert err.count("\n") == 3  # the notice, the error and the one thing in the way


def test_planted_symlinks_at_the_report_places_are_never_followed(
    shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Symlinks at ``.report.json.tmp`` (an older writer's temp name), ``report.json`` and
    ``report.md`` in ``OUT`` and in ``OUT/dist``, and at a device wheel's place, point at a file
    elsewhere: it is never written. Those at outputs' places are in the way (an error;
    with ``--force`` the links themselves are replaced); the others are left alone."""
    a, b = shards
    victim = tmp_path / "elsewhere" / "victim.txt"
    victim.parent.mkdir()
    victim.write_bytes(b"precious\n")
    out = tmp_path / "m" / "dist"
    out.mkdir(parents=True)
    planted = [out.parent / n for n in (".report.json.tmp", "report.json", "report.md")]
    planted += [out / n for n in (".report.json.tmp", "report.json", "report.md", DEVICE)]
    for link in planted:
        link.symlink_to(victim)
    needle = f"error: {out.parent}: cannot publish: 3 in the way, not written by assemble-shards"
    err = _fails(tmp_path, ["-q", *_argv(a, b, out.parent)], capsys, needle)
    assert f"  - dist/{DEVICE}: a symlink not written by this tool\n" in err
    assert main(["-q", *_argv(a, b, out.parent), "--force"]) == 0, capsys.readouterr().err
    assert victim.read_bytes() == b"precious\n"
    for link in planted:  # not an output's place: left alone
        if link.name == ".report.json.tmp" or (link.parent == out and link.name != DEVICE):
            assert os.readlink(link) == str(victim), link
        else:  # the link itself was replaced
            assert not link.is_symlink() and link.is_file(), link
    assert (out / DEVICE).read_bytes() == (a / DEVICE).read_bytes()
    doc = json.loads((out.parent / "report.json").read_text())
    assert [r["target"] for r in doc["device_wheels"]] == ["gfx1200", "gfx1201"]
    assert "gfx1201" in (out.parent / "report.md").read_text()


@pytest.mark.parametrize("before", ["nothing", "empty-output", "an-earlier-run"])
@pytest.mark.parametrize("failure", ["disk-full", "interrupt"])
def test_a_failure_at_the_last_step_takes_everything_back(
    failure: str,
    before: str,
    shards: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The index, the dist and report.json are in place when report.md fails to move
    there: all go again (an earlier run's outputs and records come back), as do the parents
    made for them."""
    a, b = shards
    out, index = tmp_path / "new" / "deep" / "dist", tmp_path / "new2" / "index"
    if before == "empty-output":
        out.mkdir(parents=True)
    elif before == "an-earlier-run":
        argv = ["-q", "--input", str(a), "--dest-dir", str(out.parent), "--index", str(index)]
        assert main(argv) == 0
    capsys.readouterr()
    moved: list[Path] = []
    rename = os.rename

    def failing(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        into_place = Path(dst).parent == out.parent
        if into_place and Path(src).name == "report.md":
            if failure == "interrupt":
                raise KeyboardInterrupt
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fspath(dst))
        if into_place and Path(src).name == "report.json":
            moved.append(Path(dst))
        rename(src, dst)

    monkeypatch.setattr(os, "rename", failing)
    snapshot = _snapshot(tmp_path)
    rc = main(_argv(a, b, out.parent, "--index", index))
    err = capsys.readouterr().err
    assert moved == [out.parent / "report.json"]
    if failure == "interrupt":
        assert rc == 130, err
    else:
        assert rc == 1, err
        line = _error_line(err)
        assert line == f"error: {out.parent}: cannot publish the outputs: No space left on device"
    assert _snapshot(tmp_path) == snapshot


# --- --targets-cmake ------------------------------------------------------------------------

GOOD_CALL = 'therock_add_amdgpu_target(gfx1200 "RX 9060" FAMILY gfx120X-all)\n'
CMAKE_CASES: dict[str, tuple[str, str]] = {
    "unterminated-quote": (
        GOOD_CALL + 'therock_add_amdgpu_target(gfx1201 "RX 9070 FAMILY gfx120X-all)\n',
        'line 2: unterminated quoted argument (no closing ")',
    ),
    "unterminated-call": (
        GOOD_CALL + 'therock_add_amdgpu_target(gfx1201 "RX 9070" FAMILY gfx120X-all\n',
        "line 2: the call therock_add_amdgpu_target( is never closed",
    ),
    "unterminated-bracket-comment": (
        GOOD_CALL + "#[==[\ntherock_add_amdgpu_target(gfx1201 x)\n]]\n",
        "line 2: unterminated bracket comment (no closing ]==])",
    ),
    "stray-parenthesis": (GOOD_CALL + ")\n", "line 2: ')' without a matching '('"),
    "target-with-a-newline": (
        GOOD_CALL + 'therock_add_amdgpu_target("gfx1201\n" x FAMILY gfx120X-all)\n',
        r"line 2: 'gfx1201\n' is not a gfx target (gfxNNN)",
    ),
    "target-from-a-variable": (
        GOOD_CALL + "therock_add_amdgpu_target(${T} x FAMILY gfx120X-all)\n",
        "line 2: '${T}' is not a gfx target (gfxNNN)",
    ),
    "no-product-name": (
        GOOD_CALL + "therock_add_amdgpu_target(gfx1201)\n",
        "line 2: therock_add_amdgpu_target() needs a gfx target and a product name",
    ),
    "target-declared-twice": (
        GOOD_CALL + "\nTHEROCK_ADD_AMDGPU_TARGET(gfx1200 other FAMILY dgpu-all)\n",
        "line 3: AMDGPU target gfx1200 already declared on line 1",
    ),
    "family-in-parentheses": (
        "therock_add_amdgpu_target(gfx1200 x FAMILY (gfx120X-all))\n",
        "line 1: family name '(' of gfx1200 is not a name",
    ),
    "no-target-at-all": (
        "# therock_add_amdgpu_target(gfx1200 x)\n",
        "no therock_add_amdgpu_target",
    ),
}


@pytest.mark.parametrize("case", sorted(CMAKE_CASES))
def test_bad_targets_cmake(
    case: str, shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = shards
    text, needle = CMAKE_CASES[case]
    cmake = tmp_path / "therock_amdgpu_targets.cmake"
    cmake.write_text(text)
    families = ("--targets-cmake", cmake, "--linux-amdgpu-families", "gfx120X-all")
    _fails(tmp_path, _argv(a, b, tmp_path / "out", *families), capsys, f"{cmake}: {needle}")


def test_targets_cmake_too_large(
    shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = shards
    cmake = tmp_path / "big.cmake"
    cmake.write_text(GOOD_CALL + "#" * (1 << 20))
    families = ("--targets-cmake", cmake, "--linux-amdgpu-families", "gfx120X-all")
    needle = f"{cmake}: targets CMake file is larger than 1048576 bytes"
    _fails(tmp_path, _argv(a, b, tmp_path / "out", *families), capsys, needle)


@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
def test_targets_cmake_not_a_regular_file(
    kind: str, shards: tuple[Path, Path], tmp_path: Path
) -> None:
    """A FIFO would block the read forever, /dev/zero never end it."""
    a, b = shards
    cmake = tmp_path / "targets.cmake"
    if kind == "fifo":
        os.mkfifo(cmake)
    elif kind == "directory":
        cmake.mkdir()
    else:
        cmake = Path("/dev/zero")
    before = _snapshot(tmp_path)
    families = ("--targets-cmake", cmake, "--linux-amdgpu-families", "gfx120X-all")
    proc = _run_cli(_argv(a, b, tmp_path / "out", *families))
    assert proc.returncode == 2, proc.stderr  # a path on the command line that cannot be used
    line = _error_line(proc.stderr)
    reason = (
        "cannot read targets CMake file: Is a directory"
        if kind == "directory"
        else ("targets CMake file is not a regular file")
    )
    assert line == f"error: {cmake}: {reason}", line
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("call", [1, 2])
def test_interrupted_right_after_a_temp_dir_appears(
    call: int,
    shards: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The temp dir of the dist and its report (1) and the index's (2), each made, then
    SIGINT: nothing stays, not even the outputs' new parents."""
    calls: list[Path] = []

    def make_then_interrupt(path: Path) -> Path:
        made = make_temp_dir(path)
        calls.append(made)
        if len(calls) == call:
            raise KeyboardInterrupt
        return made

    monkeypatch.setattr(staging_mod, "make_temp_dir", make_then_interrupt)
    a, b = shards
    before = _snapshot(tmp_path)
    argv = _argv(a, b, tmp_path / "new", "--index", tmp_path / "new2" / "index")
    assert main(argv) == 130
    assert "interrupted" in capsys.readouterr().err
    assert len(calls) == call
    assert _snapshot(tmp_path) == before


# --- the archives: every wheel and the sdist is read and checked before anything is written ---

DEVICE_B = f"rocm_sdk_device_gfx1201-{VERSION}-{TAG}.whl"
SDIST = f"rocm-{VERSION}.tar.gz"
DIST_INFO = f"rocm_sdk_device_gfx1201-{VERSION}.dist-info"


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _metadata(name: str = "rocm-sdk-device-gfx1201") -> bytes:
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: {VERSION}\n".encode()


def _members(**overrides: bytes) -> dict[str, bytes]:
    members = {
        "rocm_sdk_device_gfx1201/data.bin": b"gfx1201" * 50,
        f"{DIST_INFO}/WHEEL": f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {TAG}\n".encode(),
        f"{DIST_INFO}/METADATA": _metadata(),
    }
    members.update(overrides)
    return members


def _record(members: dict[str, bytes]) -> bytes:
    rows = [f"{n},{_hash(d)},{len(d)}\n" for n, d in members.items()]
    return "".join([*rows, f"{DIST_INFO}/RECORD,,\n"]).encode()


def _write_wheel(path: Path, members: dict[str, bytes], record: bytes | None) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        if record is not None:
            zf.writestr(f"{DIST_INFO}/RECORD", record)


def _replace_device(
    b: Path, members: dict[str, bytes], record: bytes | None, name: str = DEVICE_B
) -> Path:
    (b / DEVICE_B).unlink()
    path = b / name
    _write_wheel(path, members, record)
    return path


def test_a_device_wheel_that_is_not_a_zip(
    shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = shards
    (b / DEVICE_B).write_bytes(b"this is not a zip file\n" * 10)
    needle = f"\n  - {b / DEVICE_B}: damaged wheel: not a valid zip file: File is not a zip file\n"
    err = _fails(tmp_path, _argv(a, b, tmp_path / "out"), capsys, needle)
    assert err.startswith("error: invalid shard input\n"), err


def test_a_wheel_without_record(
    shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = shards
    path = _replace_device(b, _members(), None)
    needle = f"\n  - {path}: bad RECORD: {DIST_INFO}/RECORD is missing\n"
    _fails(tmp_path, _argv(a, b, tmp_path / "out"), capsys, "error: invalid shard input", needle)


def test_a_device_wheel_with_a_kpack_archive_that_does_not_read(
    shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its kernels are counted to check the report row: a broken archive is an error."""
    a, b = shards
    members = _members(**{"rocm_sdk_device_gfx1201/x.kpack": b"KPAK" + b"\0" * 60})
    path = _replace_device(b, members, _record(members))
    needle = f"\n  - {path}: rocm_sdk_device_gfx1201/x.kpack: not a valid .kpack archive: "
    _fails(tmp_path, _argv(a, b, tmp_path / "out"), capsys, "error: invalid shard input", needle)


def test_a_record_hash_mismatch(
    shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = shards
    members = _members()
    record = _record(members)
    members["rocm_sdk_device_gfx1201/data.bin"] = b"GFX1201" * 50  # same size, other bytes
    path = _replace_device(b, members, record)
    needle = (
        f"\n  - {path}: bad RECORD ({DIST_INFO}/RECORD): "
        f"rocm_sdk_device_gfx1201/data.bin: sha256 mismatch (RECORD "
    )
    _fails(tmp_path, _argv(a, b, tmp_path / "out"), capsys, "error: invalid shard input", needle)


def test_metadata_name_differs_from_the_file_name(
    shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = shards
    members = _members(**{f"{DIST_INFO}/METADATA": _metadata("rocm-sdk-device-gfx942")})
    path = _replace_device(b, members, _record(members))
    needle = (
        f"\n  - {path}: METADATA names 'rocm-sdk-device-gfx942' '{VERSION}', "
        f"the file name rocm-sdk-device-gfx1201 {VERSION}\n"
    )
    _fails(tmp_path, _argv(a, b, tmp_path / "out"), capsys, "error: invalid shard input", needle)


def test_a_windows_wheel_with_names_differing_in_case(
    shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = shards
    members = _members(
        **{"rocm_sdk_device_gfx1201/Foo.py": b"1", "rocm_sdk_device_gfx1201/foo.py": b"2"}
    )
    name = DEVICE_B.replace("linux_x86_64", "win_amd64")
    path = _replace_device(b, members, _record(members), name)
    needle = (
        f"\n  - {path}: invalid wheel members: 'rocm_sdk_device_gfx1201/Foo.py' and "
        "'rocm_sdk_device_gfx1201/foo.py' differ only in case (one file on Windows)\n"
    )
    _fails(tmp_path, _argv(a, b, tmp_path / "out"), capsys, "error: invalid shard input", needle)


def test_the_same_names_in_a_linux_wheel_are_fine(
    shards: tuple[Path, Path], tmp_path: Path
) -> None:
    _a, b = shards
    members = _members(
        **{"rocm_sdk_device_gfx1201/Foo.py": b"1", "rocm_sdk_device_gfx1201/foo.py": b"2"}
    )
    path = _replace_device(b, members, _record(members))
    assert archive_problems(path, "rocm-sdk-device-gfx1201", VERSION) == []


def test_a_member_name_that_is_not_utf8(
    shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = shards
    members = _members(**{"rocm_sdk_device_gfx1201/badX.py": b"x"})
    path = _replace_device(b, members, _record(members))
    raw = path.read_bytes()
    assert raw.count(b"badX.py") == 3  # local header, central directory, RECORD
    path.write_bytes(raw.replace(b"badX.py", b"bad\xff.py"))  # stored without the UTF-8 flag
    needle = (
        f"\n  - {path}: invalid wheel members: member name "
        r"'rocm_sdk_device_gfx1201/bad\xff.py' is not valid UTF-8"
    )
    _fails(tmp_path, _argv(a, b, tmp_path / "out"), capsys, "error: invalid shard input", needle)


def test_an_sdist_that_is_not_a_tar_gz(
    shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = shards
    for shard in (a, b):
        (shard / SDIST).write_bytes(b"PK\x03\x04 not a gzip'd tar at all")
    needle = f"\n  - {a / SDIST}: not a valid gzip'd tar: Not a gzipped file (b'PK')\n"
    err = _fails(
        tmp_path, _argv(a, b, tmp_path / "out"), capsys, "error: invalid shard input", needle
    )
    assert f"\n  - {b / SDIST}: not a valid gzip'd tar" in err  # every problem at once


def _sdist(members: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for info, data in members:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buf.getvalue()


def _file(name: str) -> tarfile.TarInfo:
    return tarfile.TarInfo(name)


def test_an_sdist_with_a_dotdot_member(
    shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = shards
    top = f"rocm-{VERSION}"
    pkg_info = f"Metadata-Version: 2.1\nName: rocm\nVersion: {VERSION}\n".encode()
    data = _sdist([(_file(f"{top}/PKG-INFO"), pkg_info), (_file(f"{top}/../evil.py"), b"x")])
    for shard in (a, b):
        (shard / SDIST).write_bytes(data)
    needle = (
        f"\n  - {a / SDIST}: invalid sdist: unsafe member name: member name "
        f"'{top}/../evil.py' has '..' path component\n"
    )
    _fails(tmp_path, _argv(a, b, tmp_path / "out"), capsys, "error: invalid shard input", needle)


@pytest.mark.parametrize(
    ("kind", "link", "reason"),
    [
        (tarfile.SYMTYPE, "../../etc/passwd", "a symlink to '../../etc/passwd', outside"),
        (tarfile.SYMTYPE, "/etc/passwd", "a symlink to '/etc/passwd', outside"),
        (tarfile.LNKTYPE, "other/file", "a hard link to 'other/file', outside"),
    ],
)
def test_an_sdist_with_a_link_out(
    kind: bytes, link: str, reason: str, shards: tuple[Path, Path], tmp_path: Path
) -> None:
    _a, b = shards
    top = f"rocm-{VERSION}"
    pkg_info = f"Metadata-Version: 2.1\nName: rocm\nVersion: {VERSION}\n".encode()
    info = _file(f"{top}/link")
    info.type, info.linkname = kind, link
    (b / SDIST).write_bytes(_sdist([(_file(f"{top}/PKG-INFO"), pkg_info), (info, b"")]))
    problems = archive_problems(b / SDIST, "rocm", VERSION)
    assert problems == [f"{b / SDIST}: invalid sdist: member '{top}/link' is {reason} {top}/"]


def test_an_sdist_whose_pkg_info_names_another_version(shards: tuple[Path, Path]) -> None:
    _a, b = shards
    top = f"rocm-{VERSION}"
    pkg_info = b"Metadata-Version: 2.1\nName: rocm\nVersion: 1.0\n"
    (b / SDIST).write_bytes(_sdist([(_file(f"{top}/PKG-INFO"), pkg_info)]))
    problems = archive_problems(b / SDIST, "rocm", VERSION)
    assert problems == [f"{b / SDIST}: PKG-INFO names 'rocm' '1.0', the file name rocm {VERSION}"]


def test_the_builders_archives_pass(shards: tuple[Path, Path]) -> None:
    for shard in shards:
        for path in sorted(shard.iterdir()):
            _kind, project, version, _platforms, _target = _classify(path)
            assert archive_problems(path, project, version) == [], path
