"""The wheel splitter finds device code anywhere in a wheel and keeps the input's metadata.

On Debian's real fat ``librocrand`` placed where real wheels put HIP libraries: the import
package (``torch/lib/``), auditwheel's ``torch.libs/`` and a ``<name>.data/data/`` tree. A
fat binary the options leave unsplit is an error unless ``--keep-fat`` names it; without
``--overlay-root`` every one is split and its archives install where its search path looks.
"""

from __future__ import annotations

import collections
import hashlib
import logging
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from kpack import wheelsplit as spw
from kpack.resolve import resolve_binary
from kpack.transform import extract_kernels
from kpack.wheelfile import Member, write_wheel
from tests.kpack.bundle_fixtures import read_kpack_by_spec
from tests.kpack.wheel_fixtures import INIT_PY, ROCRAND_LIB, TAG, VERSION, metadata
from tests.pypi_inputs import fat_sections

pytestmark = pytest.mark.real

PACKAGE = "torch/lib/librocrand.so.1"
LIBS = "torch.libs/librocrand-1a2b3c4d.so.1.1"
DATA = "torch-2.9.0.data/data/lib/librocrand.so.1"
FAT = (PACKAGE, LIBS, DATA)
PURELIB_WHEEL = (
    b"Wheel-Version: 1.0\nGenerator: bdist_wheel (0.45.1)\nRoot-Is-Purelib: true\n"
    b"Tag: py3-none-linux_x86_64\n"
)


@pytest.fixture(scope="module")
def rocrand(debian_package: Callable[[str], Path]) -> Path:
    return debian_package("librocrand1") / ROCRAND_LIB


def _wheel(dest: Path, library: Path, *extra: Member, wheel_info: bytes | None = None) -> Path:
    members = [
        Member("torch/__init__.py", INIT_PY),
        *(Member(name, library, executable=True) for name in FAT),
        *extra,
    ]
    dest.mkdir(parents=True, exist_ok=True)
    return write_wheel(
        dest, dist_name="torch", version=VERSION, tag=TAG, members=members,
        metadata=metadata(), wheel_info=wheel_info,
    ).path  # fmt: skip


@pytest.fixture(scope="module")
def anywhere(rocrand: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _wheel(tmp_path_factory.mktemp("anywhere"), rocrand)


def _run(*argv: str | Path) -> int:
    return spw.main([str(a) for a in argv])


def test_a_wrong_overlay_root_is_an_error_naming_every_fat_binary_left(
    anywhere: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: a warning 'fat binary outside torch/; kept unchanged' and exit 0 with a fat
    host wheel. Now exit 1, each fat binary named, nothing written."""
    out = tmp_path / "out"
    code = _run("--input", anywhere, "--output-dir", out, "--device-package-prefix",
                "amd-torch-device", "--overlay-root", "torch/")  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1
    assert "2 fat binaries would ship unsplit" in err and "--keep-fat" in err
    assert f"{LIBS}: fat binary outside the overlay root torch/" in err
    assert f"{DATA}: fat binary outside the overlay root torch/" in err
    assert PACKAGE not in err
    assert not out.exists() and not list(tmp_path.iterdir())


def test_keep_fat_keeps_them_fat_and_says_so(
    anywhere: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "out"
    code = _run("--input", anywhere, "--output-dir", out, "-q",
                "--device-package-prefix", "amd-torch-device", "--overlay-root", "torch/",
                "--keep-fat", "torch.libs/*", "--keep-fat", "*/data/lib/*.so.1",
                "--keep-fat", "nothing/*")  # fmt: skip
    assert code == 0
    host = out / anywhere.name
    with zipfile.ZipFile(host) as zf, zipfile.ZipFile(anywhere) as zin:
        for name in (LIBS, DATA):
            assert zf.read(name) == zin.read(name), name
        assert zf.read(PACKAGE) != zin.read(PACKAGE)
    for name in (LIBS, DATA):
        assert f"{name}: fat binary kept fat (--keep-fat)" in caplog.text
    assert "--keep-fat nothing/*: matches no fat binary" in caplog.text
    assert "ship unsplit" not in caplog.text


def _digests(paths: list[Path]) -> collections.Counter[tuple[str, str]]:
    found: collections.Counter[tuple[str, str]] = collections.Counter()
    for path in paths:
        for k in extract_kernels(path):
            found[(k.target, hashlib.sha256(k.read()).hexdigest())] += 1
    return found


def _install(out: Path, site: Path, prefix: Path) -> collections.Counter[tuple[str, str]]:
    """Extract every wheel of ``out`` as pip lays it out (``*.data/data/`` under
    ``prefix``, the rest in ``site``); every archived kernel's (target, sha256)."""
    archived: collections.Counter[tuple[str, str]] = collections.Counter()
    for whl in sorted(out.glob("*.whl")):
        with zipfile.ZipFile(whl) as zf:
            for name in zf.namelist():
                head, sep, rest = name.partition(".data/data/")
                dest = prefix / rest if sep and "/" not in head else site / name
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(zf.read(name))
                if name.endswith(".kpack"):
                    for (_key, target), data in read_kpack_by_spec(dest.read_bytes())[1].items():
                        archived[(target, hashlib.sha256(data).hexdigest())] += 1
    return archived


def test_without_an_overlay_root_every_fat_binary_is_split_and_resolves(
    anywhere: Path, rocrand: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    report = spw.split_wheel(anywhere, out, spw.SplitOptions(None, "amd-torch-device", ()))
    assert sorted(row.arcname for row in report.libraries) == sorted(FAT)
    with zipfile.ZipFile(out / "amd_torch_device_gfx90a-2.9.0-py3-none-linux_x86_64.whl") as zf:
        names = zf.namelist()
    assert {
        "torch/.kpack/torch_gfx90a:xnack+.kpack",
        "torch.libs/.kpack/torch_gfx90a:xnack+.kpack",
        "amd_torch_device_gfx90a-2.9.0.data/data/lib/.kpack/torch_gfx90a:xnack+.kpack",
    } <= set(names)
    site, prefix = tmp_path / "site", tmp_path / "prefix"
    archived = _install(out, site, prefix)
    assert archived == _digests([rocrand] * 3)
    hosts = [site / PACKAGE, site / LIBS, prefix / "lib/librocrand.so.1"]
    assert fat_sections(site) == [] and fat_sections(prefix) == []
    for host in hosts:
        for arches in (["gfx90a:xnack+"], ["gfx1030"], ["gfx908:xnack-"]):
            assert not resolve_binary(host, arches, env={}).missing, (host, arches)


@pytest.mark.parametrize("value", [".", "./", "/"])
def test_dot_and_slash_name_the_whole_wheel(value: str, tmp_path: Path) -> None:
    parser = spw.Parser(prog="x")
    spw.add_arguments(parser)
    args = parser.parse_args(["--input", "x.whl", "--output-dir", str(tmp_path),
                              "--device-package-prefix", "p", "--overlay-root", value])  # fmt: skip
    assert spw.resolve_options(args).overlay_root is None


def test_the_whole_wheel_and_its_only_package_split_alike(rocrand: Path, tmp_path: Path) -> None:
    """TheRock's call site (``--overlay-root torch/``) and no overlay root give the same
    wheels, byte for byte, when every fat binary is in the package."""
    wheel = write_wheel(
        tmp_path / "in", dist_name="torch", version=VERSION, tag=TAG, metadata=metadata(),
        members=[Member("torch/__init__.py", INIT_PY),
                 Member(PACKAGE, rocrand, executable=True)],
    ).path  # fmt: skip
    outs = {root: tmp_path / f"out-{bool(root)}" for root in ("torch/", None)}
    for root, out in outs.items():
        spw.split_wheel(wheel, out, spw.SplitOptions(root, "amd-torch-device", ()))
    names = sorted(p.name for p in outs["torch/"].glob("*.whl"))
    assert len(names) > 2 and names == sorted(p.name for p in outs[None].glob("*.whl"))
    for name in names:
        assert (outs["torch/"] / name).read_bytes() == (outs[None] / name).read_bytes(), name


def test_root_is_purelib_and_every_wheel_field_carry_over(rocrand: Path, tmp_path: Path) -> None:
    """Before: 'Root-Is-Purelib: true' became false in every output, with one warning per
    output wheel. Now every output's WHEEL is the input's, byte for byte."""
    wheel = _wheel(tmp_path / "in", rocrand, wheel_info=PURELIB_WHEEL)
    out = tmp_path / "out"
    options = spw.SplitOptions(None, "amd-torch-device", (), variant=True)
    spw.split_wheel(wheel, out, options)
    outputs = sorted(out.glob("*.whl"))
    assert len(outputs) > 5
    for whl in outputs:
        with zipfile.ZipFile(whl) as zf:
            info = next(n for n in zf.namelist() if n.endswith(".dist-info/WHEEL"))
            assert zf.read(info) == PURELIB_WHEEL, whl.name


def test_each_warning_is_printed_once_with_a_count(
    rocrand: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Names that differ only in case draw a warning from every wheel written with them
    (the host and two variant wheels): it comes once, with the count."""
    extra = (Member("torch/Notes.txt", b"a\n"), Member("torch/notes.txt", b"b\n"))
    wheel = _wheel(tmp_path / "in", rocrand, *extra)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        spw.split_wheel(wheel, tmp_path / "out",
                        spw.SplitOptions(None, "amd-torch-device", (), variant=True))  # fmt: skip
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == len(set(warnings)), warnings
    case = [w for w in warnings if "differ only in case" in w]
    assert len(case) == 1 and case[0].endswith("(3 times)"), warnings


def test_metadata_version_rises_to_2_1_only_when_extras_need_it(
    rocrand: Path, tmp_path: Path
) -> None:
    old = metadata().replace(b"Metadata-Version: 2.1", b"Metadata-Version: 1.2")
    members = [Member("torch/__init__.py", INIT_PY), Member(PACKAGE, rocrand, executable=True)]
    wheel = write_wheel(tmp_path / "in", dist_name="torch", version=VERSION, tag=TAG,
                        members=members, metadata=old).path  # fmt: skip
    out = tmp_path / "out"
    spw.split_wheel(wheel, out, spw.SplitOptions(None, "amd-torch-device", ()))
    with zipfile.ZipFile(out / wheel.name) as zf:
        text = zf.read("torch-2.9.0.dist-info/METADATA")
    assert text.startswith(b"Metadata-Version: 2.1\nName: torch\n")
    assert b"Provides-Extra: device-gfx90a" in text
    assert text.endswith(b"\n\nThe description body.\nSecond line.\n")


def test_a_renamed_wheel_keeps_every_wheel_field_but_its_file_names_tags(
    rocrand: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A wheel renamed by hand (its WHEEL still says linux_x86_64): the outputs are named
    and tagged as the file name says, every other WHEEL line kept, with one warning."""
    wheel = _wheel(tmp_path / "in", rocrand, wheel_info=PURELIB_WHEEL)
    renamed = wheel.with_name("torch-2.9.0-py3-none-manylinux_2_28_x86_64.whl")
    wheel.rename(renamed)
    out = tmp_path / "out"
    spw.split_wheel(renamed, out, spw.SplitOptions(None, "amd-torch-device", ()))
    expected = PURELIB_WHEEL.replace(b"linux_x86_64", b"manylinux_2_28_x86_64")
    outputs = sorted(out.glob("*.whl"))
    assert len(outputs) > 3 and all("manylinux_2_28" in p.name for p in outputs)
    for whl in outputs:
        with zipfile.ZipFile(whl) as zf:
            info = next(n for n in zf.namelist() if n.endswith(".dist-info/WHEEL"))
            assert zf.read(info) == expected, whl.name
    assert caplog.text.count("are not the file name's") == 1
