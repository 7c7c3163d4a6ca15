"""Attacks on the one output-directory rule (:mod:`kpack.common.outputs`,
:mod:`kpack.common.output_record`, :mod:`kpack.common.staging`) by someone who can write
into an output dir before a tool runs (a shared workspace, an unpacked ``dist/`` tarball).

The first group are ways through that a review found in the first version of the module
(each test failed then and is defended now); the second group were defended from the
start and are kept because ``test_outputs.py`` does not cover them.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from kpack.common.output_record import FORMAT
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
    link_entry as _link_entry,
)
from tests.kpack.common.outputs_kit import (
    plant_record as _record,
)
from tests.kpack.common.outputs_kit import (
    publish_files as _publish,
)
from tests.kpack.common.outputs_kit import (
    record_doc as _record_doc,
)
from tests.kpack.common.outputs_kit import (
    sha as _sha,
)
from tests.kpack.common.outputs_kit import (
    snapshot as _snapshot,
)

PUBLIC = b"a wheel from PyPI, bytes anyone knows"


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path]:
    """``out/`` (published into once) and ``outside/`` beside it."""
    out, outside = tmp_path / "out", tmp_path / "outside"
    (outside / "victimdir").mkdir(parents=True)
    (outside / "victimdir" / "precious.txt").write_bytes(b"precious")
    (outside / "victim.txt").write_bytes(b"victim")
    _publish(out, tmp_path, {"a.whl": b"a1"})
    return out, outside


# =============================================================================================
# WAYS THROUGH THE REVIEW FOUND (defended now)
# =============================================================================================


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs chown")
def test_inode_reuse_cannot_let_another_users_record_claim_a_later_file(tmp_path: Path) -> None:
    """Defended (issue 29 review). Another user of a shared directory plants the record,
    then creates and deletes a probe file: the file system's next new inode there is often
    the probe's. The record names that inode and the public bytes of a wheel the user copies
    in later. The record is that other user's, so it claims nothing. (Someone acting as the
    user at run time could delete the file directly: no record rule can stop them.)"""
    entry = {"kind": "file", "size": len(PUBLIC), "sha256": _sha(PUBLIC), "inode": 0}
    for attempt in range(50):  # other processes freeing inodes can take the guess first
        out = tmp_path / f"out{attempt}"
        out.mkdir()
        (out / REC).write_text("")  # the record's own inode is taken before probing
        probe = out / "probe"
        probe.write_bytes(b"")
        entry["inode"] = probe.lstat().st_ino
        probe.unlink()
        with open(out / REC, "r+") as handle:  # rewritten in place: no new inode
            handle.write(_record_doc({"torch.whl": entry}))
        os.chown(out / REC, 65534, 65534)  # the other user's
        # later: the user downloads torch.whl into the directory
        (out / "torch.whl").write_bytes(PUBLIC)
        if (out / "torch.whl").lstat().st_ino == entry["inode"]:
            break
    else:
        pytest.skip("this file system did not hand a freed inode out again")
    with contextlib.suppress(PackagingError):
        _publish(out, tmp_path, {"mine.whl": b"m"})
    assert (out / "torch.whl").exists(), "the user's file was deleted"
    assert (out / "torch.whl").read_bytes() == PUBLIC


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs chown")
def test_a_hard_link_whose_inode_another_user_knows_is_not_claimed(tmp_path: Path) -> None:
    """Defended (issue 29 review). A shared store (pip/uv cache, an artifact mirror,
    ``cp -al`` of a release dir) holds a public wheel another user can stat. Their planted
    record names its inode and bytes; the user hard-links the wheel into ``out/``. The record
    is not the user's, so it claims nothing."""
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "torch.whl").write_bytes(PUBLIC)
    out = tmp_path / "out"
    out.mkdir()
    _record(out, {"torch.whl": _file_entry(shared / "torch.whl")})  # planted ahead of time
    os.chown(out / REC, 65534, 65534)  # by another user
    os.link(shared / "torch.whl", out / "torch.whl")  # later: the user's copy
    with contextlib.suppress(PackagingError):
        _publish(out, tmp_path, {"mine.whl": b"m"})
    assert (out / "torch.whl").exists(), "the user's hard-linked copy was deleted"
    assert (shared / "torch.whl").read_bytes() == PUBLIC


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs chown")
def test_a_record_owned_by_another_user_is_honoured(tmp_path: Path) -> None:
    """Was a way through.

    In a shared (e.g. sticky) workspace another user cannot delete the user's file but can
    create the tool's record next to it: they stat and read the file and record its inode
    and bytes. The tool, running as the user, then deletes the user's file. The record is
    never checked to be the running user's own."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.whl").write_bytes(PUBLIC)  # the user's, there before the attacker came
    _record(out, {"mine.whl": _file_entry(out / "mine.whl")})
    os.chown(out / REC, 65534, 65534)  # written by another account
    with contextlib.suppress(PackagingError):
        _publish(out, tmp_path, {"other.whl": b"o"})
    assert (out / "mine.whl").exists(), "the user's file was deleted"
    assert (out / "mine.whl").read_bytes() == PUBLIC


def test_a_lone_surrogate_in_a_recorded_name_is_one_error(tmp_path: Path) -> None:
    """Was a way through: ``"\\ud800"`` (valid JSON) reaches ``safe_relpath``, whose length
    check encodes with ``surrogateescape`` and raises ``UnicodeEncodeError``: a traceback
    at every CLI, and ``--force`` cannot get past it."""
    out = tmp_path / "out"
    _publish(out, tmp_path, {"a.whl": b"1"})
    (out / REC).write_text(
        '{"format": "' + FORMAT + '", "tool": "t", "outputs": {"\\ud800": {"kind": "dir"}}}'
    )
    with pytest.raises(PackagingError, match="untrusted record") as info:
        _publish(out, tmp_path, {"a.whl": b"2"})
    assert str(out / REC) in str(info.value)
    _publish(out, tmp_path, {"a.whl": b"2"}, force=True)  # --force ignores the record
    assert (out / "a.whl").read_bytes() == b"2"


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_a_recorded_name_too_long_for_the_system_is_not_a_raw_os_error(
    tmp_path: Path, kind: str
) -> None:
    """Was a way through: a name of 16 components of 255 bytes passes ``safe_relpath``
    (4095 <= 4096) but ``dest/name`` is over ``PATH_MAX``: ``entry_of`` lets ENAMETOOLONG
    escape from ``_stale`` (and ``_plan``, before publish's ``try``). The run fails with an
    OSError naming a 4 KiB path, not the record, and ``--force`` does not help."""
    out = tmp_path / "out"
    _publish(out, tmp_path, {"a.whl": b"1"})
    name = "/".join(["y" * 255] * 16)
    entry: dict[str, object] = (
        {"kind": "file", "size": 1, "sha256": "0" * 64, "inode": 1}
        if kind == "file"
        else {"kind": "symlink", "target": "x", "inode": 1}
    )
    _record(out, {name: entry})
    try:
        _publish(out, tmp_path, {"b.whl": b"2"})
    except PackagingError as exc:  # one error naming the record is fine too
        assert str(out / REC) in str(exc)
    _publish(out, tmp_path, {"c.whl": b"3"}, force=True)
    assert (out / "c.whl").read_bytes() == b"3"


def test_a_deep_planted_tree_the_record_claims_is_not_a_recursion_error(tmp_path: Path) -> None:
    """Was a way through: ``_ours`` recurses once per directory level. A planted chain of
    600 directories at the name of a new output, each listed as ``{"kind": "dir"}``, raises
    ``RecursionError`` from ``check_outputs``: a traceback at every CLI."""
    out = tmp_path / "out"
    _publish(out, tmp_path, {"a.whl": b"1"})
    entries: dict[str, object] = {}
    rel = "d"
    for _ in range(600):
        entries[rel] = {"kind": "dir"}
        rel += "/d"
    os.makedirs(out / rel.rsplit("/", 1)[0])
    _record(out, entries)
    with contextlib.suppress(PackagingError):
        _publish(out, tmp_path, {"d": b"new"})


@pytest.mark.parametrize("planted", ["report dir", "output dir"])
def test_split_wheel_never_writes_through_a_planted_symlinked_dir(
    tmp_path: Path, planted: str
) -> None:
    """Was a way through: ``kpack split-wheel`` follows a symlink at ``--output-dir`` (a
    ``dist -> ...`` from an unpacked tarball) or at the report dir it picks itself,
    ``<output-dir>-split-reports`` (one planted beside ``dist/`` in a shared workspace):
    staging, outputs and record all land in the link's target. ``kpack extract`` refuses
    a symlinked ``-o``; build-python-packages' ``--dest-dir`` has the same gap."""
    from tests.kpack.wheel_fixtures import make_plain_wheel

    wheel = make_plain_wheel(tmp_path / "in")
    outside = tmp_path / "outside"
    outside.mkdir()
    name = "dist-split-reports" if planted == "report dir" else "dist"
    (tmp_path / name).symlink_to("outside")
    cmd = [sys.executable, "-m", "kpack", "split-wheel", "--input", str(wheel),
           "--output-dir", str(tmp_path / "dist"), "--device-package-prefix", "amd-torch-device",
           "-q"]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path)
    assert "Traceback" not in run.stderr
    assert sorted(os.listdir(outside)) == [], "written through the planted symlink"


def _plain_split(tmp_path: Path) -> tuple[list[str], Path]:
    from tests.kpack.wheel_fixtures import make_plain_wheel

    wheel = make_plain_wheel(tmp_path / "in")
    out = tmp_path / "dist"
    cmd = [sys.executable, "-m", "kpack", "split-wheel", "--input", str(wheel),
           "--output-dir", str(out), "--device-package-prefix", "amd-torch-device",
           "-q"]  # fmt: skip
    assert subprocess.run(cmd, capture_output=True).returncode == 0
    return cmd, out / ".kpack-split-wheel" / f"{wheel.name}.json"


def test_split_wheel_cli_hostile_record_name_is_one_error_line(tmp_path: Path) -> None:
    """Was a way through: the lone-surrogate record through ``kpack split-wheel``."""
    cmd, record = _plain_split(tmp_path)
    text = record.read_text()
    record.write_text(text.replace('"outputs": {', '"outputs": {"\\ud800": {"kind": "dir"},', 1))
    run = subprocess.run(cmd, capture_output=True, text=True)
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr[-400:]
    assert run.stderr.count("\n") == 1 and record.name in run.stderr


def test_build_python_packages_cli_hostile_record_name_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was a way through: the lone-surrogate record through build-python-packages: the
    ``UnicodeEncodeError`` escapes ``main`` (a traceback)."""
    from build_tools.build import RECORD
    from build_tools.build_python_packages import main
    from tests.build_tools.treeutil import add_artifact, write_manifest

    tree, dest = tmp_path / "tree", tmp_path / "out"
    write_manifest(tree)
    add_artifact(tree, "core-hip_lib_generic", "core/clr/stage", {"share/hip/version": b"5.2"})
    argv = ["--artifact-dir", str(tree), "--dest-dir", str(dest), "--version", "1.0", "-q"]
    assert main(argv) == 0
    text = (dest / RECORD).read_text()
    (dest / RECORD).write_text(
        text.replace('"outputs": {', '"outputs": {"\\ud800": {"kind": "dir"},', 1)
    )
    capsys.readouterr()
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and RECORD in err


def test_kpack_extract_cli_deep_claimed_tree_is_one_error_line(tmp_path: Path) -> None:
    """Was a way through: the deep-tree ``RecursionError`` through ``kpack extract``: the
    output names are predictable (``<binary>#<n>.<target>.co``)."""
    from tests.kpack.split.test_split import make_fat

    fat = make_fat(tmp_path / "build", "rocblas", [["gfx942", "gfx90a"]]).path
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "kpack", "extract", str(fat), "-o", str(out)]
    assert subprocess.run(cmd, capture_output=True).returncode == 0
    record = out / ".kpack-extract.json"
    doc = json.loads(record.read_text())
    name = next(n for n, e in doc["outputs"].items() if e["kind"] == "file")
    (out / name).unlink()
    rel = name
    for _ in range(600):
        doc["outputs"][rel] = {"kind": "dir"}
        rel += "/d"
    os.makedirs(out / rel.rsplit("/", 1)[0])
    record.write_text(json.dumps(doc))
    run = subprocess.run(cmd, capture_output=True, text=True)
    assert "Traceback" not in run.stderr, run.stderr[-400:]
    assert run.returncode in (0, 1)


# =============================================================================================
# ATTACKS DEFENDED FROM THE START
# =============================================================================================


def test_force_replacing_a_planted_hard_link_leaves_the_outside_file(
    world: tuple[Path, Path], tmp_path: Path
) -> None:
    """A hard link to an outside file at a new output's name: moved aside and unlinked,
    never written into."""
    out, outside = world
    os.link(outside / "victim.txt", out / "b.whl")
    with pytest.raises(PackagingError, match=r"b\.whl: a file not written by this tool"):
        _publish(out, tmp_path, {"b.whl": b"new"})
    _publish(out, tmp_path, {"b.whl": b"new"}, force=True)
    assert (outside / "victim.txt").read_bytes() == b"victim"
    assert (outside / "victim.txt").stat().st_nlink == 1
    assert (out / "b.whl").read_bytes() == b"new"


def test_a_recorded_hard_link_to_an_outside_file_only_loses_its_inside_name(
    world: tuple[Path, Path], tmp_path: Path
) -> None:
    out, outside = world
    os.link(outside / "victim.txt", out / "h.whl")
    _record(out, {"h.whl": _file_entry(out / "h.whl"), "a.whl": _file_entry(out / "a.whl")})
    _publish(out, tmp_path, {"a.whl": b"a2"})  # h.whl is stale and "ours": it goes
    assert not (out / "h.whl").exists()
    assert (outside / "victim.txt").read_bytes() == b"victim"


@pytest.mark.parametrize("plant", ["hardlink", "symlink"])
def test_the_record_file_planted_as_a_link_to_outside_is_replaced_not_written(
    world: tuple[Path, Path], tmp_path: Path, plant: str
) -> None:
    out, outside = world
    (out / REC).unlink()
    if plant == "hardlink":
        os.link(outside / "victim.txt", out / REC)
    else:
        (out / REC).symlink_to(outside / "victim.txt")
    with pytest.raises(PackagingError, match="untrusted record"):
        _publish(out, tmp_path, {"a.whl": b"a2"})
    _publish(out, tmp_path, {"a.whl": b"a2"}, force=True)
    assert (outside / "victim.txt").read_bytes() == b"victim"
    assert not (out / REC).is_symlink() and json.loads((out / REC).read_text())["tool"] == TOOL


@pytest.mark.parametrize("force", [False, True])
def test_a_symlinked_record_dir_is_never_written_through(
    world: tuple[Path, Path], tmp_path: Path, force: bool
) -> None:
    """Like split-wheel's ``.kpack-split-wheel/<input>.json``: the record's parent planted
    as a symlink to outside (holding a record that claims outputs)."""
    out, outside = world
    rec = ".kpack-split-wheel/in.whl.json"
    _publish(out, tmp_path, {"z.whl": b"z"}, record=rec)
    (out / ".kpack-split-wheel" / "in.whl.json").unlink()
    (out / ".kpack-split-wheel").rmdir()
    (out / ".kpack-split-wheel").symlink_to("../outside")
    before_out, before_outside = _snapshot(out), _snapshot(outside)
    with pytest.raises(PackagingError) as info:
        _publish(out, tmp_path, {"y.whl": b"y"}, record=rec, force=force)
    assert "\n" not in str(info.value)
    assert _snapshot(outside) == before_outside and _snapshot(out) == before_out


@pytest.mark.parametrize(
    "name", ["a/./b", "a//b", "a/", "./a", "a/.", "y" * 256, "/".join(["y" * 200] * 21)]
)
def test_names_a_lookup_could_alias_are_refused(
    world: tuple[Path, Path], tmp_path: Path, name: str
) -> None:
    out, _ = world
    _record(out, {name: {"kind": "dir"}})
    with pytest.raises(PackagingError, match="untrusted record"):
        _publish(out, tmp_path, {"b.whl": b"b"})


@pytest.mark.parametrize("variant", ["case", "nfd"])
def test_a_name_differing_by_case_or_normalization_claims_nothing(
    tmp_path: Path, variant: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    mine = "caf\u00e9.whl"
    (out / mine).write_bytes(PUBLIC)
    claimed = mine.upper() if variant == "case" else unicodedata.normalize("NFD", mine)
    _record(out, {claimed: _file_entry(out / mine)})
    with contextlib.suppress(PackagingError):
        _publish(out, tmp_path, {"b.whl": b"b"})
    assert (out / mine).read_bytes() == PUBLIC


def test_a_file_recorded_as_a_dir_is_neither_removed_nor_replaced(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _publish(out, tmp_path, {"a.whl": b"1"})
    (out / "thesis.tex").write_bytes(b"mine")
    (out / "b.whl").write_bytes(b"mine too")
    _record(out, {"thesis.tex": {"kind": "dir"}, "b.whl": {"kind": "dir"}})
    with pytest.raises(PackagingError, match=r"b\.whl: changed since"):
        _publish(out, tmp_path, {"b.whl": b"ours"})
    _publish(out, tmp_path, {"c.whl": b"c"})
    assert (out / "thesis.tex").read_bytes() == b"mine"
    assert (out / "b.whl").read_bytes() == b"mine too"


def test_replacing_a_recorded_dir_with_recorded_symlinks_to_outside_follows_none(
    world: tuple[Path, Path], tmp_path: Path
) -> None:
    out, outside = world
    (out / "d").mkdir()
    (out / "d" / "ld").symlink_to("../../outside/victimdir")
    (out / "d" / "lf").symlink_to(outside / "victim.txt")
    (out / "s").symlink_to("../outside/victimdir")
    entries = {"d": {"kind": "dir"}, "d/ld": _link_entry(out / "d" / "ld"),
               "d/lf": _link_entry(out / "d" / "lf"), "s": _link_entry(out / "s")}  # fmt: skip
    _record(out, entries)
    before = _snapshot(outside)
    _publish(out, tmp_path, {"d": b"now a file"})  # d replaced, s stale: both "ours"
    assert (out / "d").read_bytes() == b"now a file" and not os.path.lexists(out / "s")
    assert _snapshot(outside) == before


def test_a_fifo_in_the_output_dir_is_never_opened(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _publish(out, tmp_path, {"a.whl": b"1"})
    os.mkfifo(out / "b.whl")
    os.mkfifo(out / "f")
    _record(out, {"b.whl": {"kind": "file", "size": 0, "sha256": _sha(b""), "inode": 1},
                  "f": {"kind": "file", "size": 0, "sha256": _sha(b""),
                        "inode": (out / "f").lstat().st_ino}})  # fmt: skip
    with pytest.raises(PackagingError, match=r"b\.whl"):
        _publish(out, tmp_path, {"b.whl": b"2"})
    _publish(out, tmp_path, {"b.whl": b"2"}, force=True)  # in the way: replaced
    assert (out / "b.whl").read_bytes() == b"2" and os.path.lexists(out / "f")


def test_force_never_removes_a_stale_entry_that_is_not_ours(
    world: tuple[Path, Path], tmp_path: Path
) -> None:
    out, outside = world
    (out / "mine.whl").write_bytes(PUBLIC)
    (out / "lnk").symlink_to("../outside")
    (out / "emptyish").mkdir()
    (out / "emptyish" / "x").write_bytes(b"x")
    entries = {
        "mine.whl": {**_file_entry(out / "mine.whl"), "inode": 1},
        "lnk": {"kind": "symlink", "target": "../outside", "inode": 1},
        "lnk/victim.txt": _file_entry(outside / "victim.txt"),
        "emptyish": {"kind": "dir"},
    }
    _record(out, entries)
    before = _snapshot(outside)
    _publish(out, tmp_path, {"new.whl": b"n"}, force=True)
    assert (out / "mine.whl").read_bytes() == PUBLIC and (out / "lnk").is_symlink()
    assert (out / "emptyish" / "x").exists() and _snapshot(outside) == before


def test_a_record_claiming_itself_and_staging_like_names_removes_nothing(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    _publish(out, tmp_path, {"a.whl": b"1"})
    look = out / ".t.staging-1-abcdef-replaced"
    look.mkdir()
    (look / "f").write_bytes(b"user")
    st = (out / REC).lstat()
    _record(out, {REC: {"kind": "file", "size": st.st_size, "sha256": "0" * 64,
                        "inode": st.st_ino},
                  look.name: {"kind": "dir"}, f"{look.name}/f": {"kind": "dir"}})  # fmt: skip
    _publish(out, tmp_path, {"b.whl": b"2"})
    assert (look / "f").read_bytes() == b"user"
    assert json.loads((out / REC).read_text())["outputs"].keys() == {"b.whl"}


def test_debris_with_a_valid_marker_holding_links_to_outside_follows_none(
    world: tuple[Path, Path],
) -> None:
    """A planted staging-looking dir with a correct, unlocked marker is removed as debris,
    but nothing it links to is touched."""
    out, outside = world
    fake = out / ".t.staging-1-abcdef"
    (fake / "out").mkdir(parents=True)
    (fake / MARKER).write_bytes(f"rocm-packaging staging of {TOOL}\n".encode())
    (fake / "ld").symlink_to(outside / "victimdir")
    (fake / "out" / "ld").symlink_to(outside / "victimdir")
    (fake / "out" / "lf").symlink_to(outside / "victim.txt")
    os.link(outside / "victim.txt", fake / "out" / "hard")
    before = _snapshot(outside)
    assert remove_debris(out, TOOL) == [fake]
    assert _snapshot(outside) == before and not fake.exists()


_FIFO_MARKER = """
import os, sys
from pathlib import Path
from kpack.common.staging import MARKER, remove_debris
out = Path(sys.argv[1])
print(remove_debris(out, "t"))
"""


def test_a_fifo_or_huge_marker_is_not_debris_and_does_not_hang(tmp_path: Path) -> None:
    out = tmp_path / "out"
    fifo = out / ".t.staging-1-aaaaaa"
    huge = out / ".t.staging-1-bbbbbb"
    fifo.mkdir(parents=True)
    huge.mkdir()
    os.mkfifo(fifo / MARKER)
    with open(huge / MARKER, "wb") as handle:
        handle.write(f"rocm-packaging staging of {TOOL}\n".encode())
        handle.truncate(1 << 33)  # sparse 8 GiB
    run = subprocess.run(
        [sys.executable, "-c", _FIFO_MARKER, str(out)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0 and run.stdout.strip() == "[]", run.stderr
    assert fifo.is_dir() and huge.is_dir()


def test_staging_into_a_dir_whose_debris_is_a_symlinked_marker_removes_nothing(
    world: tuple[Path, Path],
) -> None:
    out, outside = world
    fake = out / ".t.staging-1-cccccc"
    fake.mkdir()
    (outside / MARKER).write_bytes(f"rocm-packaging staging of {TOOL}\n".encode())
    (fake / MARKER).symlink_to(outside / MARKER)
    (fake / "keep").write_bytes(b"k")
    with staging(out, TOOL):
        pass
    assert (fake / "keep").exists() and (outside / MARKER).exists()
