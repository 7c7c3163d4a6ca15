"""The wheel splitter on a real fat library (Debian's librocrand) and on bad inputs."""

from __future__ import annotations

import email.parser
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
import rocm_bootstrap.naming as rb_naming
import rocm_bootstrap.targets as rb_targets

from kpack import cli
from kpack import wheelsplit as spw
from kpack.archive import KpackArchive
from kpack.errors import ManifestError, PackagingError, UsageError
from kpack.resolve import read_kpack_ref, resolve_binary
from kpack.transform import extract_kernels
from kpack.wheelfile import open_wheel
from kpack.wheelsplit._bundles import device_dist_name, known_targets, packaging_chain
from kpack.wheelsplit._types import load_wheel_types
from tests.kpack.wheel_fixtures import (
    DATABASES,
    NEUTRAL_DATABASE,
    ROCRAND_LIB,
    make_fat_wheel,
    make_plain_wheel,
    record_name,
    rewrite_zip,
)

pytestmark = pytest.mark.real

HOST = "torch-2.9.0-py3-none-linux_x86_64.whl"
TARGETS = ("gfx803", "gfx900:xnack-", "gfx906:xnack-", "gfx908:xnack-", "gfx90a:xnack+",
           "gfx90a:xnack-", "gfx1030")  # fmt: skip
KEYS = ("gfx1030", "gfx803", "gfx900", "gfx906", "gfx908", "gfx90a")


def _options(**kw: object) -> spw.SplitOptions:
    base: dict[str, object] = {
        "overlay_root": "torch/",
        "device_package_prefix": "amd-torch-device",
    }
    return spw.SplitOptions(**{**base, **kw})  # type: ignore[arg-type]


def _read(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as z:
        return {i.filename: z.read(i) for i in z.infolist()}


def _device(out: Path, key: str) -> Path:
    return out / f"amd_torch_device_{key}-2.9.0-py3-none-linux_x86_64.whl"


@pytest.fixture(scope="module")
def rocrand(debian_package: Callable[[str], Path]) -> Path:
    return debian_package("librocrand1") / ROCRAND_LIB


@pytest.fixture(scope="module")
def fat_wheel(rocrand: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_fat_wheel(tmp_path_factory.mktemp("fat"), rocrand)


@pytest.fixture(scope="module")
def split(
    fat_wheel: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, spw.SplitReport]:
    out = tmp_path_factory.mktemp("split") / "out"
    report = spw.split_wheel(fat_wheel, out, _options(databases=("rocblas",), jobs=2))
    return out, report


def test_host_wheel_keeps_every_other_file_byte_identical(fat_wheel: Path, split: tuple) -> None:
    out, _ = split
    before, after = _read(fat_wheel), _read(out / HOST)
    moved = set(DATABASES) - {NEUTRAL_DATABASE}
    rewritten = {"torch/lib/librocrand.so.1", "torch-2.9.0.dist-info/METADATA",
                 "torch-2.9.0.dist-info/RECORD"}  # fmt: skip
    assert set(after) == set(before) - moved
    for name in set(after) - rewritten:
        assert after[name] == before[name], name
    assert len(after["torch/lib/librocrand.so.1"]) < len(before["torch/lib/librocrand.so.1"]) / 1.8
    # every original METADATA line is still there, in order, with only our lines added
    old = before["torch-2.9.0.dist-info/METADATA"].decode().splitlines()
    new = after["torch-2.9.0.dist-info/METADATA"].decode().splitlines()
    assert [line for line in new if line in old] == old
    added = [line for line in new if line not in old]
    assert all(line.startswith(("Provides-Extra: device-", "Requires-Dist: amd-torch-device-"))
               for line in added)  # fmt: skip
    assert "variant_properties" not in "\n".join(new)
    open_wheel(out / HOST, out.parent / "verify")  # the regenerated RECORD verifies


def test_extras_pull_device_wheels(split: tuple) -> None:
    out, _ = split
    meta = email.parser.BytesHeaderParser().parsebytes(
        _read(out / HOST)["torch-2.9.0.dist-info/METADATA"]
    )
    assert set(meta.get_all("Provides-Extra")) == {f"device-{k}" for k in KEYS} | {"device-all"}
    requires = meta.get_all("Requires-Dist")
    assert 'amd-torch-device-gfx90a==2.9.0; extra == "device-gfx90a"' in requires
    assert sum('extra == "device-all"' in r for r in requires) == len(KEYS)


def test_device_wheels(split: tuple) -> None:
    out, report = split
    host_names = set(_read(out / HOST))
    for key in KEYS:
        members = _read(_device(out, key))
        payload = {n for n in members if ".dist-info/" not in n}
        assert not payload & host_names, key
        assert not any(n.endswith("__init__.py") for n in members)
        meta = email.parser.BytesHeaderParser().parsebytes(
            members[f"amd_torch_device_{key}-2.9.0.dist-info/METADATA"]
        )
        assert meta["Name"] == device_dist_name("amd-torch-device", key)
        assert meta.get_all("Requires-Dist") == ["torch==2.9.0"]
    gfx90a = set(_read(_device(out, "gfx90a")))
    assert {"torch/.kpack/torch_gfx90a:xnack+.kpack", "torch/.kpack/torch_gfx90a:xnack-.kpack",
            "torch/lib/rocblas/library/TensileLibrary_lazy_gfx90a.dat",
            "torch/lib/rocblas/library/Kernels.so-000-gfx90a-xnack+.hsaco"} <= gfx90a  # fmt: skip
    assert "torch/lib/rocblas/library/TensileLibrary_lazy_gfx1030.co" in _read(
        _device(out, "gfx1030")
    )
    rows = {r.key: r for r in report.device_wheels}
    assert rows["gfx90a"].archives == 2 and rows["gfx90a"].database_files == 2


def test_every_kernel_reference_resolves(rocrand: Path, split: tuple, tmp_path: Path) -> None:
    out, _ = split
    for wheel in out.glob("*.whl"):
        if wheel.name.count("-") == 4:  # host and device wheels, not the variants
            with zipfile.ZipFile(wheel) as z:
                z.extractall(tmp_path)
    lib = tmp_path / "torch/lib/librocrand.so.1"
    ref = read_kpack_ref(lib)
    assert ref is not None
    assert ref.kernel_name == "lib/librocrand.so.1"
    assert ref.search_paths == ("../.kpack/torch_@GFXARCH@.kpack",)
    originals = {(f"lib/librocrand.so.1#{k.index}", k.target): k.read()
                 for k in extract_kernels(rocrand)}  # fmt: skip
    for target in TARGETS:
        resolution = resolve_binary(lib, [target], env={})
        assert not resolution.missing, target
        for lookup in resolution.lookups:
            assert lookup.archive is not None and lookup.target is not None
            with KpackArchive.open(lookup.archive) as archive:
                data = archive.read(lookup.key, lookup.target)
            assert data == originals[(lookup.key, lookup.target)]


def _reports(out: Path) -> Path:
    return out.with_name(out.name + "-split-reports")


def _dists(out: Path) -> list[str]:
    """What ``twine upload out/*`` takes: every name the shell's ``*`` matches."""
    return sorted(n for n in os.listdir(out) if not n.startswith("."))


def test_report_written_beside_the_output_dir(split: tuple) -> None:
    out, report = split
    assert all(n.endswith(".whl") for n in _dists(out))
    data = json.loads((_reports(out) / "torch-2.9.0-split-report.json").read_text())
    assert data == json.loads(report.to_json())
    (lib,) = data["libraries"]
    assert lib["saved"] == lib["original"] - lib["stripped"] > 12_000_000
    gpus = {g["target"]: g for g in data["gpus"]}
    assert set(gpus) == set(KEYS)
    assert gpus["gfx90a"]["wheels"] == [HOST, _device(out, "gfx90a").name]
    assert gpus["gfx90a"]["saving"] > 0
    assert "## Per GPU" in (_reports(out) / "torch-2.9.0-split-report.md").read_text()


def test_outputs_are_deterministic(fat_wheel: Path, split: tuple, tmp_path: Path) -> None:
    out, _ = split
    again = tmp_path / "again"
    spw.split_wheel(fat_wheel, again, _options(databases=("rocblas",), jobs=1))
    assert sorted(os.listdir(again)) == sorted(os.listdir(out))
    for name in _dists(out):
        assert (again / name).read_bytes() == (out / name).read_bytes(), name
    record = ".kpack-split-wheel/torch-2.9.0-py3-none-linux_x86_64.whl.json"

    def claims(path: Path) -> dict[str, dict[str, object]]:  # inode numbers differ by copy
        outputs = json.loads(path.read_text())["outputs"]
        return {k: {f: v for f, v in e.items() if f != "inode"} for k, e in outputs.items()}

    assert claims(again / record) == claims(out / record)


def test_cli_split_wheel(
    fat_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = ["split-wheel", "--input", str(fat_wheel), "--output-dir", str(out),
            "--wheel-type", "torch-fat", "--compression", "none", "-j", "2"]  # fmt: skip
    assert cli.main(argv) == 0
    shown = capsys.readouterr()
    assert shown.out.startswith("Split torch (")  # the wheels, version and tag in the title
    assert "split report, with" in shown.err and "## " not in shown.out
    with zipfile.ZipFile(_device(out, "gfx1030")) as z:
        z.extract("torch/.kpack/torch_gfx1030.kpack", tmp_path / "x")
    with KpackArchive.open(tmp_path / "x/torch/.kpack/torch_gfx1030.kpack") as archive:
        assert archive.scheme == "none"


def test_module_main_rejects_unknown_wheel_type(
    fat_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = ["--input", str(fat_wheel), "--output-dir", str(out), "--wheel-type", "jax-fat"]
    assert spw.main(argv) == 2  # a usage error
    err = capsys.readouterr().err
    assert "unknown wheel type 'jax-fat'" in err and "torch-fat" in err
    assert not out.exists()


def test_install_host_and_one_device_wheel(split: tuple, tmp_path: Path) -> None:
    out, _ = split
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = str(venv / "bin/python")
    pip = [py, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "install", "--no-index", "--find-links", str(out), "torch",
                    "amd-torch-device-gfx90a"], check=True)  # fmt: skip
    code = "import torch; print(torch.rocrand_version()); print(torch.__file__)"
    run = subprocess.run([py, "-c", code], check=True, capture_output=True, text=True)
    version, init = run.stdout.split()
    assert int(version) > 0
    lib = Path(init).parent / "lib/librocrand.so.1"
    for target in ("gfx90a:xnack+", "gfx90a:xnack-", "gfx90a:sramecc+:xnack-"):
        assert not resolve_binary(lib, [target], env={}).missing, target
    assert resolve_binary(lib, ["gfx1030"], env={}).missing  # not installed
    subprocess.run([*pip, "uninstall", "-y", "amd-torch-device-gfx90a"], check=True)
    assert not (Path(init).parent / ".kpack/torch_gfx90a:xnack+.kpack").exists()
    assert (Path(init).parent / NEUTRAL_DATABASE.removeprefix("torch/")).is_file()
    subprocess.run([py, "-c", code], check=True, capture_output=True)


# --- bad input ------------------------------------------------------------------------------


def _assert_no_output(out: Path) -> None:
    assert not out.exists() and not _reports(out).exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}")]


def test_not_a_zip(tmp_path: Path) -> None:
    bad = tmp_path / "torch-2.9.0-py3-none-linux_x86_64.whl"
    bad.write_bytes(b"this is not a zip file")
    with pytest.raises(PackagingError, match="not a valid zip file"):
        spw.split_wheel(bad, tmp_path / "out", _options())
    _assert_no_output(tmp_path / "out")


def test_zip_without_dist_info(fat_wheel: Path, tmp_path: Path) -> None:
    bad = rewrite_zip(fat_wheel, tmp_path / fat_wheel.name,
                      lambda m: {k: v for k, v in m.items() if ".dist-info/" not in k})  # fmt: skip
    with pytest.raises(PackagingError, match=r"exactly one \.dist-info directory, found none"):
        spw.split_wheel(bad, tmp_path / "out", _options())
    _assert_no_output(tmp_path / "out")


def _edit_record(
    edit: Callable[[list[list[str]]], list[list[str]]],
) -> Callable[..., dict[str, bytes]]:
    def apply(members: dict[str, bytes]) -> dict[str, bytes]:
        name = record_name(members)
        rows = [line.split(",") for line in members[name].decode().splitlines()]
        members[name] = "".join(",".join(r) + "\n" for r in edit(rows)).encode()
        return members

    return apply


def _bad_hash(rows: list[list[str]]) -> list[list[str]]:
    wrong = "sha256=" + "A" * 43  # well formed, not the file's
    return [[r[0], wrong, r[2]] if r[0] == "torch/version.py" else r for r in rows]


def _bad_size(rows: list[list[str]]) -> list[list[str]]:
    return [[r[0], r[1], "1"] if r[0] == "torch/version.py" else r for r in rows]


def _unlisted(rows: list[list[str]]) -> list[list[str]]:
    return [r for r in rows if r[0] != "torch/version.py"]


def _missing(rows: list[list[str]]) -> list[list[str]]:
    return [*rows, ["torch/gone.py", "sha256=AAAA", "3"]]


@pytest.mark.parametrize(
    ("edit", "message"),
    [(_bad_hash, "torch/version.py: sha256 mismatch"),
     (_bad_size, "torch/version.py: size mismatch"),
     (_unlisted, "torch/version.py: in the wheel but not listed in RECORD"),
     (_missing, "torch/gone.py: listed in RECORD but not in the wheel")],
)  # fmt: skip
def test_bad_record(fat_wheel: Path, tmp_path: Path, edit: Callable, message: str) -> None:
    bad = rewrite_zip(fat_wheel, tmp_path / fat_wheel.name, _edit_record(edit))
    with pytest.raises(PackagingError, match="bad RECORD") as info:
        spw.split_wheel(bad, tmp_path / "out", _options())
    assert message in str(info.value)
    _assert_no_output(tmp_path / "out")


def test_no_fat_binaries_writes_the_host_wheel_unchanged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plain = make_plain_wheel(tmp_path / "in")
    report = spw.split_wheel(plain, tmp_path / "out", _options(variant=True))
    assert report.unchanged and not report.device_wheels
    assert (tmp_path / "out" / plain.name).read_bytes() == plain.read_bytes()
    assert _dists(tmp_path / "out") == [plain.name]
    assert sorted(os.listdir(_reports(tmp_path / "out"))) == [
        ".kpack-split-wheel",
        "torch-2.9.0-split-report.json",
        "torch-2.9.0-split-report.md",
    ]
    assert "no fat binaries or database files under torch/; host wheel unchanged" in caplog.text


def test_unknown_wheel_type() -> None:
    args = spw.argparse.Namespace(wheel_type="nope", overlay_root=None, device_package_prefix=None)
    with pytest.raises(UsageError, match="unknown wheel type 'nope'; known: torch-fat"):
        spw.resolve_options(args)


def test_existing_outputs_are_not_overwritten(fat_wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.mkdir()
    (target / HOST).write_bytes(b"keep me")
    with pytest.raises(PackagingError, match="in the way, not written by kpack split-wheel") as e:
        spw.split_wheel(fat_wheel, target, _options(databases=("rocblas",)))
    assert e.value.problems == (f"{HOST}: a file not written by this tool",)
    assert sorted(os.listdir(target)) == [HOST] and (target / HOST).read_bytes() == b"keep me"


def test_wheel_type_manifest_is_validated(tmp_path: Path) -> None:
    assert load_wheel_types()["torch-fat"].overlay_root == "torch/"
    bad = tmp_path / "wheel_types.yaml"
    bad.write_text("wheel_types:\n  torch-fat:\n    description: x\n    overlay_root: /abs\n"
                   "    device_package_prefix: Bad_Prefix\n    databases: [nope]\n")  # fmt: skip
    with pytest.raises(ManifestError) as info:
        load_wheel_types(bad)
    text = str(info.value)
    assert str(bad) in text
    for key in ("overlay_root", "device_package_prefix", "databases"):
        assert f"wheel_types.torch-fat.{key}" in text


def test_bundle_table_matches_rocm_bootstrap() -> None:
    names = {t.name for t in rb_targets.ALL_TARGETS if "-" not in t.name}
    assert known_targets() == names
    for name in sorted(names):
        chain = rb_targets.packaging_chain(name)
        assert packaging_chain(name) == tuple(b.key for b in chain), name
        for bundle in chain:
            assert device_dist_name("amd-torch-device", bundle.key) == rb_naming.device_dist_name(
                "amd-torch-device", bundle
            )


@pytest.mark.large
def test_large_librocsparse(debian_package: Callable[[str], Path], tmp_path: Path) -> None:
    if os.environ.get("ROCM_PACKAGING_LARGE") != "1":
        pytest.skip("opt-in: set ROCM_PACKAGING_LARGE=1")
    lib = debian_package("librocsparse0") / "usr/lib/x86_64-linux-gnu/librocsparse.so.0.1"
    wheel = make_fat_wheel(tmp_path / "in", lib, soname="librocsparse.so.0")
    out = tmp_path / "out"
    report = spw.split_wheel(wheel, out, _options(databases=("rocblas",), jobs=2))
    (row,) = report.libraries
    assert row.saved > 1_200_000_000
    root = tmp_path / "tree"
    for whl in out.glob("*.whl"):
        with zipfile.ZipFile(whl) as z:
            z.extractall(root)
    binary = root / "torch/lib/librocsparse.so.0"
    for target in TARGETS:
        assert not resolve_binary(binary, [target], env={}).missing, target


def test_split_wheels_pass_the_upload_oracles(split: tuple[Path, spw.SplitReport]) -> None:
    """Every wheel the splitter writes passes twine check --strict (device wheels carry a
    description) and check-wheel-contents (ignored checks: tests/wheel_checks.py)."""
    from tests.wheel_checks import IGNORED_WHEEL_CHECKS

    out, _ = split
    wheels = sorted(str(p) for p in out.glob("*.whl"))
    assert len(wheels) >= 3
    twine = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *wheels],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert twine.returncode == 0, twine.stdout + twine.stderr
    contents = subprocess.run(
        [sys.executable, "-m", "check_wheel_contents", "--no-config", "--ignore",
         ",".join(IGNORED_WHEEL_CHECKS), *wheels],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert contents.returncode == 0, contents.stdout + contents.stderr


def _strip_hashes(members: dict[str, bytes], *, bad_size: bool = False) -> dict[str, bytes]:
    """RECORD rows as ``path,,size`` (no hash), as onnxruntime-rocm's wheels on PyPI have."""
    name = next(n for n in members if n.endswith(".dist-info/RECORD"))
    rows = []
    for line in members[name].decode().splitlines():
        path, _hash, size = line.split(",")
        if path != name and size:
            size = str(int(size) + 1) if bad_size and path.endswith("__init__.py") else size
            line = f"{path},,{size}"
        rows.append(line)
    return {**members, name: ("\n".join(rows) + "\n").encode()}


def test_record_rows_without_a_hash_are_accepted_as_pip_does(
    fat_wheel: Path, tmp_path: Path
) -> None:
    from tests.kpack.wheel_fixtures import rewrite_zip

    (tmp_path / "in").mkdir()
    src = rewrite_zip(fat_wheel, tmp_path / "in" / fat_wheel.name, _strip_hashes)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "kpack", "split-wheel", "--input", str(src), "--output-dir",
         str(out), "--wheel-type", "torch-fat"],
        capture_output=True, text=True, check=False, cwd=Path(__file__).resolve().parents[3],
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if "have no hash" in line]
    assert len(warnings) == 1 and "RECORD entries have no hash" in warnings[0], proc.stderr
    stripped = _strip_hashes(_members(fat_wheel))[_record(fat_wheel)].decode().splitlines()
    count = sum(1 for line in stripped if ",," in line and "RECORD" not in line)
    assert f" {count} RECORD entries" in warnings[0]
    for wheel in out.glob("*.whl"):  # every output RECORD hashes every file
        with zipfile.ZipFile(wheel) as zf:
            record = zf.read(next(n for n in zf.namelist() if n.endswith("RECORD"))).decode()
        rows = [r.split(",") for r in record.splitlines() if r]
        assert all(h.startswith("sha256=") for p, h, _ in rows if not p.endswith("RECORD"))
    (tmp_path / "bad").mkdir()
    bad = rewrite_zip(
        fat_wheel, tmp_path / "bad" / fat_wheel.name, lambda m: _strip_hashes(m, bad_size=True)
    )
    with pytest.raises(PackagingError, match="size mismatch"):
        spw.split_wheel(bad, tmp_path / "out2", _options())


def _members(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as zf:
        return {i.filename: zf.read(i) for i in zf.infolist()}


def _record(wheel: Path) -> str:
    return next(n for n in _members(wheel) if n.endswith(".dist-info/RECORD"))


def test_only_the_input_and_the_spools_touch_the_disk_before_the_wheels(
    fat_wheel: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Host binaries stream from their transform and archives from the spools, straight
    into the wheels: when the first wheel is written, the work dir holds only the extracted
    input and the spools, and the spools hold compressed frames, not the device code."""
    out = tmp_path / "split" / "out"
    seen: dict[Path, int] = {}
    real = spw.write_split_wheel

    def first_look(*args: object, **kwargs: object) -> object:
        if not seen:
            stagings = out.glob(".kpack-split-wheel.staging-*/out")
            work = next(s for s in stagings if (s / "in").exists())
            seen.update({p.relative_to(work): p.stat().st_size for p in work.rglob("*")
                         if p.is_file()})  # fmt: skip
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(spw, "write_split_wheel", first_look)
    report = spw.split_wheel(fat_wheel, out, _options(jobs=2))
    assert seen and {p.parts[0] for p in seen} == {"in", "spool"}, sorted(seen)
    spooled = sum(size for p, size in seen.items() if p.parts[0] == "spool")
    device_code = sum(r.original - r.stripped for r in report.libraries)
    assert 0 < spooled < device_code / 2
    assert not list(out.glob(".*staging*"))  # and the work dir is gone afterwards
