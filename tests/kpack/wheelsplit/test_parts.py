"""The wheel splitter keeps every archive within what every reader loads (archive parts).

Debian's real librocrand, twice in one fat wheel (two binaries, so each target has two
code objects), split with a small archive limit injected: every archive of every device
wheel fits the limit and reads under HRX's rules, the markers name the parts their kernels
are in, and the runtime's lookup finds every kernel once the wheels are installed together.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from kpack import wheelsplit as spw
from kpack.resolve import read_kpack_ref, resolve_binary
from kpack.transform import extract_kernels
from kpack.wheelsplit import _kernels
from tests.kpack.hrx_reader import hrx_read
from tests.kpack.wheel_fixtures import ROCRAND_LIB, TWIN_LIBS, make_twin_wheel

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def rocrand(debian_package: Callable[[str], Path]) -> Path:
    return debian_package("librocrand1") / ROCRAND_LIB


def test_device_archives_are_cut_in_parts_every_reader_loads(
    rocrand: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fat = make_twin_wheel(tmp_path / "in", rocrand)
    originals = {(k.index, k.target): k.read() for k in extract_kernels(rocrand)}
    largest = max(len(d) for d in originals.values())
    limit = largest + largest // 4 + 4096  # one of the largest code objects per part
    monkeypatch.setattr(_kernels, "MAX_ARCHIVE_BYTES", limit)
    out = tmp_path / "out"
    options = spw.SplitOptions(overlay_root="torch/", device_package_prefix="amd-torch-device")
    spw.split_wheel(fat, out, options)
    install = tmp_path / "site"
    names: list[str] = []
    for wheel in sorted(out.glob("*.whl")):
        if wheel.name.count("-") == 4:  # host and device wheels, not the variants
            with zipfile.ZipFile(wheel) as z:
                z.extractall(install)
                names += [n for n in z.namelist() if n.endswith(".kpack")]
    assert any("/torch-part2_" in n for n in names), names
    found: dict[tuple[str, str], bytes] = {}
    for name in names:
        path = install / name
        assert path.stat().st_size <= limit, name
        contents = hrx_read(path)
        assert not set(contents) & set(found)
        found.update(contents)
    expected = {
        (f"{rel.removeprefix('torch/')}#{index}", target): data
        for rel in TWIN_LIBS
        for (index, target), data in originals.items()
    }
    assert found == expected
    for rel in TWIN_LIBS:
        lib = install / rel
        ref = read_kpack_ref(lib)
        assert ref is not None
        up = "../" * (rel.count("/") - 1)
        assert ref.search_paths[0] == f"{up}.kpack/torch_@GFXARCH@.kpack"
        assert all(p.startswith(f"{up}.kpack/torch-part") for p in ref.search_paths[1:])
        for target in {t for _, t in originals}:
            resolution = resolve_binary(lib, [target], env={}, with_generic=False)
            assert not resolution.missing, (rel, target)
