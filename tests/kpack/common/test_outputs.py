"""The one output-directory module (:mod:`kpack.common.outputs`) against hostile records:
planted symlinks, names that leave the directory, records that claim the user's files, and
records that are not records at all; plus crash debris, and random records and symlinks
planted anywhere (nothing outside changes, no file the tool did not write goes)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from kpack.common.output_record import FORMAT, read_record
from kpack.common.staging import MARKER, remove_debris, staging
from kpack.errors import PackagingError
from tests.kpack.common.outputs_kit import (
    REC,
    TOOL,
)
from tests.kpack.common.outputs_kit import (
    file_entry as _file_entry,
)
from tests.kpack.common.outputs_kit import (
    plant_record as _record,
)
from tests.kpack.common.outputs_kit import (
    publish_files as _publish,
)
from tests.kpack.common.outputs_kit import (
    sha as _sha,
)
from tests.kpack.common.outputs_kit import (
    snapshot as _snapshot,
)
from tests.kpack.common.outputs_kit import (
    stage as _stage,
)
from tests.kpack.split.test_split import make_fat


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path]:
    """``out/`` (the tool's output dir, published into once) and ``outside/`` beside it."""
    out, outside = tmp_path / "out", tmp_path / "outside"
    (outside / "victimdir").mkdir(parents=True)
    (outside / "victimdir" / "precious.txt").write_bytes(b"precious")
    (outside / "victim.txt").write_bytes(b"victim")
    _publish(out, tmp_path, {"a.whl": b"a1"})
    return out, outside


def test_a_symlinked_parent_in_a_record_is_never_followed(
    world: tuple[Path, Path], tmp_path: Path
) -> None:
    out, outside = world
    before = _snapshot(outside)
    (out / "lnk").symlink_to("../outside")
    entries = {
        "lnk": {"kind": "dir"},
        "lnk/victimdir": {"kind": "dir"},
        "lnk/victimdir/precious.txt": _file_entry(outside / "victimdir" / "precious.txt"),
        "lnk/victim.txt": _file_entry(outside / "victim.txt"),
    }
    _record(out, entries)
    _publish(out, tmp_path, {"b.whl": b"b"})  # exit 0: the stale claims are not ours
    assert _snapshot(outside) == before
    assert (out / "lnk").is_symlink()


def test_names_that_leave_the_output_are_refused(world: tuple[Path, Path], tmp_path: Path) -> None:
    out, outside = world
    before = _snapshot(outside)
    for name in ("../outside/victimdir", "/abs/path", "C:/x", "a/../../outside", "a\\b", "x\0y"):
        _record(out, {name: {"kind": "dir"}})
        with pytest.raises(PackagingError, match=r"untrusted record of earlier outputs") as info:
            _publish(out, tmp_path, {"b.whl": b"b"})
        assert str(out / REC) in str(info.value) and "--force" in str(info.value)
        assert _snapshot(outside) == before and not (out / "b.whl").exists()


def test_a_record_claiming_a_users_directory_removes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _publish(out, tmp_path, {"a.co": b"a"})
    (out / "mydata").mkdir()
    (out / "mydata" / "thesis.tex").write_bytes(b"years of work")
    _record(out, {"mydata": {"kind": "dir"}, "a.co": _file_entry(out / "a.co")})
    _publish(out, tmp_path, {"b.co": b"b"})
    assert (out / "mydata" / "thesis.tex").read_bytes() == b"years of work"
    assert not (out / "a.co").exists()  # the tool's own stale output did go


def test_a_planted_record_with_the_right_bytes_cannot_claim_a_later_file(tmp_path: Path) -> None:
    """A record planted ahead of time (a ``dist/`` tarball) knows the bytes of a public file
    but not the inode of the copy the user puts there later."""
    out = tmp_path / "out"
    out.mkdir()
    public = b"a wheel from PyPI"
    _record(out, {"torch.whl": {"kind": "file", "size": len(public), "sha256": _sha(public),
                                "inode": 1}})  # fmt: skip
    (out / "torch.whl").write_bytes(public)
    with pytest.raises(PackagingError, match=r"torch\.whl: changed since this tool wrote it"):
        _publish(out, tmp_path, {"torch.whl": b"ours"})
    _publish(out, tmp_path, {"mine.whl": b"m"})  # torch.whl is stale, and not ours
    assert (out / "torch.whl").read_bytes() == public


def test_a_file_changed_since_is_neither_replaced_nor_removed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _publish(out, tmp_path, {"a.whl": b"1", "b.whl": b"1"})
    (out / "a.whl").write_bytes(b"2")  # same size, other bytes
    (out / "b.whl").write_bytes(b"edited")
    with pytest.raises(PackagingError) as info:
        _publish(out, tmp_path, {"a.whl": b"3"})
    assert info.value.problems == (
        "a.whl: changed since this tool wrote it (other contents, same size)",
    )
    assert "1 in the way, changed since t wrote it (see --force)" in str(info.value)
    _publish(out, tmp_path, {"c.whl": b"c"})  # a and b are stale but not ours: both stay
    assert (out / "a.whl").read_bytes() == b"2" and (out / "b.whl").read_bytes() == b"edited"


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{not json",
        b"[" * 200_000 + b"]" * 200_000,
        b'{"format": 1, "tool": "t", "outputs": {}}',
        json.dumps({"format": FORMAT, "tool": "other", "outputs": {}}).encode(),
        json.dumps({"format": FORMAT, "tool": TOOL, "outputs": {"a": {"kind": "file"}}}).encode(),
        json.dumps({"format": FORMAT, "tool": TOOL, "outputs": {"a": {"kind": "socket"}}}).encode(),
        json.dumps({"format": FORMAT, "tool": TOOL, "outputs": []}).encode(),
        b'{"format": "' + FORMAT.encode() + b'", "tool": "t", "outputs": {"a": 1e999999}}',
    ],
)
def test_a_record_that_is_not_one_is_one_error_and_no_change(
    tmp_path: Path, content: bytes
) -> None:
    out = tmp_path / "out"
    _publish(out, tmp_path, {"a.whl": b"1"})
    (out / REC).write_bytes(content)
    before = _snapshot(out)
    with pytest.raises(PackagingError, match="untrusted record of earlier outputs") as info:
        _publish(out, tmp_path, {"a.whl": b"2"})
    assert str(info.value).count("\n") == 0 and str(out / REC) in str(info.value)
    assert _snapshot(out) == before
    _publish(out, tmp_path, {"a.whl": b"2"}, force=True)  # --force: ignored, with a warning
    assert (out / "a.whl").read_bytes() == b"2"


@pytest.mark.parametrize("kind", ["symlink", "dir", "fifo"])
def test_a_record_that_is_not_a_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    out = tmp_path / "out"
    _publish(out, tmp_path, {"a.whl": b"1"})
    (out / REC).unlink()
    if kind == "symlink":
        (tmp_path / "elsewhere.json").write_text("{}")
        (out / REC).symlink_to(tmp_path / "elsewhere.json")
    elif kind == "dir":
        (out / REC).mkdir()
    else:
        os.mkfifo(out / REC)  # must not block
    with pytest.raises(PackagingError, match="not a regular file"):
        _publish(out, tmp_path, {"a.whl": b"2"})


def test_a_cli_record_hostile_for_kpack_extract(tmp_path: Path) -> None:
    """``kpack extract`` as a user runs it: a planted symlink and record reach nothing."""
    fat = make_fat(tmp_path / "build", "rocblas", [["gfx942", "gfx90a"]]).path
    out, outside = tmp_path / "out", tmp_path / "outside"
    (outside / "victimdir").mkdir(parents=True)
    (outside / "victimdir" / "f").write_bytes(b"keep")
    cmd = [sys.executable, "-m", "kpack", "extract", str(fat), "-o", str(out)]
    assert subprocess.run(cmd, capture_output=True).returncode == 0
    (out / "lnk").symlink_to("../outside")
    (out / "mydata").mkdir()
    (out / "mydata" / "thesis.tex").write_bytes(b"mine")
    doc = json.loads((out / ".kpack-extract.json").read_text())
    doc["outputs"].update({"lnk/victimdir": {"kind": "dir"}, "mydata": {"kind": "dir"}})
    (out / ".kpack-extract.json").write_text(json.dumps(doc))
    run = subprocess.run(cmd, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert (outside / "victimdir" / "f").read_bytes() == b"keep"
    assert (out / "mydata" / "thesis.tex").read_bytes() == b"mine"
    (out / ".kpack-extract.json").write_bytes(b"[" * 200_000)
    run = subprocess.run(cmd, capture_output=True, text=True)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert run.stderr.count("\n") == 1 and ".kpack-extract.json" in run.stderr


# --- staging and crash debris ----------------------------------------------------------------


def _killed_run(dest: Path, tool: str) -> Path:
    """A run of ``tool`` staging into ``dest``, killed with SIGKILL half-way."""
    code = (
        "import os, sys, time; from pathlib import Path; from kpack.common.staging import staging\n"
        f"with staging(Path({str(dest)!r}), {tool!r}) as s:\n"
        "    (s / 'big').write_bytes(b'x' * 100000); print(s, flush=True); time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    staged = Path(proc.stdout.readline().strip())
    proc.kill()
    proc.wait()
    proc.stdout.close()
    return staged.parent


def test_debris_of_a_killed_run_goes_with_one_notice(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dest = tmp_path / "out"
    left = _killed_run(dest, TOOL)
    assert left.is_dir() and left.parent == dest
    other = _killed_run(dest, "another tool")  # not ours to clean
    lookalike = dest / f"{left.name[:-3]}xyz"
    lookalike.mkdir()
    (lookalike / "mine").write_text("a user's dir with a staging-like name, no marker")
    with staging(dest, TOOL) as live:
        assert remove_debris(dest, TOOL) == []  # a live run's staging is never debris
        assert live.is_dir()
    assert not left.exists() and other.is_dir() and (lookalike / "mine").is_file()
    notices = [r for r in caplog.records if "interrupted run" in r.getMessage()]
    assert len(notices) == 1 and str(dest) in notices[0].getMessage()


def test_a_marker_from_another_tool_or_a_symlinked_staging_stays(tmp_path: Path) -> None:
    dest = tmp_path / "out"
    left = _killed_run(dest, TOOL)
    (left / MARKER).write_bytes(b"rocm-packaging staging of someone else\n")
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / MARKER).write_bytes(f"rocm-packaging staging of {TOOL}\n".encode())
    (dest / f"{left.name}-link").symlink_to(target)
    assert remove_debris(dest, TOOL) == []
    assert left.is_dir() and (target / MARKER).is_file()


# --- property: random records and symlinks planted anywhere ---------------------------------

_NAMES = ["a", "b", "d", "d/x", "d/y", "lnk", "lnk/v", "lnk/vd", "lnk/vd/p", "e/f/g", "u", "u/t"]


@pytest.mark.parametrize("seed", range(40))
def test_random_records_never_delete_outside_or_a_users_file(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    out, outside = tmp_path / "out", tmp_path / "outside"
    (outside / "vd").mkdir(parents=True)
    (outside / "vd" / "p").write_bytes(b"p")
    (outside / "v").write_bytes(b"v")
    first = {n: rng.randbytes(3) for n in rng.sample(["a", "b", "d/x", "e/f/g"], 2)}
    _publish(out, tmp_path, first)
    # plant: a symlink to outside, a user's files and dirs, random entries in the record
    (out / "lnk").symlink_to("../outside")
    users = {"u/t": b"user", "b2": b"user2"}
    _stage(out, users)
    entries: dict[str, object] = json.loads((out / REC).read_text())["outputs"]
    for name in rng.sample(_NAMES, rng.randint(1, len(_NAMES))):
        path = out / name
        choice = rng.random()
        if choice < 0.4:
            entries[name] = {"kind": "dir"}
        elif choice < 0.8 and path.is_file():
            entries[name] = _file_entry(path)  # the right bytes, through a link too
            if name in users:  # planted ahead: it cannot know the inode of a later file
                entries[name]["inode"] = rng.randrange(1 << 40)
        else:
            entries[name] = {"kind": "symlink", "target": "../outside", "inode": 7}
    _record(out, entries)
    outside_before = _snapshot(outside)
    second = {n: rng.randbytes(3) for n in rng.sample(["a", "c", "d/y"], 2)}
    with contextlib.suppress(PackagingError):
        _publish(out, tmp_path, second, force=rng.random() < 0.3)
    assert _snapshot(outside) == outside_before
    assert all((out / rel).read_bytes() == data for rel, data in users.items())
    assert (out / "lnk").is_symlink() and os.readlink(out / "lnk") == "../outside"
    assert not [p for p in out.iterdir() if ".staging-" in p.name]


def test_read_record_round_trips(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _publish(out, tmp_path, {"d/a.whl": b"1"})
    entries = read_record(out / REC, TOOL, force=False)
    assert sorted(entries) == ["d", "d/a.whl"]
    assert entries["d/a.whl"].inode == (out / "d" / "a.whl").stat().st_ino
