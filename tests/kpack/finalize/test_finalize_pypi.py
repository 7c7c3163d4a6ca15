"""kpack finalize-wheel on real ROCm 7 wheels from PyPI, against a set laid out as a ROCm 7
build with the nonce ``_v7`` lays it out (its wheels' member names are all a finalize reads
of a set), and the errors: wrong GPU targets, a library version the set lacks, a wheel over
the size budget, a set of another version; each is one error and nothing is published.

Oracles: patchelf 0.19 (NEEDED, search path), byte comparison (files that need no edit),
``packaging`` (the METADATA).
"""

from __future__ import annotations

import zipfile
from email.parser import BytesParser
from pathlib import Path

import pytest

from kpack.cli import main as kpack_main
from tests.kpack.elf.elf_samples import run
from tests.pypi_inputs import GAFIME, SPLINE_CONV, pypi_wheel

from .finalize_kit import PATCHELF

ROCM = "7.14.0"
GAFIME_TARGETS = (
    "gfx90a,gfx942,gfx950,gfx1030,gfx1031,gfx1032,gfx1100,gfx1101,gfx1102,gfx1150,gfx1151,"
    "gfx1200,gfx1201"
)


def _fake_set(dist: Path, version: str, libraries: dict[str, list[str]]) -> Path:
    """Wheels of a set: ``{dist name: [member, ...]}`` (empty files: names are what counts)."""
    dist.mkdir(parents=True, exist_ok=True)
    for name, members in libraries.items():
        wheel = dist / f"{name}-{version}-py3-none-linux_x86_64.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            for member in members:
                archive.writestr(member, b"")
    return dist


@pytest.fixture
def rocm7_set(tmp_path: Path) -> Path:
    return _fake_set(
        tmp_path / "set",
        ROCM,
        {
            "rocm_sdk_core": [
                "_rocm_sdk_core_v7/lib/libamdhip64.so.7",
                "_rocm_sdk_core_v7/lib/rocm_sysdeps/lib/librocm_sysdeps_numa.so.1",
            ],
            "rocm_sdk_libraries": ["_rocm_sdk_libraries_v7/lib/libhipblas.so.3"],
            "rocm_sdk_device_gfx942": [".kpack/x.kpack"],
        },
    )


def _finalize(wheel: Path, rocm_set: Path, out: Path, *extra: str) -> int:
    argv = ["finalize-wheel", str(wheel), "--output-dir", str(out), "--rocm-version", ROCM,
            "--rocm-set", str(rocm_set), *extra]  # fmt: skip
    return kpack_main(argv)


def _members(wheel: Path, dest: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(dest)
        return archive.namelist()


def _rpath(path: Path) -> list[str]:
    return run([PATCHELF, "--print-rpath", path]).stdout.strip().split(":")


@pytest.mark.real
def test_gafime_joins_the_set(rocm7_set: Path, tmp_path: Path) -> None:
    wheel = pypi_wheel(GAFIME)
    out = tmp_path / "out"
    assert _finalize(wheel, rocm7_set, out, "--expected-gpu-target", GAFIME_TARGETS) == 0
    (made,) = out.glob("*.whl")
    assert made.name == f"gafime_rocm-0.4.7+rocm{ROCM}-cp311-cp311-manylinux_2_28_x86_64.whl"
    new, old = tmp_path / "new", tmp_path / "old"
    _members(made, new)
    _members(wheel, old)
    lib = "gafime_rocm/libgafime_rocm.so"
    assert _rpath(new / lib) == ["$ORIGIN/../_rocm_sdk_core_v7/lib"]  # /opt/rocm/lib dropped
    needed = run([PATCHELF, "--print-needed", new / lib]).stdout.split()
    assert needed == run([PATCHELF, "--print-needed", old / lib]).stdout.split()
    native = "gafime_rocm/_native.cpython-311-x86_64-linux-gnu.so"
    assert (new / native).read_bytes() == (old / native).read_bytes()
    info = f"gafime_rocm-0.4.7+rocm{ROCM}.dist-info"
    meta = BytesParser().parsebytes((new / info / "METADATA").read_bytes())
    assert meta["Version"] == f"0.4.7+rocm{ROCM}"
    before = BytesParser().parsebytes((old / "gafime_rocm-0.4.7.dist-info/METADATA").read_bytes())
    theirs = before.get_all("Requires-Dist") or []
    assert meta.get_all("Requires-Dist") == [*theirs, f"rocm-sdk-core == {ROCM}"]
    assert meta.get_payload() == before.get_payload()


@pytest.mark.real
def test_hand_rebased_spline_conv_gets_this_sets_paths(rocm7_set: Path, tmp_path: Path) -> None:
    wheel = pypi_wheel(SPLINE_CONV)
    out = tmp_path / "out"
    assert _finalize(wheel, rocm7_set, out) == 0
    (made,) = out.glob("*.whl")
    new, old = tmp_path / "new", tmp_path / "old"
    _members(made, new)
    _members(wheel, old)
    for module in ("_basis_cuda.so", "_weighting_cuda.so"):
        path = new / "torch_spline_conv" / module
        assert _rpath(path) == ["$ORIGIN/../_rocm_sdk_core_v7/lib", "$ORIGIN/../torch/lib"]
    for module in ("_basis_cpu.so", "_version_cpu.so"):  # no ROCm library needed: untouched
        rel = f"torch_spline_conv/{module}"
        assert (new / rel).read_bytes() == (old / rel).read_bytes()


def _nothing_written(out: Path) -> bool:
    return not out.exists() or not any(out.glob("*.whl"))


@pytest.mark.real
def test_wrong_targets_are_one_error_listing_both(
    rocm7_set: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    wheel = pypi_wheel(GAFIME)
    assert _finalize(wheel, rocm7_set, out, "--expected-gpu-target", "gfx942,gfx1300") == 1
    err = capsys.readouterr().err
    assert "differ from --expected-gpu-target" in err and "expected {gfx942, gfx1300}" in err
    assert "embedded {gfx1030, gfx1031" in err and "no code for expected gfx1300" in err
    assert _nothing_written(out)


@pytest.mark.real
def test_features_and_generic_targets_are_understood(rocm7_set: Path, tmp_path: Path) -> None:
    wheel = pypi_wheel(GAFIME)
    targets = GAFIME_TARGETS.replace("gfx90a,", "gfx90a:xnack-,").replace(
        "gfx1100,gfx1101,gfx1102,", "gfx11-generic,"
    )
    # gfx90a (xnack any) code serves gfx90a:xnack-; gfx11-generic matches gfx110x code
    assert _finalize(wheel, rocm7_set, tmp_path / "out", "--expected-gpu-target", targets) == 0


@pytest.mark.real
def test_a_library_version_the_set_lacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old_set = _fake_set(
        tmp_path / "set6", ROCM, {"rocm_sdk_core": ["_rocm_sdk_core/lib/libamdhip64.so.6"]}
    )
    out = tmp_path / "out"
    assert _finalize(pypi_wheel(GAFIME), old_set, out) == 1
    err = capsys.readouterr().err
    assert f"needs libamdhip64.so.7; the set {ROCM} has libamdhip64.so.6" in err
    assert _nothing_written(out)


@pytest.mark.real
def test_over_the_budget_nothing_is_published(
    rocm7_set: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert _finalize(pypi_wheel(GAFIME), rocm7_set, out, "--max-wheel-size", "100kB") == 1
    err = capsys.readouterr().err
    assert "over --max-wheel-size 100.0 kB" in err
    assert "largest members: gafime_rocm/libgafime_rocm.so (" in err
    assert _nothing_written(out)
    assert _finalize(pypi_wheel(GAFIME), rocm7_set, out, "--max-wheel-size", "1MB") == 0
    (made,) = out.glob("*.whl")
    assert f"| {made.name} | " in capsys.readouterr().out


@pytest.mark.real
def test_a_set_of_another_version_is_a_usage_error(
    rocm7_set: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["finalize-wheel", str(pypi_wheel(GAFIME)), "--output-dir", str(tmp_path / "o"),
            "--rocm-version", "7.15.0", "--rocm-set", str(rocm7_set)]  # fmt: skip
    assert kpack_main(argv) == 2
    assert "holds the set 7.14.0, not --rocm-version 7.15.0" in capsys.readouterr().err


@pytest.mark.real
def test_a_foreign_local_version_is_refused(rocm7_set: Path, tmp_path: Path) -> None:
    src = pypi_wheel(GAFIME)
    renamed = tmp_path / src.name.replace("0.4.7", "0.4.7+cu12")
    renamed.write_bytes(src.read_bytes())
    assert _finalize(renamed, rocm7_set, tmp_path / "out") != 0


# --- Windows --------------------------------------------------------------------------------


def _win_set(tmp_path: Path) -> Path:
    dist = tmp_path / "winset"
    dist.mkdir(parents=True, exist_ok=True)
    for name, member in (
        ("rocm_sdk_core", "_rocm_sdk_core/bin/amdhip64_7.dll"),
        ("rocm_sdk_libraries", "_rocm_sdk_libraries/bin/hipblas.dll"),
    ):
        with zipfile.ZipFile(dist / f"{name}-{ROCM}-py3-none-win_amd64.whl", "w") as archive:
            archive.writestr(member, b"")
    return dist


@pytest.mark.real
def test_a_windows_wheel_gets_the_metadata_work(tmp_path: Path) -> None:
    from tests.pypi_inputs import BITSANDBYTES_WIN

    out = tmp_path / "out"
    wheel = pypi_wheel(BITSANDBYTES_WIN)
    rocm_set = _win_set(tmp_path)
    assert _finalize(wheel, rocm_set, out, "--expected-gpu-target", "gfx1201") == 1  # 22 ISAs
    assert _finalize(wheel, rocm_set, out) == 0
    (made,) = out.glob("*.whl")
    assert made.name == f"bitsandbytes-0.50.2+rocm{ROCM}-py3-none-win_amd64.whl"
    new, old = tmp_path / "new", tmp_path / "old"
    assert sorted(_members(made, new)) != []
    _members(wheel, old)
    for dll in (old / "bitsandbytes").glob("*.dll"):  # DLLs untouched
        assert (new / "bitsandbytes" / dll.name).read_bytes() == dll.read_bytes()
    meta = BytesParser().parsebytes(
        (new / f"bitsandbytes-0.50.2+rocm{ROCM}.dist-info/METADATA").read_bytes()
    )
    # its ROCm DLLs import hipblas.dll (pefile agrees): the libraries wheel is pinned too
    requires = meta.get_all("Requires-Dist") or []
    assert requires[-2:] == [f"rocm-sdk-core == {ROCM}", f"rocm-sdk-libraries == {ROCM}"]


def _win_wheel(path: Path, dlls: list[str]) -> Path:
    info = "winpkg-1.0.dist-info"
    files = {f"winpkg/{d}": b"MZ not a real image" for d in dlls}
    files[f"{info}/METADATA"] = b"Metadata-Version: 2.1\nName: winpkg\nVersion: 1.0\n"
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-win_amd64\n"
    )
    record = [f"{n},,".encode() for n in [*files, f"{info}/RECORD"]]
    files[f"{info}/RECORD"] = b"\n".join(record) + b"\n"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def test_windows_copies_of_the_sets_dlls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rocm_set = _win_set(tmp_path)
    plain = _win_wheel(tmp_path / "winpkg-1.0-py3-none-win_amd64.whl", ["amdhip64_7.dll", "x.dll"])
    out = tmp_path / "out"
    assert _finalize(plain, rocm_set, out) == 0
    (made,) = out.glob("*.whl")
    names = _members(made, tmp_path / "new")
    assert "winpkg/x.dll" in names and "winpkg/amdhip64_7.dll" not in names
    hashed = tmp_path / "h" / plain.name
    hashed.parent.mkdir()
    _win_wheel(hashed, ["amdhip64_7-0123456789abcdef0123456789abcdef.dll"])
    assert _finalize(hashed, rocm_set, tmp_path / "out2") == 1
    assert "renamed copy of the set's amdhip64_7.dll" in capsys.readouterr().err


@pytest.mark.real
def test_finalized_wheels_are_reproducible(
    rocm7_set: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = pypi_wheel(GAFIME)
    made = []
    for run_dir in ("a", "b"):
        assert _finalize(wheel, rocm7_set, tmp_path / run_dir) == 0
        made.append(next((tmp_path / run_dir).glob("*.whl")).read_bytes())
    assert made[0] == made[1]
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    assert _finalize(wheel, rocm7_set, tmp_path / "c") == 0
    assert next((tmp_path / "c").glob("*.whl")).read_bytes() != made[0]


@pytest.mark.real
def test_input_dir_and_a_rerun_replace_what_finalize_wrote(rocm7_set: Path, tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    for wheel in (pypi_wheel(GAFIME), pypi_wheel(SPLINE_CONV)):
        (inputs / wheel.name).write_bytes(wheel.read_bytes())
    out = tmp_path / "out"
    (out / "mine.txt").parent.mkdir()
    (out / "mine.txt").write_text("not finalize's")
    argv = ["finalize-wheel", "--input-dir", str(inputs), "--output-dir", str(out),
            "--rocm-version", ROCM, "--rocm-set", str(rocm7_set), "-q"]  # fmt: skip
    assert kpack_main(argv) == 0
    first = sorted(p.name for p in out.glob("*.whl"))
    assert [n.split("-")[0] for n in first] == ["gafime_rocm", "torch_spline_conv_rocm"]
    (inputs / pypi_wheel(SPLINE_CONV).name).unlink()
    assert kpack_main(argv) == 0  # the re-run's outputs replace the last run's
    assert sorted(p.name for p in out.glob("*.whl")) == first[:1]
    assert (out / "mine.txt").read_text() == "not finalize's"
