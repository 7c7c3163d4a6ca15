"""The pure parts of finalize: TheRock's version suffix, METADATA pins, target matching, the
size budget; and the NEEDED rename on tiny real ELF files, checked with patchelf 0.19 and
ld.so."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest

from kpack.common.budget import budget_table, check_budget
from kpack.elf import plan_needed_edit, plan_rpath_edit
from kpack.elf.structs import DT_RUNPATH
from kpack.errors import ElfError, PackagingError, UsageError
from kpack.finalize._metadata import finalized_metadata, set_pins
from kpack.finalize._targets import check_targets, expected_targets
from kpack.finalize._version import finalized_version, rocm_version
from tests.kpack.elf.elf_samples import DATA, run

from .finalize_kit import PATCHELF


@pytest.mark.parametrize(
    ("rocm", "expected"),
    [
        ("7.10.0", "1.2.3+rocm7.10.0"),
        ("7.10.0rc1", "1.2.3+rocm7.10.0rc1"),
        ("7.10.0a20251124", "1.2.3+rocm7.10.0a20251124"),
        ("7.10.0.dev0+efed3c", "1.2.3+devrocm7.10.0.dev0.efed3c"),
        ("10.1.0a20260811+bkc.20260813", "1.2.3+rocm10.1.0a20260811.bkc.20260813"),
    ],
)
def test_therocks_local_suffix(rocm: str, expected: str) -> None:
    assert finalized_version("1.2.3", rocm_version(rocm), "w") == expected
    # finalizing again for another ROCm replaces the suffix
    assert finalized_version(expected, rocm_version("7.0.0"), "w") == "1.2.3+rocm7.0.0"


def test_a_foreign_local_part_or_a_bad_version_is_refused() -> None:
    with pytest.raises(UsageError, match=r"local part \+cu121"):
        finalized_version("1.2.3+cu121", rocm_version("7.1.0"), "w")
    with pytest.raises(UsageError, match="not a PEP 440"):
        rocm_version("seven")


META = (
    b"Metadata-Version: 2.1\nName: foo\nVersion: 1.0\nRequires-Dist: numpy\n"
    b"Requires-Dist: rocm-sdk-core>=7.0\nRequires-Dist: rocm[libraries]>=7; extra == 'x'\n"
    b"\nbody: Version: 9\n"
)


def test_pins_replace_looser_ones_and_nothing_else_changes() -> None:
    pins = set_pins("7.1", ["rocm-sdk-libraries"], "rocm-sdk-core", ("rocm-sdk-libraries",))
    out = finalized_metadata(META, "1.0+rocm7.1", pins, "w").decode()
    assert out == (
        "Metadata-Version: 2.1\nName: foo\nVersion: 1.0+rocm7.1\nRequires-Dist: numpy\n"
        "Requires-Dist: rocm-sdk-core == 7.1\n"
        'Requires-Dist: rocm[libraries] == 7.1; extra == "x"\n'
        "Requires-Dist: rocm-sdk-libraries == 7.1\n\nbody: Version: 9\n"
    )


def test_a_legacy_set_pins_the_libraries_through_rocm() -> None:
    dists = ("rocm-sdk-libraries-gfx110x-all", "rocm-sdk-libraries-gfx94x-dcgpu")
    assert set_pins("7.1", [dists[0]], "rocm-sdk-core", dists)[1] == "rocm[libraries] == 7.1"
    assert set_pins("7.1", [], "rocm-sdk-core", dists) == ["rocm-sdk-core == 7.1"]


@pytest.mark.parametrize(
    ("embedded", "expected", "ok"),
    [
        ({"gfx90a:xnack+", "gfx90a:xnack-"}, ("gfx90a",), True),
        ({"gfx90a:xnack+"}, ("gfx90a:xnack-",), False),
        ({"gfx90a"}, ("gfx90a:xnack-",), True),
        ({"gfx11-generic"}, ("gfx1100", "gfx1101"), True),
        ({"gfx1100", "gfx1101"}, ("gfx11-generic",), True),
        ({"gfx942", "gfx950"}, ("gfx942",), False),
        ({"gfx942"}, ("gfx942", "gfx950"), False),
        (set(), ("gfx942",), False),
    ],
)
def test_targets_match_as_the_loader_does(
    embedded: set[str], expected: tuple[str, ...], ok: bool
) -> None:
    if ok:
        check_targets(embedded, expected, Path("w"))
    else:
        with pytest.raises(PackagingError, match="differ from --expected-gpu-target"):
            check_targets(embedded, expected, Path("w"))


def test_expected_targets_are_target_ids() -> None:
    assert expected_targets(["gfx942", "gfx942", "gfx11-generic"]) == ("gfx942", "gfx11-generic")
    with pytest.raises(UsageError, match="'gfx94X-dcgpu'"):
        expected_targets(["gfx94X-dcgpu"])


def _wheel(path: Path, members: dict[str, int]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for name, size in members.items():
            archive.writestr(name, bytes(size))
    return path


def test_budget_names_each_wheel_over_it_and_its_largest_members(tmp_path: Path) -> None:
    small = _wheel(tmp_path / "a-1-py3-none-any.whl", {"x": 10})
    big = _wheel(tmp_path / "b-1-py3-none-any.whl", {"s": 100, "l": 3000, "m": 2000, "t": 5})
    rows = check_budget([small, big], 10_000)
    assert [r.over for r in rows] == [False, False]
    assert budget_table(rows)[0] == "| wheel | size | --max-wheel-size 10.0 kB |"
    with pytest.raises(PackagingError) as caught:
        check_budget([small, big], 4000)
    message = str(caught.value)
    assert (
        message.startswith("b-1-py3-none-any.whl: ") and "over --max-wheel-size 4.0 kB" in message
    )
    assert "largest members: l (3.0 kB), m (2.0 kB), s (100 B)" in message
    with pytest.raises(PackagingError, match="2 wheels over --max-wheel-size 10 B"):
        check_budget([small, big], 10)
    assert budget_table(check_budget([small], None)) == []


@pytest.fixture(scope="module")
def linked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """libuser.so needing the repair tool's name of libdemo.so.1 (a copy with that SONAME)."""
    root = tmp_path_factory.mktemp("needed")
    demo = root / "libdemo.so.1"
    run(["cc", "-shared", "-fPIC", "-Wl,-soname,libdemo.so.1", DATA / "demo.c", "-o", demo])
    user = root / "libuser.so"
    run(["cc", "-shared", "-fPIC", DATA / "user.c", "-o", user, f"-L{root}", "-l:libdemo.so.1"])
    run([PATCHELF, "--replace-needed", "libdemo.so.1", "libdemo-1a2b3c4d.so.1", user])
    return user, demo


def test_needed_rename_restores_the_name_and_loads(
    linked: tuple[Path, Path], tmp_path: Path
) -> None:
    user, demo = linked
    edit = plan_needed_edit(user, {"libdemo-1a2b3c4d.so.1": "libdemo.so.1"})
    assert edit is not None
    composed = plan_rpath_edit(edit, ["$ORIGIN/lib"], tag=DT_RUNPATH)
    assert composed is not None
    out = tmp_path / "libuser.so"
    composed.write_to(out)
    assert "libdemo.so.1" in run([PATCHELF, "--print-needed", out]).stdout.split()
    assert "RUNPATH" in run(["readelf", "-d", out]).stdout
    assert run([PATCHELF, "--print-rpath", out]).stdout.strip() == "$ORIGIN/lib"
    (tmp_path / "lib").mkdir()
    shutil.copyfile(demo, tmp_path / "lib/libdemo.so.1")
    code = f"import ctypes; print(ctypes.CDLL({str(out)!r}).user_answer(1))"
    assert run(["python3", "-c", code]).stdout.strip() == str(1 * 2 + 5 + 1000)
    assert plan_needed_edit(out, {"libdemo-1a2b3c4d.so.1": "libdemo.so.1"}) is None


def test_needed_rename_never_grows_a_name_or_takes_a_path(linked: tuple[Path, Path]) -> None:
    user, _ = linked
    with pytest.raises(ElfError, match="longer"):
        plan_needed_edit(user, {"libdemo-1a2b3c4d.so.1": "libdemo-1a2b3c4d-longer.so.1"})
    with pytest.raises(ElfError, match="invalid library name"):
        plan_needed_edit(user, {"libdemo-1a2b3c4d.so.1": "a/b.so"})
