"""The wheel split across machines (issue 31, items 5 and 6): ``kpack split-wheel
--print-shards N`` plans, each shard runs as its own process on an input dir holding only
the inputs its plan entry lists, ``kpack assemble-wheel-shards`` merges them, and every
wheel and the report are byte-identical to the one-machine split's.

Inputs: a wheel around a library hipcc compiled for six targets (two with xnack
variants), with rocBLAS database files (one target has database files only, one is named
through its package owner), and the real ``jax-rocm7-plugin`` wheel from PyPI (compressed
CCOB v3 bundles, LLVM generic targets). Independent oracles: every code object in the
assembled device wheels, read by the spec decoder, is the input's (pyelftools and
``zstandard`` decode the input); each shard's host wheel is the same file.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from kpack.wheelfile import Member, write_wheel
from tests.kpack.bundle_fixtures import read_kpack_by_spec
from tests.kpack.transform_fixtures import KERNEL_HIP, hip_env, run
from tests.kpack.wheel_fixtures import DATABASES, TAG, VERSION, make_plain_wheel, metadata
from tests.progress_lines import without_progress
from tests.pypi_inputs import (
    JAX_PLUGIN,
    Digests,
    fat_members,
    independent_code_objects,
    pypi_wheel,
)

pytestmark = [pytest.mark.real, pytest.mark.compile]

KPACK = (sys.executable, "-m", "kpack")
HIP_ARCHES = ("gfx803", "gfx900", "gfx906:xnack-", "gfx90a:xnack+", "gfx90a:xnack-", "gfx1030")
#: rocBLAS files of targets without code objects: gfx942's own, gfx1250's through its owner
EXTRA_DATABASES = {
    "torch/lib/rocblas/library/TensileLibrary_lazy_gfx942.dat": b"lazy gfx942\n",
    "torch/lib/rocblas/library/TensileLibrary_lazy_gfx1250-strict.dat": b"gfx1250-strict\n",
}
HIP_KEYS = ("gfx803", "gfx900", "gfx906", "gfx90a", "gfx942", "gfx1030", "gfx1250")
HIP_OPTIONS = (
    "--device-package-prefix=amd-torch-device",
    "--overlay-root=torch/",
    "--databases",
    "rocblas",
    "--generate-variant-wheel",
    "--max-wheel-size",
    "50MB",
)
JAX_OPTIONS = (
    "--device-package-prefix=jax-device",
    f"--overlay-root={JAX_PLUGIN.overlay_root}",
    "--device-requires-dist=rocm-sdk-device-@GFXARCH@ == 7.0",
)


def kpack(*args: str | os.PathLike[str], status: int = 0) -> subprocess.CompletedProcess[str]:
    """``python -m kpack -q ARGS`` in its own process, expecting exit ``status``."""
    cmd = [*KPACK, "-q", *map(os.fspath, args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == status, f"{cmd} -> {proc.returncode}\n{proc.stdout}{proc.stderr}"
    return proc


def error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The run's one ``error:`` line (and nothing else on stderr but progress)."""
    lines = without_progress(proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


def digests(directory: Path) -> dict[str, str]:
    """sha256 of every file of ``directory`` but the tools' hidden records."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.iterdir())
        if p.is_file() and not p.name.startswith(".")
    }


@dataclass(frozen=True)
class Sharded:
    """A plan run shard by shard and assembled, beside the one-machine split."""

    plan: list[dict[str, object]]
    shards: list[Path]  # each shard's output dir
    full: Path
    assembled: Path


def run_sharded(wheel: Path, options: tuple[str, ...], count: int, work: Path) -> Sharded:
    full = work / "full" / "dist"
    kpack("split-wheel", "--input", wheel, "--output-dir", full, *options)
    plan = json.loads(
        kpack("split-wheel", "--input", wheel, "--print-shards", str(count), *options).stdout
    )
    shards = []
    for entry in plan:
        machine = work / str(entry["name"])
        inputs = machine / "in"
        inputs.mkdir(parents=True)
        for name in entry["inputs"]:  # type: ignore[attr-defined]
            os.link(wheel.parent / name, inputs / name)  # only what the plan lists
        out = machine / "dist"
        kpack("split-wheel", "--input", inputs / wheel.name, "--output-dir", out, *entry["args"])  # type: ignore[misc]
        shards.append(out)
    assembled = work / "assembled" / "dist"
    kpack("assemble-wheel-shards", *shards, "--output-dir", assembled)
    return Sharded(plan, shards, full, assembled)


def assert_one_machine_split(sharded: Sharded) -> None:
    """The assembly holds the one-machine split's files and report, byte for byte."""
    full, assembled = sharded.full, sharded.assembled
    assert digests(assembled) == digests(full)
    reports = [d.with_name(d.name + "-split-reports") for d in (full, assembled)]
    assert digests(reports[1]) == digests(reports[0]) != {}
    hosts = {digests(s)[_host(full)] for s in sharded.shards}
    assert hosts == {digests(full)[_host(full)]}


def _host(dist: Path) -> str:
    report = next(dist.with_name(dist.name + "-split-reports").glob("*.json"))
    return str(json.loads(report.read_text())["host_wheel"])


def archived_code_objects(dist: Path, tree: Path) -> Digests:
    """Every code object in the device wheels' archives, read by the spec decoder."""
    found: Digests = collections.Counter()
    for whl in sorted(dist.glob("*.whl")):
        with zipfile.ZipFile(whl) as zf:
            zf.extractall(tree)
    for archive in sorted(p for p in tree.rglob("*.kpack") if p.is_file()):
        _, kernels = read_kpack_by_spec(archive.read_bytes())
        for (_key, target), data in kernels.items():
            found[(target, hashlib.sha256(data).hexdigest())] += 1
    return found


@pytest.fixture(scope="module")
def hip_library(hipcc: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hip")
    for name, value in (("a", 2), ("b", 5)):
        text = KERNEL_HIP.replace("NAME", name).replace("VALUE", str(value))
        (root / f"{name}.hip").write_text(text)
    arches = [f"--offload-arch={a}" for a in HIP_ARCHES]
    run(
        [hipcc, *arches, "-fPIC", "-shared", "a.hip", "b.hip", "-o", "libk.so"],
        env=hip_env(),
        cwd=root,
    )
    return root / "libk.so"


@pytest.fixture(scope="module")
def hip_wheel(hip_library: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    members = [
        Member("torch/__init__.py", b""),
        Member("torch/lib/libk.so", hip_library, executable=True),
        *(Member(n, d) for n, d in {**DATABASES, **EXTRA_DATABASES}.items()),
    ]
    dest = tmp_path_factory.mktemp("hip-wheel")
    return write_wheel(
        dest, dist_name="torch", version=VERSION, tag=TAG, members=members, metadata=metadata()
    ).path


@pytest.fixture(scope="module")
def hip_sharded(hip_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Sharded:
    return run_sharded(hip_wheel, HIP_OPTIONS, 3, tmp_path_factory.mktemp("hip-sharded"))


def test_hipcc_wheel_shards_assemble_to_the_one_machine_split(
    hip_sharded: Sharded, hip_library: Path, tmp_path: Path
) -> None:
    plan = hip_sharded.plan
    assert len(plan) == 3
    targets = [t for entry in plan for t in entry["targets"]]  # type: ignore[attr-defined]
    assert sorted(targets) == sorted(HIP_KEYS)
    assert all(
        entry["args"][:2] == ["--targets", ",".join(entry["targets"])]  # type: ignore
        for entry in plan
    )
    assert_one_machine_split(hip_sharded)
    names = set(digests(hip_sharded.assembled))
    assert {"torch-2.9.0-py3-none-linux_x86_64-variant.whl", "torch-2.9.0-variants.json"} <= names
    report = json.loads(next(hip_sharded.assembled.parent.glob("*-reports/*.json")).read_text())
    assert report["targets"] == report["shard_targets"] == list(HIP_KEYS)
    assert {r["name"] for r in report["budget"]} == {n for n in names if n.endswith(".whl")}
    # the oracle: the code objects of the assembled archives are the library's
    found = archived_code_objects(hip_sharded.assembled, tmp_path / "site")
    assert found == independent_code_objects(hip_library)


def test_each_shard_writes_its_own_device_wheels_and_reports_its_share(
    hip_sharded: Sharded,
) -> None:
    for entry, shard in zip(hip_sharded.plan, hip_sharded.shards, strict=True):
        keys = list(entry["targets"])  # type: ignore[call-overload]
        devices = sorted(n for n in digests(shard) if n.startswith("amd_torch_device_"))
        assert devices == sorted(
            f"amd_torch_device_{k}-2.9.0-py3-none-linux_x86_64.whl" for k in keys
        )
        (report_file,) = shard.with_name("dist-split-reports").glob("*.json")
        report = json.loads(report_file.read_text())
        assert report["shard_targets"] == keys and report["targets"] == list(HIP_KEYS)
        assert [r["key"] for r in report["device_wheels"]] == keys
        markdown = report_file.with_suffix(".md").read_text()
        assert f"- this shard's device wheels: {', '.join(keys)}" in markdown


def test_pypi_wheel_shards_assemble_to_the_one_machine_split(tmp_path: Path) -> None:
    wheel = pypi_wheel(JAX_PLUGIN)
    sharded = run_sharded(wheel, JAX_OPTIONS, 4, tmp_path)
    assert len(sharded.plan) == 4
    assert_one_machine_split(sharded)
    targets = {t for e in sharded.plan for t in e["targets"]}  # type: ignore[attr-defined]
    assert {"gfx9-4-generic", "gfx11-generic", "gfx90a"} <= targets
    device_bytes = [int(e["device_bytes"]) for e in sharded.plan]  # type: ignore[call-overload]
    assert max(device_bytes) < sum(device_bytes) / 2  # balanced, not all on one shard
    expected: Digests = collections.Counter()
    for so in fat_members(wheel, tmp_path / "fat"):
        expected += independent_code_objects(so)
    assert archived_code_objects(sharded.assembled, tmp_path / "site") == expected


# ---- bad shards: one error each, nothing written ------------------------------------------


def _copy(shard: Path, dest: Path) -> Path:
    """A copy of a shard's output dir and its report dir (hard links: the tests replace
    files, never write into them)."""
    for src in (shard, shard.with_name(shard.name + "-split-reports")):
        for path in sorted(src.rglob("*")):
            target = dest / src.name / path.relative_to(src)
            if path.is_dir():
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                os.link(path, target)
    return dest / shard.name


def _assemble_fails(shards: list[Path], out: Path, status: int = 1) -> str:
    line = error_line(kpack("assemble-wheel-shards", *shards, "--output-dir", out, status=status))
    assert not out.exists() and not out.with_name(out.name + "-split-reports").exists()
    return line


def test_a_missing_shard_leaves_its_targets_uncovered(hip_sharded: Sharded, tmp_path: Path) -> None:
    line = _assemble_fails(hip_sharded.shards[:-1], tmp_path / "out")
    missing = ", ".join(hip_sharded.plan[-1]["targets"])  # type: ignore[arg-type]
    assert f"{missing}: in no shard (a shard missing?)" in line


def test_overlapping_targets_are_named_with_both_shards(
    hip_sharded: Sharded, hip_wheel: Path, tmp_path: Path
) -> None:
    first = hip_sharded.plan[0]
    key = first["targets"][0]  # type: ignore[index]
    extra = tmp_path / "extra" / "dist"
    kpack(
        "split-wheel",
        "--input",
        hip_wheel,
        "--output-dir",
        extra,
        "--targets",
        key,
        *first["args"][2:],
    )  # type: ignore[index]
    line = _assemble_fails([*hip_sharded.shards, extra], tmp_path / "out")
    assert f"{key}: in two shards, {hip_sharded.shards[0]} and {extra}" in line
    assert "also in" not in line  # the wheel of that key is told once, as a target


def test_a_differing_host_wheel_is_named(hip_sharded: Sharded, tmp_path: Path) -> None:
    shard = _copy(hip_sharded.shards[1], tmp_path / "copy")
    host = shard / _host(hip_sharded.full)
    data = bytearray(host.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, other bytes
    host.unlink()
    host.write_bytes(bytes(data))
    line = _assemble_fails(
        [hip_sharded.shards[0], shard, *hip_sharded.shards[2:]], tmp_path / "out"
    )
    assert line == (
        f"error: cannot assemble the shards; {host}: differs from "
        f"{hip_sharded.shards[0] / host.name}"
    )


def test_a_foreign_file_is_named(hip_sharded: Sharded, tmp_path: Path) -> None:
    shard = _copy(hip_sharded.shards[2], tmp_path / "copy")
    (shard / "stray-1.0-py3-none-any.whl").write_bytes(b"PK")
    line = _assemble_fails([*hip_sharded.shards[:2], shard], tmp_path / "out")
    assert line == (
        f"error: cannot assemble the shards; {shard}/stray-1.0-py3-none-any.whl: foreign file "
        "(not among the outputs torch-2.9.0-split-report.json lists)"
    )


def test_a_shard_of_another_split_is_refused(
    hip_sharded: Sharded, hip_wheel: Path, tmp_path: Path
) -> None:
    """Shards must have split with the same options: another prefix is another host."""
    first = hip_sharded.plan[0]
    other = tmp_path / "other" / "dist"
    args = [a for a in first["args"] if not a.startswith("--device-package-prefix")]  # type: ignore[attr-defined]
    kpack(
        "split-wheel",
        "--input",
        hip_wheel,
        "--output-dir",
        other,
        *args,
        "--device-package-prefix=other-device",
    )
    line = _assemble_fails([other, *hip_sharded.shards[1:]], tmp_path / "out")
    report = hip_sharded.shards[1].with_name("dist-split-reports") / "torch-2.9.0-split-report.json"
    assert line.startswith(
        f"error: the shards are not of one split; {report}: host wheel "
        "torch-2.9.0-py3-none-linux_x86_64.whl of "
    )
    assert line.count("(split with other options?)") == 2


def test_a_shard_in_directory_format_is_refused(
    hip_sharded: Sharded, hip_wheel: Path, tmp_path: Path
) -> None:
    unpacked = tmp_path / "unpacked" / "dist"
    kpack("split-wheel", "--input", hip_wheel, "--output-dir", unpacked, "--output-format",
          "directory", *hip_sharded.plan[0]["args"])  # type: ignore[misc]  # fmt: skip
    line = _assemble_fails([unpacked, *hip_sharded.shards[1:]], tmp_path / "out")
    host = unpacked / _host(hip_sharded.full).removesuffix(".whl")
    assert f"{host}: an unpacked wheel (--output-format directory): assemble shards that " \
        "wrote wheels" in line  # fmt: skip
    assert "missing" not in line


def test_a_shard_without_its_report_is_named(hip_sharded: Sharded, tmp_path: Path) -> None:
    shard = _copy(hip_sharded.shards[0], tmp_path / "copy")
    for path in shard.with_name("dist-split-reports").glob("*.json"):
        path.unlink()
    line = _assemble_fails([shard, *hip_sharded.shards[1:]], tmp_path / "out")
    assert line.startswith(f"error: cannot read the shards; {shard}: no split report in ")


def test_a_tampered_report_is_named_by_field(hip_sharded: Sharded, tmp_path: Path) -> None:
    shard = _copy(hip_sharded.shards[0], tmp_path / "copy")
    (report,) = shard.with_name("dist-split-reports").glob("*.json")
    data = json.loads(report.read_text())
    data["device_wheels"][0]["size"] = "big"
    data["extra"] = 1
    report.unlink()
    report.write_text(json.dumps(data))
    line = _assemble_fails([shard, *hip_sharded.shards[1:]], tmp_path / "out")
    assert (
        f"{report}: not a split report: extra: unknown key; device_wheels[0].size: expected "
        "int, got str" in line
    )


def test_the_outputs_must_lie_apart_from_the_shards(hip_sharded: Sharded) -> None:
    inside = hip_sharded.shards[0] / "out"
    line = error_line(
        kpack("assemble-wheel-shards", *hip_sharded.shards, "--output-dir", inside, status=2)
    )
    assert line == f"error: {inside} and the shard {hip_sharded.shards[0]} overlap"
    line = error_line(
        kpack(
            "assemble-wheel-shards",
            hip_sharded.shards[0],
            hip_sharded.shards[0],
            "--output-dir",
            "x",
            status=2,
        )
    )
    assert line == f"error: the shard {hip_sharded.shards[0]} is given twice"


# ---- --targets and --print-shards on bad input --------------------------------------------


def test_a_target_not_in_the_wheel_lists_what_it_has(hip_wheel: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = kpack(
        "split-wheel",
        "--input",
        hip_wheel,
        "--output-dir",
        out,
        "--targets",
        "gfx1100,gfx90a",
        *HIP_OPTIONS,
        status=2,
    )
    assert error_line(proc) == (
        f"error: --targets gfx1100: not in {hip_wheel.name}; its device wheels are for: "
        + ", ".join(HIP_KEYS)
    )
    assert not out.exists()


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("gfx90a,cuda", "--targets 'cuda': not a target (gfx942, gfx90a:xnack+, gfx9-4-generic)"),
        ("", "--targets: give at least one target"),
    ],
)
def test_bad_targets_are_usage_errors(
    hip_wheel: Path, tmp_path: Path, given: str, message: str
) -> None:
    proc = kpack(
        "split-wheel",
        "--input",
        hip_wheel,
        "--output-dir",
        tmp_path / "out",
        f"--targets={given}",
        *HIP_OPTIONS,
        status=2,
    )
    assert error_line(proc) == f"error: {message}"


def test_targets_with_features_or_owned_name_their_device_wheel(
    hip_wheel: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    kpack(
        "split-wheel",
        "--input",
        hip_wheel,
        "--output-dir",
        out,
        "--targets",
        "gfx90a:xnack+,gfx1250-strict",
        *HIP_OPTIONS,
    )
    devices = sorted(n for n in digests(out) if n.startswith("amd_torch_device_"))
    assert devices == [
        "amd_torch_device_gfx1250-2.9.0-py3-none-linux_x86_64.whl",
        "amd_torch_device_gfx90a-2.9.0-py3-none-linux_x86_64.whl",
    ]
    with zipfile.ZipFile(out / devices[1]) as zf:
        names = zf.namelist()
    assert {
        "torch/.kpack/torch_gfx90a:xnack+.kpack",
        "torch/.kpack/torch_gfx90a:xnack-.kpack",
    } <= set(names)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--print-shards", "0"), "--print-shards 0: give at least 1"),
        (("--print-shards", "2", "--targets", "gfx90a"), "--print-shards plans --targets itself"),
        (
            ("--print-shards", "2", "--output-format", "directory"),
            "--print-shards plans wheel output only: kpack assemble-wheel-shards merges wheels",
        ),
        (
            ("--print-shards", "2", "--output-dir", "x"),
            "--print-shards writes nothing: drop --output-dir",
        ),
    ],
)
def test_print_shards_refuses_what_it_cannot_plan(
    hip_wheel: Path, extra: tuple[str, ...], message: str
) -> None:
    proc = kpack("split-wheel", "--input", hip_wheel, *HIP_OPTIONS, *extra, status=2)
    assert error_line(proc) == f"error: {message}"


def test_the_rocm_kpack_face_has_no_shard_flags(hip_wheel: Path, tmp_path: Path) -> None:
    """rocm-kpack's split_python_wheels has no --targets nor --print-shards: neither has
    its face here (kpack split-wheel's own)."""
    for flag in ("--targets=gfx90a", "--print-shards=2"):
        cmd = [
            sys.executable,
            "-m",
            "rocm_kpack.tools.split_python_wheels",
            "--input",
            str(hip_wheel),
            "--output-dir",
            str(tmp_path / "out"),
            *HIP_OPTIONS[:4],
            flag,
        ]
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3] / "python")}
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
        assert proc.returncode == 2, proc.stderr
        assert f"unrecognized arguments: {flag}" in proc.stderr


def test_an_unchanged_wheel_is_one_shard(tmp_path: Path) -> None:
    wheel = make_plain_wheel(tmp_path / "in")
    plan = json.loads(
        kpack(
            "split-wheel",
            "--input",
            wheel,
            "--print-shards",
            "4",
            "--overlay-root=torch/",
            "--device-package-prefix=d",
        ).stdout
    )
    assert [(e["name"], e["targets"], e["device_bytes"]) for e in plan] == [("all", [], 0)]
    proc = kpack(
        "split-wheel",
        "--input",
        wheel,
        "--output-dir",
        tmp_path / "out",
        "--targets",
        "gfx90a",
        "--device-package-prefix=d",
        status=2,
    )
    assert error_line(proc) == (
        f"error: --targets gfx90a: not in {wheel.name}; its device wheels are for: none (no "
        "device code)"
    )
