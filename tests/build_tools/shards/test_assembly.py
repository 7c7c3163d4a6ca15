"""Tests for build_tools.assemble_shards on synthetic shard dist directories.

Every shard is written with our own wheel and sdist writers (tiny members, fixed epoch),
named like the real kpack-split outputs, so equal generic files are byte-identical.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from build_tools.assemble_shards import main, plan_assembly, scan_shards, write_assembly
from build_tools.report import make_report, render_markdown
from kpack.common.budget import WheelSize
from kpack.common.cli import format_size
from kpack.errors import PackagingError, UsageError
from kpack.wheelfile import Member, write_wheel
from kpack.wheelfile._sdist import write_sdist
from tests.build_tools.conftest import build_dist
from tests.conftest import require
from tests.dist_listing import read_listing

VERSION = "7.99.0.dev0"
TAG = "py3-none-linux_x86_64"
EPOCH = 1_700_000_000
GENERIC = ("rocm-sdk-core", "rocm-sdk-libraries", "rocm-sdk-devel", "rocm-profiler")


def _metadata(name: str, version: str) -> bytes:
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()


def _wheel(dest: Path, name: str, version: str, payload: bytes) -> Path:
    module = name.replace("-", "_")
    return write_wheel(
        dest,
        dist_name=name,
        version=version,
        tag=TAG,
        members=[Member(f"{module}/data.bin", payload)],
        metadata=_metadata(name, version),
        epoch=EPOCH,
        jobs=1,
    ).path


def make_shard(
    dest: Path,
    targets: tuple[str, ...],
    *,
    version: str = VERSION,
    core_payload: bytes = b"core",
    report: bool = True,
    budget: int | None = None,
) -> Path:
    """``dest/dist`` as a shard's builder writes it (rocm sdist, generic wheels, one device
    wheel per target) with its report next to it in ``dest`` (``budget``: as built with
    ``--max-wheel-size``); returns ``dest/dist``."""
    dest = dest / "dist"
    dest.mkdir(parents=True)
    write_sdist(
        dest,
        dist_name="rocm",
        version=version,
        files=[Member("setup.py", b"from setuptools import setup\nsetup()\n")],
        pkg_info=_metadata("rocm", version),
        epoch=EPOCH,
    )
    generic = [
        _wheel(dest, name, version, core_payload if name == "rocm-sdk-core" else name.encode())
        for name in GENERIC
    ]
    device = {t: _wheel(dest, f"rocm-sdk-device-{t}", version, t.encode() * 50) for t in targets}
    if report:
        write_report(dest.parent, version, generic, device, budget=budget)
    return dest


def write_report(
    dest: Path,
    version: str,
    generic: list[Path],
    device: dict[str, Path],
    *,
    budget: int | None = None,
) -> None:
    """report.json / report.md as the builder writes them (``build_tools.report``)."""
    kinds = {"rocm_sdk_core": "core", "rocm_sdk_libraries": "libraries"}
    used = [(kinds[p.name.split("-")[0]], p) for p in generic if p.name.split("-")[0] in kinds]
    report = make_report(version, used, sorted(device.items()))
    if budget is not None:
        wheels = sorted(p for p in [*generic, *device.values()] if p.suffix == ".whl")
        rows = tuple(WheelSize(name=p.name, size=p.stat().st_size, budget=budget) for p in wheels)
        report = replace(report, budget=rows)
    (dest / "report.json").write_text(report.to_json(), encoding="utf-8")
    (dest / "report.md").write_text(render_markdown(report), encoding="utf-8")


def run(*argv: str | Path) -> int:
    return main([str(a) for a in argv])


def test_merges_two_shards(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = make_shard(tmp_path / "a", ("gfx1200",))
    b = make_shard(tmp_path / "b", ("gfx1201",))
    dest = tmp_path / "out"
    families = ("--linux-amdgpu-families", "gfx120X-all")
    code = run("--input", a, b, "--dest-dir", dest, *families, "--version", "7.99.0-dev0")
    assert code == 0, capsys.readouterr().err
    # shaped as one build's --dest-dir: dist/, the merged report beside it, the record
    assert sorted(p.name for p in dest.iterdir()) == [
        ".assemble-shards.json",
        "dist",
        "report.json",
        "report.md",
    ]
    out = dest / "dist"
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(  # distributions only
        [p.name for p in a.iterdir()] + [f"rocm_sdk_device_gfx1201-{VERSION}-{TAG}.whl"]
    )
    for p in a.iterdir():
        if p.suffix in (".whl", ".gz"):
            assert (out / p.name).read_bytes() == p.read_bytes()
    *table, last = capsys.readouterr().out.splitlines()
    assert last == str(out)  # the last line: where the dist went
    listing = read_listing("\n".join(table))  # the list within 80 columns, every file once
    assert listing.title == f"Assembled from 2 shards: version {VERSION}, tag {TAG}"
    assert sorted(listing.rows) == names


def test_identical_device_wheel_in_two_shards_is_fine(tmp_path: Path) -> None:
    a = make_shard(tmp_path / "a", ("gfx1200", "gfx1201"))
    b = make_shard(tmp_path / "b", ("gfx1201",))
    plan = plan_assembly(scan_shards([a, b]))
    assert [f.target for f in plan.files if f.target] == ["gfx1200", "gfx1201"]


def test_generic_difference_names_both_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = make_shard(tmp_path / "a", ("gfx1200",))
    b = make_shard(tmp_path / "b", ("gfx1201",), core_payload=b"core, rebuilt")
    assert run("--input", a, "--input", b, "--dest-dir", tmp_path / "out") == 1
    err = capsys.readouterr().err
    core = f"rocm_sdk_core-{VERSION}-{TAG}.whl"
    assert err.startswith("error: cannot assemble the shards")
    assert "generic file differs" in err
    assert str(a / core) in err and str(b / core) in err
    assert not (tmp_path / "out").exists()


def test_generic_missing_from_a_shard(tmp_path: Path) -> None:
    a = make_shard(tmp_path / "a", ("gfx1200",))
    b = make_shard(tmp_path / "b", ("gfx1201",))
    (b / f"rocm_profiler-{VERSION}-{TAG}.whl").unlink()
    with pytest.raises(PackagingError, match=r"rocm_profiler-.* missing from .*b"):
        plan_assembly(scan_shards([a, b]))


def test_colliding_device_wheels(tmp_path: Path) -> None:
    a = make_shard(tmp_path / "a", ("gfx1200",))
    b = make_shard(tmp_path / "b", ("gfx1201",))
    _wheel(b, "rocm-sdk-device-gfx1200", VERSION, b"other kernels")
    with pytest.raises(PackagingError, match="device wheel collides") as info:
        plan_assembly(scan_shards([a, b]))
    name = f"rocm_sdk_device_gfx1200-{VERSION}-{TAG}.whl"
    assert str(a / name) in str(info.value) and str(b / name) in str(info.value)


def test_missing_targets_against_family_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = make_shard(tmp_path / "a", ("gfx1200",))
    b = make_shard(tmp_path / "b", ("gfx942",))
    argv = ("--input", a, "--input", b, "--dest-dir", tmp_path / "out")
    assert run(*argv, "--linux-amdgpu-families", "gfx120X-all;gfx94X-dcgpu,dcgpu-all") == 1
    err = capsys.readouterr().err
    missing = "missing device wheels for expected targets: gfx908, gfx90a, gfx950, gfx1201, gfx1250"
    assert missing in err  # natural order
    assert "gfx942" not in err.split("targets:")[1]
    assert not (tmp_path / "out").exists()
    # As in the builder, Windows families count too; without any flag nothing is checked.
    both = ("--linux-amdgpu-families", "gfx1200", "--windows-amdgpu-families", "gfx120X-all")
    assert run(*argv, *both) == 1
    assert "expected targets: gfx1201\n" in capsys.readouterr().err + "\n"
    assert run(*argv) == 0
    assert "notice: no family flag given" in capsys.readouterr().err
    argv = (*argv[:-1], tmp_path / "out2")
    assert run(*argv, "--linux-amdgpu-families", "gfx999X") == 2  # a usage error
    assert "unknown GPU family 'gfx999X'" in capsys.readouterr().err


def test_mixed_versions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = make_shard(tmp_path / "a", ("gfx1200",))
    b = make_shard(tmp_path / "b", ("gfx1201",), version="7.99.0.dev1")
    assert run("--input", a, "--input", b, "--dest-dir", tmp_path / "out") == 1
    err = capsys.readouterr().err
    assert "mixed versions: 7.99.0.dev0" in err and "mixed versions: 7.99.0.dev1" in err


def test_version_flag_must_match(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = make_shard(tmp_path / "a", ("gfx1200",))
    assert run("--input", a, "--dest-dir", tmp_path / "out", "--version", "7.99.0") == 1
    assert "--version 7.99.0 does not match the shards' 7.99.0.dev0" in capsys.readouterr().err
    assert run("--input", a, "--dest-dir", tmp_path / "out", "--version", "x y") == 2
    assert "not a PEP 440 version" in capsys.readouterr().err


def test_required_dists(tmp_path: Path) -> None:
    a = make_shard(tmp_path / "a", ("gfx1200",))
    (a / f"rocm-{VERSION}.tar.gz").unlink()
    (a / f"rocm_sdk_libraries-{VERSION}-{TAG}.whl").unlink()
    with pytest.raises(PackagingError) as info:
        plan_assembly(scan_shards([a]))
    assert info.value.problems[:2] == (
        "required dist missing: the rocm sdist",
        "required dist missing: the rocm-sdk-libraries wheel",
    )


def test_unexpected_files_and_bad_names(tmp_path: Path) -> None:
    a = make_shard(tmp_path / "a", ("gfx1200",))
    (a / "notes.txt").write_text("hi")
    (a / "not-a-wheel.whl").write_bytes(b"")
    (a / "sub").mkdir()
    with pytest.raises(PackagingError) as info:
        scan_shards([a])
    text = "\n".join(info.value.problems)
    assert "notes.txt: unexpected file" in text
    assert "not-a-wheel.whl: invalid archive name" in text
    assert "sub: a directory" in text


def test_output_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = make_shard(tmp_path / "a", ("gfx1200",))
    b = make_shard(tmp_path / "b", ("gfx1201",))
    plan = plan_assembly(scan_shards([a, b]))
    import build_tools.shards.write as mod

    def fail(*_args: object, **_kwargs: object) -> None:
        raise PackagingError("index exploded")

    monkeypatch.setattr(mod, "stage_simple_index", fail)
    with pytest.raises(PackagingError, match="index exploded"):
        write_assembly(plan, tmp_path / "out", index=tmp_path / "index")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]  # no temp dirs either
    with pytest.raises(PackagingError, match="index exploded"):  # the index inside OUT
        write_assembly(plan, tmp_path / "out", index=tmp_path / "out" / "simple")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]  # no temp dirs either


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every entry under ``root`` but the records (they hold times): a directory is None."""
    return {
        str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
        for p in sorted(root.rglob("*"))
        if not p.name.startswith(".assemble-shards.")
    }


def test_a_rerun_replaces_what_it_wrote_and_leaves_the_rest(tmp_path: Path) -> None:
    """One output-directory rule (issue 22): the same run again gives the same bytes and
    keeps other files; a run with less removes what it no longer writes."""
    a = make_shard(tmp_path / "a", ("gfx1200",))
    b = make_shard(tmp_path / "b", ("gfx1201",))
    m = tmp_path / "m"
    index = m / "index"
    assert run("--input", a, b, "--dest-dir", m, "--index", index) == 0
    first = _tree(m)
    assert sorted(p.name for p in m.glob(".*")) == [
        ".assemble-shards.index.json",  # the index's, beside it
        ".assemble-shards.json",  # the record of --dest-dir, in it (as the builder's)
    ]
    others = {"dist/torch-2.9.0-cp312-cp312-linux_x86_64.whl": b"someone else's", "notes": b"x"}
    others |= {"index/torch/index.html": b"<html>", "report.txt": b"mine"}
    (index / "torch").mkdir()
    for rel, data in others.items():
        (m / rel).write_bytes(data)
    assert run("--input", a, b, "--dest-dir", m, "--index", index) == 0
    assert _tree(m) == {**first, "index/torch": None, **others}
    assert run("--input", a, "--dest-dir", m, "--index", index) == 0  # without gfx1201
    gone = [rel for rel in first if "gfx1201" in rel]
    assert gone and not any((m / rel).exists() for rel in gone)
    assert all((m / rel).read_bytes() == data for rel, data in others.items())


DEVICE_1201 = f"rocm_sdk_device_gfx1201-{VERSION}-{TAG}.whl"


def test_a_file_it_did_not_write_is_replaced_only_with_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = make_shard(tmp_path / "a", ("gfx1200",))
    b = make_shard(tmp_path / "b", ("gfx1201",))
    m = tmp_path / "m"
    out = m / "dist"
    out.mkdir(parents=True)
    (out / DEVICE_1201).write_bytes(b"someone else's")  # at the place of an output
    (out / "old.whl").write_bytes(b"stale")  # elsewhere: left alone
    before = _tree(m)
    assert run("-q", "--input", a, b, "--dest-dir", m) == 1
    assert capsys.readouterr().err == (
        f"error: {m}: cannot publish: 1 in the way, not written by assemble-shards "
        f"(see --force)\n  - dist/{DEVICE_1201}: a file not written by this tool\n"
    )
    assert _tree(m) == before
    assert run("-q", "--input", a, b, "--dest-dir", m, "--force") == 0
    assert (out / DEVICE_1201).read_bytes() == (b / DEVICE_1201).read_bytes()
    assert (out / "old.whl").read_bytes() == b"stale"
    (m / "report.md").write_text("edited since")  # changed since: no longer its own
    assert run("-q", "--input", a, b, "--dest-dir", m) == 1
    assert "  - report.md: changed since this tool wrote it (size " in capsys.readouterr().err
    assert (m / "report.md").read_text() == "edited since"
    assert run("-q", "--input", a, b, "--dest-dir", m, "--force") == 0
    assert (m / "report.md").read_bytes() != b"edited since"


def test_a_long_list_in_the_way_is_shown_short(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = make_shard(tmp_path / "a", ("gfx1200",))
    out = tmp_path / "m" / "dist"
    out.mkdir(parents=True)
    for p in a.iterdir():  # every output but the reports: 6 files
        (out / p.name).write_bytes(b"x")
    assert run("-q", "--input", a, "--dest-dir", out.parent) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (
        f"error: {out.parent}: cannot publish: 6 in the way, not written by assemble-shards "
        "(see --force)"
    )
    assert len(err) == 7 and err[-1] == "  - ... and 1 more"


def test_report_merge_equals_an_unsharded_build(tmp_path: Path) -> None:
    a = make_shard(tmp_path / "a", ("gfx1200",))
    b = make_shard(tmp_path / "b", ("gfx1201", "gfx942"))
    full = make_shard(tmp_path / "full", ("gfx1200", "gfx1201", "gfx942"))
    out = tmp_path / "out" / "dist"
    assert run("--input", b, "--input", a, "--dest-dir", out.parent) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in full.iterdir())
    for p in full.iterdir():  # wheels and sdist
        assert (out / p.name).read_bytes() == p.read_bytes(), p.name
    for name in ("report.json", "report.md"):  # next to dist/, as the builder writes them
        assert (out.parent / name).read_bytes() == (full.parent / name).read_bytes(), name
    doc = json.loads((out.parent / "report.json").read_text())
    assert doc["mode"] == "kpack" and doc["version"] == VERSION
    assert [r["target"] for r in doc["targets"]] == ["gfx942", "gfx1200", "gfx1201"]  # natural
    # a shard's own rows count only its share of the device wheels
    shard = json.loads((b.parent / "report.json").read_text())
    assert shard["targets"][0]["fat_download_bytes"] < doc["targets"][0]["fat_download_bytes"]


def test_report_skipped_when_a_shard_has_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = make_shard(tmp_path / "a", ("gfx1200",))
    b = make_shard(tmp_path / "b", ("gfx1201",), report=False)
    out = tmp_path / "out" / "dist"
    assert run("--input", a, "--input", b, "--dest-dir", out.parent) == 0
    assert f"notice: no report.json in {b}: report merge skipped" in capsys.readouterr().err
    assert not (out.parent / "report.json").exists() and not (out.parent / "report.md").exists()


def test_the_size_budget_is_carried_into_the_merged_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 32, item 4: every wheel against the budget, in the merged report as in an
    unsharded build's, and in the list on stdout."""
    budget = 4_000
    a = make_shard(tmp_path / "a", ("gfx1200",), budget=budget)
    b = make_shard(tmp_path / "b", ("gfx1201", "gfx942"), budget=budget)
    full = make_shard(tmp_path / "full", ("gfx1200", "gfx1201", "gfx942"), budget=budget)
    dest = tmp_path / "out"
    assert run("--input", b, "--input", a, "--dest-dir", dest) == 0
    for name in ("report.json", "report.md"):
        assert (dest / name).read_bytes() == (full.parent / name).read_bytes(), name
    rows = json.loads((dest / "report.json").read_text())["budget"]
    wheels = {p.name: p.stat().st_size for p in (dest / "dist").glob("*.whl")}
    assert {r["name"]: r["size"] for r in rows} == wheels  # an oracle: the files' sizes
    assert {r["budget"] for r in rows} == {budget}
    table = (dest / "report.md").read_text().split("## Size budget", 1)[1]
    assert "| wheel | size | --max-wheel-size 4.0 kB |" in table
    assert all(f"| {n} | " in table and "% of 4.0 kB |" in table for n in wheels)
    listing = read_listing("\n".join(capsys.readouterr().out.splitlines()[:-1]))
    assert listing.header == ("package", "size", "% of 4.0 kB")
    shares = {n: cells[1] for n, cells in listing.rows.items()}
    assert shares == {
        n: str(round(100 * wheels[n] / budget)) if n in wheels else "-" for n in listing.rows
    }


def test_shards_built_with_other_budgets_are_one_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = make_shard(tmp_path / "a", ("gfx1200",), budget=500_000_000)
    b = make_shard(tmp_path / "b", ("gfx1201",))
    c = make_shard(tmp_path / "c", ("gfx942",), budget=400_000_000)
    assert run("--input", a, b, c, "--dest-dir", tmp_path / "out") == 1
    err = capsys.readouterr().err
    needle = (
        "  - the shards' report.json files disagree on the size budget (--max-wheel-size): "
        f"none in {b}; 400.0 MB in {c}; 500.0 MB in {a}\n"
    )
    assert needle in err and err.count("size budget") == 1, err
    assert not (tmp_path / "out").exists()


def test_a_wheel_over_the_budget_its_report_gives(tmp_path: Path) -> None:
    """A report's budget is checked against the files, never taken on trust: a wheel over
    it, a row of the wrong size or for no wheel, a wheel without a row."""
    a = make_shard(tmp_path / "a", ("gfx1200",), budget=1_000)
    doc = json.loads((a.parent / "report.json").read_text())
    core = f"rocm_sdk_core-{VERSION}-{TAG}.whl"
    doc["budget"] = [r for r in doc["budget"] if r["name"] != core]
    doc["budget"][0]["size"] += 1
    doc["budget"].append({"name": "other.whl", "size": 1, "budget": 1_000})
    (a.parent / "report.json").write_text(json.dumps(doc))
    with pytest.raises(PackagingError) as info:
        plan_assembly(scan_shards([a]))
    text = "\n".join(info.value.problems)
    assert f"report.json has no budget row for {core}" in text
    assert "report.json: budget row for 'other.whl', no wheel's" in text
    assert f"report.json: {doc['budget'][0]['name']} budget size" in text
    device = f"rocm_sdk_device_gfx1200-{VERSION}-{TAG}.whl"
    size = (a / device).stat().st_size
    assert f"{device}: {format_size(size)}, over the limit of 1.0 kB (--max-wheel-size)" in text


@pytest.mark.parametrize(
    ("budget", "problem"),
    [
        ("big", "budget: expected a list, got 'big'"),
        ([5], "budget[0]: expected an object"),
        ([{"name": "x.whl", "size": 1, "budget": 0}], "budget[0].budget: expected int >= 1"),
        ([{"name": "x.whl", "size": -1, "budget": 9}], "budget[0].size: expected int >= 0"),
        ([{"name": 3, "size": 1, "budget": True}], "budget[0].name: expected str, got 3"),
    ],
)
def test_bad_budget_rows(tmp_path: Path, budget: object, problem: str) -> None:
    a = make_shard(tmp_path / "a", ("gfx1200",))
    doc = json.loads((a.parent / "report.json").read_text())
    doc["budget"] = budget
    (a.parent / "report.json").write_text(json.dumps(doc))
    with pytest.raises(PackagingError) as info:
        scan_shards([a])
    assert problem in "\n".join(info.value.problems)


def test_report_inconsistent_with_files(tmp_path: Path) -> None:
    a = make_shard(tmp_path / "a", ("gfx1200",))
    b = make_shard(tmp_path / "b", ("gfx1201",))
    doc = json.loads((a.parent / "report.json").read_text())
    doc["generic"][0]["size"] = "big"
    (a.parent / "report.json").write_text(json.dumps(doc))
    with pytest.raises(PackagingError, match=r"generic\[0\]\.size: expected int, got 'big'"):
        scan_shards([a])
    doc["generic"][0]["size"] = 5
    doc["device_wheels"][0]["size"] += 1
    (a.parent / "report.json").write_text(json.dumps(doc))
    with pytest.raises(PackagingError) as info:
        plan_assembly(scan_shards([a, b]))
    text = "\n".join(info.value.problems)
    assert f"rocm_sdk_device_gfx1200-{VERSION}-{TAG}.whl size" in text
    assert "size 5, but the file has" in text
    assert f"{b}'s report.json: generic rows differ" in text
    doc["device_wheels"] = []
    (a.parent / "report.json").write_text(json.dumps(doc))
    with pytest.raises(PackagingError, match="no device_wheels row for rocm_sdk_device_gfx1200"):
        plan_assembly(scan_shards([a]))


def test_index_written(tmp_path: Path) -> None:
    a = make_shard(tmp_path / "a", ("gfx1200",))
    out, index = tmp_path / "out", tmp_path / "index"
    assert run("--input", a, "--dest-dir", out, "--index", index) == 0
    projects = sorted(p.name for p in index.iterdir() if p.is_dir())
    assert projects == sorted(["rocm", *GENERIC, "rocm-sdk-device-gfx1200"])
    page = (index / "rocm-sdk-core" / "index.html").read_text()
    assert f'href="rocm_sdk_core-{VERSION}-{TAG}.whl#sha256=' in page


def test_index_and_dist_must_be_apart(tmp_path: Path) -> None:
    a = make_shard(tmp_path / "a", ("gfx1200",))
    plan = plan_assembly(scan_shards([a]))
    for index in ("out/dist", "out/dist/simple", "out"):
        with pytest.raises(UsageError, match=r"--index .* and DEST/dist \(.*\) must be apart"):
            write_assembly(plan, tmp_path / "out", index=tmp_path / index)
    assert not (tmp_path / "out").exists()
    write_assembly(plan, tmp_path / "out", index=tmp_path / "out" / "simple")  # beside dist/
    assert (tmp_path / "out/simple/rocm-sdk-core/index.html").is_file()
    assert (tmp_path / "out/.assemble-shards.simple.json").is_file()


# --- real: the kpack sample tree, built in two shards, as the CI workflow does -------------


@pytest.fixture(scope="module")
def kpack_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require(shutil.which("hipcc") is not None, "hipcc is not installed")
    from sample_tree.make_sample_tree import make_sample_tree

    out = tmp_path_factory.mktemp("kpack") / "artifacts"
    return make_sample_tree(out, cache_dir=None, family="gfx90a-dcgpu", kpack_split=True)


@pytest.mark.real
@pytest.mark.compile
@pytest.mark.slow
def test_real_shards_assemble_into_the_full_build(kpack_tree: Path, tmp_path: Path) -> None:
    family = ("--linux-amdgpu-families", "gfx90a-dcgpu")
    full = build_dist(kpack_tree, tmp_path / "full", *family)
    shards = [
        build_dist(kpack_tree, tmp_path / f"s{i}", *family, "--targets", targets)
        for i, targets in enumerate(("gfx90a,gfx900", "gfx1030,gfx803,gfx906,gfx908"))
    ]
    out, index = tmp_path / "dist", tmp_path / "index"
    inputs = [a for s in shards for a in ("--input", s)]
    argv = (*inputs, "--dest-dir", tmp_path, "--index", index, *family, "--version", VERSION)
    assert run(*argv) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in full.iterdir())
    for p in full.iterdir():  # every package
        assert (out / p.name).read_bytes() == p.read_bytes(), p.name
    for name in ("report.json", "report.md"):  # both reports, next to dist/
        assert (tmp_path / name).read_bytes() == (full.parent / name).read_bytes(), name
    # install from the PEP 503 index alone (setuptools, the sdist's backend, comes first)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = str(venv / "bin/python")
    subprocess.run([py, "-m", "pip", "install", "-q", "setuptools>=70.2.0"], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env |= {"PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("ROCM_SDK_TARGET_FAMILY", None)
    proc = subprocess.run(
        [
            py,
            "-m",
            "pip",
            "install",
            "--isolated",
            "--no-build-isolation",
            "--index-url",
            index.as_uri(),
            f"rocm[libraries,device-gfx90a]=={VERSION}",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    test = subprocess.run(
        [str(venv / "bin/rocm-sdk"), "test"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=900,
    )
    assert test.returncode == 0, test.stdout[-3000:] + test.stderr[-6000:]


# --- legacy sets (libraries per family, no device wheels) -----------------------------------


def make_legacy_shard(dest: Path, family: str = "gfx90a-dcgpu", *, report: bool = True) -> Path:
    """``dest/dist`` as the builder writes a one-family legacy set, its report beside it."""
    from build_tools.report import make_legacy_report

    dist = dest / "dist"
    dist.mkdir(parents=True)
    write_sdist(
        dist,
        dist_name="rocm",
        version=VERSION,
        files=[Member("setup.py", b"from setuptools import setup\nsetup()\n")],
        pkg_info=_metadata("rocm", VERSION),
        epoch=EPOCH,
    )
    names = {"core": "rocm-sdk-core", "libraries": f"rocm-sdk-libraries-{family}"}
    names |= {"devel": "rocm-sdk-devel"}
    built = [
        (kind, family, _wheel(dist, name, VERSION, name.encode())) for kind, name in names.items()
    ]
    if report:
        legacy = make_legacy_report(VERSION, built)
        (dest / "report.json").write_text(legacy.to_json(), encoding="utf-8")
        (dest / "report.md").write_text(render_markdown(legacy), encoding="utf-8")
    return dist


@pytest.mark.parametrize("report", [True, False], ids=["report", "no-report"])
def test_a_legacy_set_is_assembled_with_its_report_and_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], report: bool
) -> None:
    """Once refused (``mode: expected 'kpack', got 'legacy'``): a legacy set comes out as it
    went in, with its report (mode and per-family rows kept) and its index."""
    a = make_legacy_shard(tmp_path / "a", report=report)
    b = make_legacy_shard(tmp_path / "b", report=report)  # the same set, built twice
    out, index = tmp_path / "out" / "dist", tmp_path / "index"
    families = ("--linux-amdgpu-families", "gfx90a-dcgpu")
    assert run("--input", a, b, "--dest-dir", out.parent, "--index", index, *families) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in a.iterdir())
    assert all((out / p.name).read_bytes() == p.read_bytes() for p in a.iterdir())
    if report:
        assert (out.parent / "report.json").read_text() == (a.parent / "report.json").read_text()
    projects = sorted(p.name for p in index.iterdir() if p.is_dir())
    assert projects == [
        "rocm",
        "rocm-sdk-core",
        "rocm-sdk-devel",
        "rocm-sdk-libraries-gfx90a-dcgpu",
    ]
    assert (index / "rocm-sdk-core" / f"rocm_sdk_core-{VERSION}-{TAG}.whl.metadata").is_file()
    capsys.readouterr()
    assert (
        run("--input", a, "--dest-dir", tmp_path / "o2", "--linux-amdgpu-families", "gfx110X-all")
        == 1
    )
    assert "missing libraries wheels for expected families: gfx110X-all" in capsys.readouterr().err


def test_legacy_and_kpack_sets_do_not_mix(tmp_path: Path) -> None:
    a = make_legacy_shard(tmp_path / "a")
    b = make_shard(tmp_path / "b", ("gfx1200",))
    with pytest.raises(PackagingError) as info:
        plan_assembly(scan_shards([a, b]))
    assert f"kpack and legacy sets cannot be assembled together: kpack in {b}; legacy in {a}" in (
        info.value.problems
    )


def test_a_legacy_set_without_its_libraries_wheel(tmp_path: Path) -> None:
    a = make_legacy_shard(tmp_path / "a", report=False)
    (a / f"rocm_sdk_libraries_gfx90a_dcgpu-{VERSION}-{TAG}.whl").unlink()
    (a / f"rocm_sdk_core-{VERSION}-{TAG}.whl").unlink()
    with pytest.raises(PackagingError) as info:
        plan_assembly(scan_shards([a]))  # no report, no family wheel: read as a kpack set
    assert "required dist missing: the rocm-sdk-libraries wheel" in info.value.problems
    b = make_legacy_shard(tmp_path / "b")
    (b / f"rocm_sdk_libraries_gfx90a_dcgpu-{VERSION}-{TAG}.whl").unlink()
    with pytest.raises(PackagingError) as info:
        plan_assembly(scan_shards([b]))
    assert "required dist missing: a rocm-sdk-libraries-<family> wheel" in info.value.problems
