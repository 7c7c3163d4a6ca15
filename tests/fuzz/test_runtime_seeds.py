"""The seeds of the rocm runtime's fuzz readers are good inputs: the devel tarball seeds
expand, the build backend seeds resolve a target family (so mutations start from inputs
that reach every check)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .readers import _backend_seeds, _run_backend, _run_tar, _tar_seeds


@pytest.mark.parametrize("index", range(3))
def test_tar_seeds_expand(tmp_path: Path, index: int) -> None:
    _run_tar(_tar_seeds()[index], tmp_path)
    assert (tmp_path / "site" / "_rocm_sdk_devel" / "lib").is_dir()


@pytest.mark.parametrize("index", range(5))
def test_backend_seeds_resolve(tmp_path: Path, index: int) -> None:
    _run_backend(_backend_seeds()[index], tmp_path)


def test_a_nul_byte_in_a_pax_name_is_refused(tmp_path: Path) -> None:
    # found by the tar fuzzer: a pax path= record with a NUL escaped as ValueError from mkdir
    import sys

    seed = _tar_seeds()[1]
    at = seed.index(b"path=_rocm_sdk_devel/include/") + len(b"path=_rocm_sdk_devel/include/")
    bad = seed[:at] + b"\0" + seed[at + 1 :]
    errors = sys.modules["fuzz_rocm_sdk._errors"]
    with pytest.raises(errors.UnsafeArchiveError, match="contains a NUL byte"):
        _run_tar(bad, tmp_path)
