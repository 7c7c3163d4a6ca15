"""Hostile bundle triples and archive TOCs: nothing is ever written outside the output root.

A target id becomes part of archive, file and directory names, so a triple such as
``hipv4-amdgcn-amd-amdhsa--../../../../X`` must be refused before any file is created.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import msgpack
import pytest

from kpack.archive import KernelInput, write_kpack
from kpack.errors import RocmPackagingError
from kpack.split import split_artifact
from tests.kpack.bundle_fixtures import ROCRAND_LIB, sample_bundle
from tests.kpack.cli.test_cli import one_error_line, run_cli
from tests.kpack.split.test_split import make_fat, manifest, put

EVIL = "../../../../X"  # as long as "gfx90a:xnack+", so it can replace it in place


def snapshot(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    """A deep working dir, so ``../../../../X`` from any output lands inside ``tmp_path``."""
    work = tmp_path / "a" / "b" / "c" / "d" / "e"
    work.mkdir(parents=True)
    return work


def evil_artifact(work: Path, jobs_name: str = "evil_lib_generic") -> Path:
    fat = make_fat(work / "build", "libevil.so", [["gfx900", EVIL], ["gfx1030"]])
    artifact = work / jobs_name
    put(artifact, "lib/stage", "lib/libevil.so", fat.path, 0o755)
    manifest(artifact, "lib/stage")
    return artifact


@pytest.mark.parametrize("jobs", [1, 2])
def test_split_refuses_a_path_triple_before_writing(sandbox: Path, jobs: int) -> None:
    artifact = evil_artifact(sandbox)
    top = sandbox.parents[4]
    before = snapshot(top)
    with pytest.raises(RocmPackagingError, match=r"no valid target id") as info:
        split_artifact(artifact, sandbox / "out", jobs=jobs)
    assert "libevil.so" in str(info.value)
    after = snapshot(top)
    assert after == before, sorted(after - before)


def test_split_cli_one_error_and_nothing_outside(
    sandbox: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    artifact = evil_artifact(sandbox)
    top = sandbox.parents[4]
    before = snapshot(top)
    rc, _, err = run_cli(
        capsys, "split-artifacts", "--artifact-dir", artifact, "--output-dir", sandbox / "out"
    )
    assert rc == 1
    line = one_error_line(err)
    assert "libevil.so" in line and "../../../../X" in line and "no valid target id" in line
    assert snapshot(top) == before


def test_real_rocrand_with_a_path_triple(
    debian_package: object, sandbox: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Debian's real librocrand with one triple's target rewritten to ``../../X``."""
    root = debian_package("librocrand1")  # type: ignore[operator]
    data = bytearray((root / ROCRAND_LIB).read_bytes())
    needle = b"hipv4-amdgcn-amd-amdhsa--gfx1030"
    assert data.count(needle) == 1
    at = data.index(needle) + len(needle) - len("gfx1030")
    data[at : at + 7] = b"../../X"
    artifact = sandbox / "rand_lib_generic"
    put(artifact, "math-libs/rocRAND/stage", "lib/librocrand.so.1.1", bytes(data), 0o755)
    manifest(artifact, "math-libs/rocRAND/stage")
    top = sandbox.parents[4]
    before = snapshot(top)
    rc, _, err = run_cli(
        capsys, "split-artifacts", "--artifact-dir", artifact, "--output-dir", sandbox / "out"
    )
    assert rc == 1 and "'hipv4-amdgcn-amd-amdhsa--../../X'" in one_error_line(err)
    assert snapshot(top) == before
    # kpack extract on the same binary: refused, -o never created
    rc, _, err = run_cli(
        capsys,
        "extract",
        artifact / "math-libs/rocRAND/stage/lib/librocrand.so.1.1",
        "-o",
        sandbox / "x",
    )
    assert rc == 1 and "no valid target id" in one_error_line(err)
    assert snapshot(top) == before


def test_extract_refuses_a_path_triple_in_a_raw_bundle(
    sandbox: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = sandbox / "raw.bundle"
    raw.write_bytes(sample_bundle(["gfx900", EVIL]))
    top = sandbox.parents[4]
    before = snapshot(top)
    rc, _, err = run_cli(capsys, "extract", raw, "-o", sandbox / "x")
    assert rc == 1 and "no valid target id" in one_error_line(err)
    assert snapshot(top) == before  # not even the first, valid code object


def _retarget(path: Path, old: str, new: str) -> None:
    """Rewrite one target key of an archive's MessagePack TOC (the TOC is the file's tail)."""
    data = path.read_bytes()
    offset = int.from_bytes(data[8:16], "little")
    toc = msgpack.unpackb(data[offset:], raw=False)
    for targets in toc["toc"].values():
        if old in targets:
            targets[new] = targets.pop(old)
    path.write_bytes(data[:offset] + msgpack.packb(toc))


@pytest.mark.parametrize("target", ["../../../../X", "gfx942/../../x", "/etc/x", "gfx942 x"])
def test_extract_refuses_a_hostile_toc_target(
    sandbox: Path, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    kpack = sandbox / "a.kpack"
    write_kpack(
        kpack,
        [KernelInput("lib/x.so#0", "gfx942", b"\x7fELFx")],
        group_name="a",
        gfx_arch_family="gfx942",
    )
    _retarget(kpack, "gfx942", target)
    top = sandbox.parents[4]
    before = snapshot(top)
    rc, _, err = run_cli(capsys, "extract", kpack, "-o", sandbox / "x")
    assert rc == 1 and "is not a target id" in one_error_line(err)
    assert snapshot(top) == before


def _raw(sandbox: Path, targets: list[str]) -> Path:
    raw = sandbox / "raw.bundle"
    raw.write_bytes(sample_bundle(targets))
    return raw


def _no_partial(sandbox: Path) -> None:
    """No staging or trash dir is left beside the output or in it."""
    assert not [p for p in sandbox.rglob("*") if ".partial-" in p.name or "-old-" in p.name]


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_extract_output_must_be_a_real_directory(
    sandbox: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    raw = _raw(sandbox, ["gfx900"])
    out = sandbox / "out"
    elsewhere = sandbox / "elsewhere"
    elsewhere.mkdir()
    if kind == "file":
        out.write_text("keep")
    else:
        out.symlink_to(elsewhere)
    rc, _, err = run_cli(capsys, "extract", raw, "-o", out)
    line = one_error_line(err)
    assert rc == 2 and str(out) in line  # -o names no usable directory: a usage error
    assert {"file": "not a directory", "symlink": "symlink"}[kind] in line
    assert list(elsewhere.iterdir()) == []
    _no_partial(sandbox)
    if kind == "file":
        assert out.read_text() == "keep"


def test_extract_into_an_empty_dir_is_fine(
    sandbox: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = _raw(sandbox, ["gfx900", "gfx1030"])
    (sandbox / "out").mkdir()
    rc, out, _ = run_cli(capsys, "extract", raw, "-o", sandbox / "out")
    assert rc == 0 and "extracted 2 code objects" in out
    assert sorted(os.listdir(sandbox / "out")) == [
        ".kpack-extract.json",
        "raw.bundle#0.gfx1030.co",
        "raw.bundle#0.gfx900.co",
    ]
    shutil.rmtree(sandbox / "out")


def test_extract_rerun_replaces_its_own_output_and_leaves_the_rest(
    sandbox: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The project's one output rule (kpack.common.outputs): a re-run replaces what the last
    run wrote, removes what it wrote that this run does not, and leaves other files alone
    (it used to refuse any non-empty output dir)."""
    raw = _raw(sandbox, ["gfx900", "gfx1030"])
    out = sandbox / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert run_cli(capsys, "extract", raw, "-o", out)[0] == 0
    assert run_cli(capsys, "extract", raw, "-o", out)[0] == 0  # the same again
    rc, printed, _ = run_cli(capsys, "extract", raw, "-o", out, "--target", "gfx900")
    assert rc == 0 and printed.splitlines()[-1] == str(out.absolute())
    assert sorted(os.listdir(out)) == [".kpack-extract.json", "notes.txt", "raw.bundle#0.gfx900.co"]
    assert (out / "notes.txt").read_text() == "mine"
    _no_partial(sandbox)


@pytest.mark.parametrize("kind", ["file", "symlink", "edited"])
def test_extract_refuses_a_file_it_did_not_write_unless_forced(
    sandbox: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """A file in the way that extract did not write (or changed since it wrote it) is an
    error naming it, and nothing changes; with --force it is replaced, and a symlink is
    replaced, never written through."""
    raw = _raw(sandbox, ["gfx900"])
    out = sandbox / "out"
    name = "raw.bundle#0.gfx900.co"
    victim = sandbox / "victim.co"
    victim.write_text("victim")
    written = 0
    if kind == "edited":
        assert run_cli(capsys, "extract", raw, "-o", out)[0] == 0
        written = (out / name).stat().st_size
        (out / name).write_text("edited by hand")
    else:
        out.mkdir()
        if kind == "file":
            (out / name).write_text("someone else's")
        else:
            (out / name).symlink_to(victim)
    before = snapshot(sandbox)
    rc, _, err = run_cli(capsys, "extract", raw, "-o", out)
    line = one_error_line(err)
    why = {
        "edited": f"changed since this tool wrote it (size {written} -> 14 bytes)",
        "file": "a file not written by this tool",
        "symlink": "a symlink not written by this tool",
    }[kind]
    whose = "changed since kpack extract wrote it" if kind == "edited" else "not written by"
    whose += "" if kind == "edited" else " kpack extract"
    assert rc == 1 and line == (
        f"error: {out}: cannot publish: 1 in the way, {whose} (see --force); {name}: {why}"
    )
    assert snapshot(sandbox) == before
    if kind == "symlink":
        assert os.readlink(out / name) == str(victim)
    else:
        assert (out / name).read_text() == {"file": "someone else's"}.get(kind, "edited by hand")
    rc, _, _ = run_cli(capsys, "extract", raw, "-o", out, "--force")
    assert rc == 0 and not (out / name).is_symlink()
    assert run_cli(capsys, "extract", raw, "-o", sandbox / "ref")[0] == 0
    assert (out / name).read_bytes() == (sandbox / "ref" / name).read_bytes()
    assert victim.read_text() == "victim"
    _no_partial(sandbox)


def test_a_failed_rerun_leaves_the_last_output_as_it_was(
    sandbox: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No half-written output: a re-run that fails part-way (a hostile name after good code
    objects) leaves the output dir and its record exactly as the last run left them."""
    kpack = sandbox / "a.kpack"
    kernels = [KernelInput("lib/x.so#0", "gfx942", b"\x7fELFx")]
    write_kpack(kpack, kernels, group_name="a", gfx_arch_family="gfx942")
    out = sandbox / "out"
    assert run_cli(capsys, "extract", kpack, "-o", out)[0] == 0
    kernels.append(KernelInput("lib/y.so#0", "gfx90a", b"\x7fELFy"))
    write_kpack(kpack, kernels, group_name="a", gfx_arch_family="gfx942")
    _retarget(kpack, "gfx90a", EVIL)
    before = snapshot(sandbox)
    record = (out / ".kpack-extract.json").read_bytes()
    rc, _, err = run_cli(capsys, "extract", kpack, "-o", out)
    assert rc == 1 and "is not a target id" in one_error_line(err)
    assert snapshot(sandbox) == before
    assert (out / ".kpack-extract.json").read_bytes() == record
    assert (out / "lib/x.so#0.gfx942.co").read_bytes() == b"\x7fELFx"
