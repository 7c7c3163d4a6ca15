"""TheRock's rocm-kpack call sites, run exactly as TheRock's files write them, on real inputs.

Each command line is copied from the file named in its row (TheRock at commit
``89553ce3746eda74ade42557470d25e37c91b6f0``), with ``<kpack>`` the ``python/`` dir of this
repository (TheRock points it at ``rocm-systems/shared/kpack/python``) and the paths TheRock
computes filled in. Every call site runs twice into the same output, as incremental builds
do; the second run must succeed and leave the same files. The outputs checked are the ones
rocm-kpack gives (artifact dir names, archive names and places, extracted file names; read
from rocm-kpack's ``artifact_splitter.py``, ``binutils.py`` and ``artifact_combiner.py``,
``ROCm/rocm-kpack`` at ``e3483286e751060b3a70b792792cc122632c66e8`` and
``ROCm/rocm-systems`` ``shared/kpack`` at ``1830cd28dd3781c52160d8dc4fc3b193e5ce77e1``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from kpack.archive import KpackArchive
from kpack.resolve import resolve_binary
from tests.conftest import require

REPO = Path(__file__).resolve().parents[2]
KPACK_PY = REPO / "python"  # TheRock: ${THEROCK_ROCM_SYSTEMS_SOURCE_DIR}/shared/kpack/python
THEROCK = "ROCm/TheRock@89553ce3746eda74ade42557470d25e37c91b6f0"
ROCRAND = "math-libs/rocRAND/stage"
ROCRAND_LIB = "usr/lib/x86_64-linux-gnu/librocrand.so.1.1"
# bookworm librocrand1's targets (tests/kpack/bundle_fixtures.py ROCRAND_FLAGS)
ROCRAND_TARGETS = [
    "gfx1030",
    "gfx803",
    "gfx900:xnack-",
    "gfx906:xnack-",
    "gfx908:xnack-",
    "gfx90a:xnack+",
    "gfx90a:xnack-",
]
AMDGCN = "hipv4-amdgcn-amd-amdhsa--"
# ${THEROCK_BINARY_DIR}/compiler/amd-llvm/dist/lib/llvm/bin/clang-offload-bundler
BUNDLER = "build/compiler/amd-llvm/dist/lib/llvm/bin/clang-offload-bundler"


def run(
    argv: list[str], cwd: Path, python: str = sys.executable
) -> subprocess.CompletedProcess[str]:
    """``cmake -E env PYTHONPATH=<kpack>/python <python> ...``, as TheRock's CMake runs it."""
    env = {**os.environ, "PYTHONPATH": str(KPACK_PY)}
    return subprocess.run(
        [python, *argv], capture_output=True, text=True, cwd=cwd, env=env, check=False
    )


def tree_digest(root: Path) -> dict[str, str]:
    """relpath -> sha256 / link target / 'dir' for everything below ``root``, records out."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.name.startswith((".kpack-split-", ".kpack-recombine-")):
            continue
        if path.is_symlink():
            out[rel] = "-> " + os.readlink(path)
        elif path.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@dataclass(frozen=True)
class Inputs:
    unsplit: Path  # TheRock's build/artifacts-unsplit: the sample tree (kpack mode)
    rocrand: Path  # Debian's fat librocrand.so.1.1
    work: Path


@pytest.fixture(scope="module")
def inputs(
    tmp_path_factory: pytest.TempPathFactory, debian_package: Callable[[str], Path]
) -> Inputs:
    return make_inputs(tmp_path_factory, debian_package)


def make_inputs(
    tmp_path_factory: pytest.TempPathFactory, debian_package: Callable[[str], Path]
) -> Inputs:
    require(shutil.which("hipcc") is not None, "hipcc is not installed")
    from sample_tree.make_sample_tree import make_sample_tree

    tmp = tmp_path_factory.mktemp("therock")
    unsplit = make_sample_tree(tmp / "build" / "artifacts-unsplit", kpack_split=True)
    return Inputs(unsplit, debian_package("librocrand1") / ROCRAND_LIB, tmp)


# --- the call sites --------------------------------------------------------------------------


def split_by_path(i: Inputs, out: Path) -> list[str]:
    """cmake/therock_artifacts.cmake (``_split_tool``, ``_split_command_args``): the file run
    by path with ``PYTHONPATH=<kpack>/python``; ``--gpu-targets ${THEROCK_AMDGPU_TARGETS}``
    expands to one argument per target."""
    return [
        str(KPACK_PY / "rocm_kpack/tools/split_artifacts.py"),
        "--artifact-dir",
        str(i.unsplit / "rand_lib_generic"),
        "--output-dir",
        f"{out}/",
        "--artifact-prefix",
        "rand_lib",
        "--clang-offload-bundler",
        str(i.work / BUNDLER),
    ]


def split_by_path_targets(i: Inputs, out: Path) -> list[str]:
    return [
        *split_by_path(i, out),
        "--split-databases",
        "rocblas",
        "hipblaslt",
        "--gpu-targets",
        "gfx1030",
        "gfx90a",
    ]


def split_batch(i: Inputs, out: Path) -> list[str]:
    """docs/rfcs/RFC0008-Multi-Arch-Packaging.md, "Split Phase": a shard dir of fat
    artifacts (here ``rand_lib_gfx103X``, the sample's fat rocRAND artifact)."""
    return [
        "-m",
        "rocm_kpack.tools.split_artifacts",
        "--batch-artifact-parent-dir",
        str(i.work / "artifacts/gfx103X-build"),
        "--output-dir",
        str(out),
        "--split-databases",
        "rocblas",
        "hipblaslt",
        "--clang-offload-bundler",
        "/path/to/bundler",
    ]


def bulk_unbundle(gfx_arch: str) -> Callable[[Inputs, Path], list[str]]:
    """comm-libs/rccl-translate/CMakeLists.txt (``-m rocm_kpack.tools.bulk_unbundle
    --gfx-arch gfx1250 --output-dir ${_unbundled_dir} ${RCCL_LIBRARY}``), on Debian's fat
    librocrand (no RCCL or gfx1250 code is packaged)."""

    def argv(i: Inputs, out: Path) -> list[str]:
        return [
            "-m",
            "rocm_kpack.tools.bulk_unbundle",
            "--gfx-arch",
            gfx_arch,
            "--output-dir",
            str(out),
            str(i.rocrand),
        ]

    return argv


def recombine(i: Inputs, out: Path) -> list[str]:
    """docs/rfcs/RFC0008-Multi-Arch-Packaging.md, "Recombine Phase"."""
    return [
        "-m",
        "rocm_kpack.tools.recombine_artifacts",
        "--input-shards-dir",
        str(i.work / "split"),
        "--config",
        str(i.work / "packaging-config.json"),
        "--output-dir",
        str(out),
    ]


# --- what rocm-kpack gives -------------------------------------------------------------------


def runtime_finds_gfx1030(out: Path, artifacts: list[str]) -> bool:
    """The artifacts overlaid (as TheRock flattens them): the runtime's lookup of
    librocrand's gfx1030 code object succeeds."""
    merged = out.parent / f"{out.name}.merged"
    shutil.rmtree(merged, ignore_errors=True)
    for art in artifacts:
        shutil.copytree(out / art / ROCRAND, merged, symlinks=True, dirs_exist_ok=True)
    resolution = resolve_binary(merged / "lib/librocrand.so.1.1", ["amdgcn-amd-amdhsa--gfx1030"])
    shutil.rmtree(merged)
    return resolution.missing == () and len(resolution.lookups) == 1


def split_outputs(targets: list[str]) -> Callable[[Path], None]:
    def check(out: Path) -> None:
        names = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
        assert names == sorted(["rand_lib_generic", *(f"rand_lib_{t}" for t in targets)])
        for target in targets:
            kpack = out / f"rand_lib_{target}/{ROCRAND}/.kpack/rand_lib_{target}.kpack"
            with KpackArchive.open(kpack) as archive:
                assert archive.keys() == [(f"{ROCRAND}/lib/librocrand.so.1.1#0", target)]
        assert runtime_finds_gfx1030(out, ["rand_lib_generic", "rand_lib_gfx1030"])

    return check


def unbundled(names: list[str]) -> Callable[[Path], None]:
    def check(out: Path) -> None:
        assert sorted(p.name for p in out.iterdir()) == sorted(names)

    return check


def recombined(out: Path) -> None:
    names = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert names == ["rand_lib_generic", "rand_lib_gfx103X", "rand_lib_gfx90X"]
    generic = out / "rand_lib_generic"
    assert (generic / ROCRAND / "lib/librocrand.so.1.1").is_file()
    assert not list(generic.rglob("*.kpack"))
    kpacks = {
        group: sorted(p.name for p in (out / f"rand_lib_{group}/{ROCRAND}/.kpack").iterdir())
        for group in ("gfx90X", "gfx103X")
    }
    assert kpacks == {
        "gfx90X": [f"rand_lib_{t}.kpack" for t in ("gfx90a:xnack+", "gfx90a:xnack-")],
        "gfx103X": ["rand_lib_gfx1030.kpack"],
    }
    assert (out / "rand_lib_gfx103X/artifact_manifest.txt").read_text() == f"{ROCRAND}\n"
    assert runtime_finds_gfx1030(out, ["rand_lib_generic", "rand_lib_gfx103X"])


def prepare_shards(i: Inputs) -> None:
    """Two build shards for the recombine: the batch split of a gfx103X shard and a gfx90X
    one, each split from the sample tree's fat rocRAND artifact with its own targets."""
    split = i.work / "split"
    if split.exists():
        return
    for shard, targets in (("gfx103X-build", "gfx1030"), ("gfx90X-build", "gfx90a")):
        out = split / shard
        proc = run(
            [
                "-m",
                "rocm_kpack.tools.split_artifacts",
                "--artifact-dir",
                str(i.unsplit / "rand_lib_generic"),
                "--artifact-prefix",
                "rand_lib",
                "--output-dir",
                str(out),
                "--gpu-targets",
                targets,
            ],
            i.work,
        )
        assert proc.returncode == 0, proc.stderr
    config = {
        "primary_shard": "gfx103X-build",
        "architecture_groups": {
            "gfx90X": {
                "display_name": "ROCm gfx90X",
                "architectures": ["gfx90a:xnack+", "gfx90a:xnack-"],
            },
            "gfx103X": {"display_name": "ROCm gfx103X", "architectures": ["gfx1030"]},
            "gfx110X": {"display_name": "ROCm gfx110X", "architectures": ["gfx1100"]},
        },
    }
    (i.work / "packaging-config.json").write_text(json.dumps(config))


def prepare_batch_shard(i: Inputs) -> None:
    shard = i.work / "artifacts/gfx103X-build"
    if not shard.exists():
        shutil.copytree(i.unsplit / "rand_lib_generic", shard / "rand_lib_gfx103X", symlinks=True)


@dataclass(frozen=True)
class CallSite:
    where: str
    argv: Callable[[Inputs, Path], list[str]]
    check: Callable[[Path], None]
    prepare: Callable[[Inputs], None] = lambda i: None


CALL_SITES = {
    "therock_artifacts.cmake split by path": CallSite(
        "cmake/therock_artifacts.cmake", split_by_path, split_outputs(ROCRAND_TARGETS)
    ),
    "therock_artifacts.cmake split, databases and gpu targets": CallSite(
        "cmake/therock_artifacts.cmake",
        split_by_path_targets,
        split_outputs(["gfx1030", "gfx90a:xnack+", "gfx90a:xnack-"]),
    ),
    "RFC0008 split_artifacts batch": CallSite(
        "docs/rfcs/RFC0008-Multi-Arch-Packaging.md",
        split_batch,
        split_outputs(ROCRAND_TARGETS),
        prepare_batch_shard,
    ),
    "rccl-translate bulk_unbundle": CallSite(
        "comm-libs/rccl-translate/CMakeLists.txt",
        bulk_unbundle("gfx1030"),
        unbundled([f"{AMDGCN}gfx1030.hsaco"]),
    ),
    "rccl-translate bulk_unbundle, feature variants": CallSite(
        "comm-libs/rccl-translate/CMakeLists.txt",
        bulk_unbundle("gfx90a"),
        unbundled([f"{AMDGCN}gfx90a:xnack+.hsaco", f"{AMDGCN}gfx90a:xnack-.hsaco"]),
    ),
    "RFC0008 recombine_artifacts": CallSite(
        "docs/rfcs/RFC0008-Multi-Arch-Packaging.md", recombine, recombined, prepare_shards
    ),
}


@pytest.mark.real
@pytest.mark.compile
@pytest.mark.parametrize("name", list(CALL_SITES))
def test_call_site_runs_as_written_and_reruns(inputs: Inputs, name: str) -> None:
    site = CALL_SITES[name]
    site.prepare(inputs)
    out = inputs.work / "out" / name.replace(" ", "_").replace(",", "")
    first = run(site.argv(inputs, out), inputs.work)
    assert first.returncode == 0, f"{THEROCK} {site.where}: {first.stderr}"
    site.check(out)
    before = tree_digest(out)
    second = run(site.argv(inputs, out), inputs.work)  # the incremental build's re-run
    assert second.returncode == 0, f"{THEROCK} {site.where} (re-run): {second.stderr}"
    site.check(out)
    assert tree_digest(out) == before
    assert "Traceback" not in first.stderr + second.stderr


@pytest.mark.real
def test_bulk_unbundle_of_gfx1250_as_written(
    debian_package: Callable[[str], Path], tmp_path: Path
) -> None:
    """The exact rccl-translate line on a library without gfx1250 code: one error line
    naming the library and the architecture (rocm-kpack raises 'No code objects for
    architecture ...'), exit 2 (a --gfx-arch the file has no code for: a usage error),
    nothing written."""
    lib = debian_package("librocrand1") / ROCRAND_LIB
    out = tmp_path / "unbundled"
    proc = run(
        [
            "-m",
            "rocm_kpack.tools.bulk_unbundle",
            "--gfx-arch",
            "gfx1250",
            "--output-dir",
            str(out),
            str(lib),
        ],
        tmp_path,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "gfx1250" in lines[0] and str(lib) in lines[0]
    assert not out.exists()


def test_the_files_therock_lists_as_depends_exist() -> None:
    """The DEPENDS of cmake/therock_artifacts.cmake and comm-libs/CMakeLists.txt +
    comm-libs/rccl-translate/CMakeLists.txt."""
    for rel in (
        "rocm_kpack/tools/split_artifacts.py",
        "rocm_kpack/database_handlers.py",
        "rocm_kpack/binutils.py",
        "rocm_kpack/ccob_parser.py",
        "rocm_kpack/tools/bulk_unbundle.py",
    ):
        assert (KPACK_PY / rel).is_file(), rel


@pytest.mark.parametrize(
    "module",
    [
        "rocm_kpack.tools.split_artifacts",
        "rocm_kpack.tools.bulk_unbundle",
        "rocm_kpack.tools.recombine_artifacts",
        "rocm_kpack.tools.split_python_wheels",
    ],
)
def test_every_module_answers_help(module: str, tmp_path: Path) -> None:
    proc = run(["-m", module, "--help"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "usage:" in proc.stdout


@pytest.mark.real
@pytest.mark.compile
def test_split_by_path_over_a_build_dir_rocm_kpack_populated(inputs: Inputs) -> None:
    """TheRock's incremental build after a swap: the build dir's split artifacts were
    written by rocm-kpack (same dir names, its own bytes, no record of ours). The CMake
    command, unchanged (no ``--force``), replaces exactly the artifact dirs it writes, as
    rocm-kpack's splitter does; nothing else in the output dir is touched."""
    out = inputs.work / "out" / "swap-in"
    assert run(split_by_path(inputs, out), inputs.work).returncode == 0
    # what rocm-kpack leaves instead: no record, other bytes, a file ours never writes
    for record in out.glob(".kpack-split-*"):
        record.unlink()
    manifest = out / "rand_lib_generic" / "artifact_manifest.txt"
    manifest.write_text(manifest.read_text() + "rocm-kpack/stage\n")
    (out / "rand_lib_gfx1030" / "leftover-of-rocm-kpack.txt").write_text("theirs")
    (out / "other_lib_gfx1030").mkdir()
    (out / "other_lib_gfx1030" / "keep.txt").write_text("another artifact")
    (out / "notes.txt").write_text("a user's file")
    generic = str(inputs.unsplit / "rand_lib_generic")
    native = [
        "-m", "kpack", "split-artifacts", "--artifact-dir", generic,
        "--output-dir", str(out), "--artifact-prefix", "rand_lib",
    ]  # fmt: skip
    refused = run(native, inputs.work)  # our own CLI keeps its record rule
    assert refused.returncode == 1 and "not written by kpack split" in refused.stderr
    second = run(split_by_path(inputs, out), inputs.work)
    assert second.returncode == 0, second.stderr
    names = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert names == sorted(
        ["notes.txt", "other_lib_gfx1030", "rand_lib_generic"]
        + [f"rand_lib_{t}" for t in ROCRAND_TARGETS]
    )
    assert "rocm-kpack/stage" not in manifest.read_text()
    assert not (out / "rand_lib_gfx1030" / "leftover-of-rocm-kpack.txt").exists()
    assert (out / "other_lib_gfx1030" / "keep.txt").read_text() == "another artifact"
    assert (out / "notes.txt").read_text() == "a user's file"
    assert runtime_finds_gfx1030(out, ["rand_lib_generic", "rand_lib_gfx1030"])
    assert run(split_by_path(inputs, out), inputs.work).returncode == 0  # and again
