"""The wheel splitter's output-directory rule (:mod:`kpack.wheelsplit._publish`) on small
staged outputs: what a re-run replaces, removes and leaves alone, and the undo."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from kpack.errors import PackagingError
from kpack.wheelsplit._publish import few, publish, record_path, staging_name

KEY = "torch-2.9.0-py3-none-linux_x86_64.whl"


def _stage(target: Path, files: dict[str, bytes]) -> Path:
    staging = staging_name(target)
    staging.mkdir(mode=0o700)
    for name, data in files.items():
        (staging / name).parent.mkdir(parents=True, exist_ok=True)
        (staging / name).write_bytes(data)
    return staging


def _listing(target: Path) -> dict[str, bytes]:
    return {
        p.relative_to(target).as_posix(): p.read_bytes()
        for p in sorted(target.rglob("*"))
        if p.is_file()
    }


def test_a_rerun_replaces_its_own_removes_its_stale_and_keeps_the_rest(tmp_path: Path) -> None:
    out = tmp_path / "dist"
    publish([(_stage(out, {"a.whl": b"1", "b.whl": b"1", "t/x": b"1"}), out)], KEY, force=False)
    (out / "other.whl").write_bytes(b"theirs")
    publish([(_stage(out, {"a.whl": b"2", "t/x": b"2"}), out)], KEY, force=False)
    files = _listing(out)
    ours = {k: v for k, v in files.items() if not k.startswith(".")}
    assert ours == {"a.whl": b"2", "t/x": b"2", "other.whl": b"theirs"}
    record = json.loads(record_path(out, KEY).read_text())
    assert sorted(record["outputs"]) == ["a.whl", "t"]
    assert [n for n in os.listdir(out) if n.startswith(".")] == [".kpack-split-wheel"]


def test_a_file_changed_since_is_not_ours(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "dist"
    publish([(_stage(out, {"a.whl": b"1", "b.whl": b"1"}), out)], KEY, force=False)
    (out / "a.whl").write_bytes(b"edited")
    (out / "b.whl").write_bytes(b"edited")
    with pytest.raises(PackagingError, match="1 outputs exist already") as info:
        publish([(_stage(out, {"a.whl": b"2"}), out)], KEY, force=False)
    assert info.value.problems == ("a.whl",)
    assert (out / "a.whl").read_bytes() == b"edited"
    publish([(_stage(out, {"a.whl": b"2"}), out)], KEY, force=True)
    assert (out / "a.whl").read_bytes() == b"2"
    assert (out / "b.whl").read_bytes() == b"edited"  # stale but changed: left alone
    assert "changed since an earlier split wrote it" in caplog.text


def test_another_inputs_outputs_are_not_ours(tmp_path: Path) -> None:
    out = tmp_path / "dist"
    publish([(_stage(out, {"shared.whl": b"1"}), out)], "torchvision-0.24.0-x.whl", force=False)
    with pytest.raises(PackagingError, match="outputs exist already"):
        publish([(_stage(out, {"shared.whl": b"2"}), out)], KEY, force=False)


def test_a_failure_half_way_puts_everything_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, reports = tmp_path / "dist", tmp_path / "dist-split-reports"
    publish(
        [
            (_stage(out, {"a.whl": b"1", "b.whl": b"1"}), out),
            (_stage(reports, {"r": b"1"}), reports),
        ],
        KEY,
        force=False,
    )
    before = (_listing(out), _listing(reports))
    real = os.rename
    calls = []

    def flaky(src: object, dst: object) -> None:
        calls.append(dst)
        if len(calls) == 6:  # the reports' swap, after the dist dir's went through
            raise OSError(28, "No space left on device", str(dst))
        real(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "rename", flaky)
    staged = [_stage(out, {"a.whl": b"2", "c.whl": b"2"}), _stage(reports, {"r": b"2"})]
    with pytest.raises(OSError, match="No space"):
        publish([(staged[0], out), (staged[1], reports)], KEY, force=False)
    monkeypatch.undo()
    assert all(s.is_dir() for s in staged)  # the stagings are the caller's to remove
    for staging in staged:
        shutil.rmtree(staging)
    assert (_listing(out), _listing(reports)) == before
    assert sorted(n for n in os.listdir(out) if n.startswith(".")) == [".kpack-split-wheel"]


def test_an_unreadable_record_needs_force(tmp_path: Path) -> None:
    out = tmp_path / "dist"
    publish([(_stage(out, {"a.whl": b"1"}), out)], KEY, force=False)
    record_path(out, KEY).write_text('{"outputs": {"../escape": "x"}}')
    with pytest.raises(PackagingError, match="unreadable record"):
        publish([(_stage(out, {"a.whl": b"2"}), out)], KEY, force=False)
    publish([(_stage(out, {"a.whl": b"2"}), out)], KEY, force=True)
    assert (out / "a.whl").read_bytes() == b"2"


def test_few() -> None:
    assert few([str(i) for i in range(3)]) == ["0", "1", "2"]
    assert few([str(i) for i in range(3000)]) == ["0", "1", "2", "3", "4", "... and 2995 more"]
