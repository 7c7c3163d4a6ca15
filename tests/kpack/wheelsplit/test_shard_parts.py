"""Shards of a wheel split, in-process: what makes every shard's host wheel the same.

- archive parts: with a small archive limit injected, a target's kernels span parts and
  the markers list them; every shard plans every kernel, so its host binaries (and the
  assembly) are the one-machine split's byte for byte;
- a shard pays for its own targets only: the other targets' kernels are described, never
  spooled or compressed (the spool holds the shard's frames and nothing else);
- the arguments a plan passes on resolve to the options it was made with.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import pytest

from kpack import wheelsplit as spw
from kpack.archive import compressed
from kpack.split._jobs import FatJob, run_fat_job
from kpack.transform import extract_kernels
from kpack.wheelsplit import _kernels
from kpack.wheelsplit._assemble import plan_assembly, scan_shard
from kpack.wheelsplit._assemble_write import write_assembly
from kpack.wheelsplit._options import report_dir_for
from kpack.wheelsplit._shard_plan import passed_on
from kpack.wheelsplit._shards import kernel_scope
from tests.kpack.wheel_fixtures import ROCRAND_LIB, make_twin_wheel

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def rocrand(debian_package: Callable[[str], Path]) -> Path:
    return debian_package("librocrand1") / ROCRAND_LIB


def _files(directory: Path) -> dict[str, bytes]:
    return {
        p.name: p.read_bytes()
        for p in sorted(directory.iterdir())
        if p.is_file() and not p.name.startswith(".")
    }


def test_shards_of_a_split_in_parts_assemble_to_the_whole(
    rocrand: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fat = make_twin_wheel(tmp_path / "in", rocrand)
    largest = max(k.size for k in extract_kernels(rocrand))
    monkeypatch.setattr(_kernels, "MAX_ARCHIVE_BYTES", largest + largest // 4 + 4096)
    options = spw.SplitOptions(overlay_root="torch/", device_package_prefix="amd-torch-device")
    full = spw.split_wheel(fat, tmp_path / "full", options)
    assert any("-part2_" in n for n in _names(tmp_path / "full"))  # parts, and markers naming them
    keys = full.targets
    assert len(keys) >= 4
    groups = [keys[::3], keys[1::3], keys[2::3]]
    shards = []
    for n, group in enumerate(groups):
        out = tmp_path / f"shard{n}"
        report = spw.split_wheel(fat, out, spw.SplitOptions(
            overlay_root="torch/", device_package_prefix="amd-torch-device", targets=group
        ))  # fmt: skip
        assert report.host_wheel == full.host_wheel and report.shard_targets == group
        assert _files(out)[full.host_wheel] == _files(tmp_path / "full")[full.host_wheel]
        shards.append(scan_shard(out))
    out = tmp_path / "assembled"
    write_assembly(plan_assembly(shards), out, report_dir_for(out, None))
    assert _files(out) == _files(tmp_path / "full")
    assert _files(report_dir_for(out, None)) == _files(report_dir_for(tmp_path / "full", None))


def _names(dist: Path) -> list[str]:
    import zipfile

    names: list[str] = []
    for wheel in sorted(dist.glob("*.whl")):
        with zipfile.ZipFile(wheel) as zf:
            names += zf.namelist()
    return names


def test_a_shard_spools_only_its_targets_kernels(rocrand: Path, tmp_path: Path) -> None:
    kernels = extract_kernels(rocrand)
    scope = kernel_scope(["gfx90a"])
    job = FatJob(stage="torch", kernel_name="lib/librocrand.so.1", source=rocrand,
                 size=rocrand.stat().st_size, depth=1, search_path="../.kpack/t_@GFXARCH@.kpack",
                 spool=tmp_path / "0.spool", scope=scope, level=3)  # fmt: skip
    outcome = run_fat_job(job)
    ours = [k for k in kernels if k.target.split(":")[0] == "gfx90a"]
    assert {k.target for k in outcome.kernels} == {"gfx90a:xnack+", "gfx90a:xnack-"}
    assert sorted((k.index, k.target) for k in outcome.kernels) == sorted(
        (k.index, k.target) for k in ours
    )
    assert outcome.skipped == len(outcome.out_of_scope) == len(kernels) - len(ours)
    assert {(k.index, k.target, k.original_size) for k in outcome.out_of_scope} == {
        (k.index, k.target, k.size) for k in kernels if k not in ours
    }
    # the spool holds the shard's frames, compressed, and no other target's bytes
    once = {k.location: k for k in ours}.values()  # wrappers of one bundle share its range
    frames = list(compressed([k.read() for k in once], 3, 1))
    assert (tmp_path / "0.spool").stat().st_size == sum(len(f) for f in frames)


@pytest.mark.parametrize(
    "argv",
    [
        ["--wheel-type", "torch-fat"],
        ["--device-package-prefix", "amd-x", "--overlay-root", ".", "--databases",
         "--keep-fat=-odd*", "--compression", "none", "--max-wheel-size", "1.5GB"],
        ["--device-package-prefix", "amd-x", "--generate-variant-wheel", "--variant-label",
         "amd", "--variant-schema", "0.2.0", "--device-requires-dist",
         "rocm-sdk-device-@GFXARCH@ == 7.1", "--compression-level", "3",
         "--max-expansion-ratio", "50", "--max-unpacked-size", "2GiB"],
    ],
)  # fmt: skip
def test_the_arguments_a_plan_passes_on_resolve_to_its_options(argv: list[str]) -> None:
    def options(args: list[str]) -> spw.SplitOptions:
        parser = argparse.ArgumentParser()
        spw.add_arguments(parser, shards=True)
        return spw.resolve_options(parser.parse_args(["--input", "w.whl", *args]))

    given = options(argv)
    assert options(passed_on(given)) == given
