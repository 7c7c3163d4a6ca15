"""A staging whose contents cannot all be removed keeps its marker, so the next run of the
tool removes what is left as a dead staging (it used to drop the marker first, leaving an
anonymous directory no run would ever claim)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kpack.common import staging as st

TOOL = "build-python-packages"


def test_leftovers_keep_the_marker_and_go_with_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stage = st.Staging.make(tmp_path, TOOL)
    (stage.path / "out" / "dist").mkdir(parents=True)
    (stage.path / "out" / "dist" / "x.whl").write_bytes(b"late")
    with monkeypatch.context() as m:  # a writer outrunning the removal, every pass
        m.setattr(st.shutil, "rmtree", lambda *a, **k: None)
        stage.remove()
    assert (stage.path / st.MARKER).is_file()
    assert (stage.path / "out" / "dist" / "x.whl").is_file()
    assert st.remove_debris(tmp_path, TOOL) == [stage.path]
    assert list(tmp_path.iterdir()) == []


def test_a_file_made_during_the_first_pass_goes_in_the_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stage = st.Staging.make(tmp_path, TOOL)
    (stage.path / "out").mkdir()
    calls = []
    real = shutil.rmtree

    def late_writer(path: Path, ignore_errors: bool = False) -> None:
        real(path, ignore_errors=ignore_errors)
        if not calls:  # a writer makes its directory again just after the first pass
            (stage.path / "out" / "dist").mkdir(parents=True)
        calls.append(path)

    monkeypatch.setattr(st.shutil, "rmtree", late_writer)
    stage.remove()
    assert len(calls) == 2
    assert list(tmp_path.iterdir()) == []
