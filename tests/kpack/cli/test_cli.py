"""``kpack`` command line: every subcommand, every split option enforced, one-line errors."""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kpack.archive import KernelInput, KpackArchive, write_kpack
from kpack.cli import main
from kpack.split import _jobs as split_work
from kpack.split import _pool as split_pool
from tests.conftest import require
from tests.kpack.bundle_fixtures import (
    AMDGCN,
    fake_code_object,
    sample_bundle,
    section,
    spec_plain_bundle,
)
from tests.kpack.split.test_split import (
    BLAS,
    MIOPEN,
    TENSILE,
    BlasTree,
    blas_tree,
    corrupt_fat,
    files_of,
    flatten,
    listing,
    make_fat,
    manifest,
    names_in,
    put,
)
from tests.kpack.transform_fixtures import synthetic

REPO = Path(__file__).resolve().parents[3]


#: a progress line of a CI log (kpack.common.progress), before the error line
PROGRESS = re.compile(r"^\[ *\d+\.\ds\] ")


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> BlasTree:
    tmp = tmp_path_factory.mktemp("cli")
    return blas_tree(tmp / "artifacts", tmp / "build")


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if not PROGRESS.match(line)]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def split_cli(
    capsys: pytest.CaptureFixture[str], tree: BlasTree, out: Path, *extra: str
) -> tuple[int, str, str]:
    return run_cli(
        capsys, "split-artifacts", "--artifact-dir", tree.artifact, "--output-dir", out, *extra
    )


# --- python -m kpack --------------------------------------------------------------------------


def test_python_m_kpack_and_verbose_logging(tree: BlasTree, tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "kpack",
        "split-artifacts",
        "--artifact-dir",
        str(tree.artifact),
        "--output-dir",
    ]
    quiet = subprocess.run(
        [*cmd, str(tmp_path / "q")], capture_output=True, text=True, cwd=REPO, check=False
    )
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr.splitlines() == [  # only the missing stage dir is worth a warning
        f"WARNING kpack.artifact.tree: {tree.artifact}/artifact_manifest.txt: stage directory "
        "'missing/stage' does not exist; skipped",
        "6 notes (-v shows them)",  # notes on stderr, each one with -v
    ]
    assert "note:" not in quiet.stdout
    assert "blas_lib_gfx94X-dcgpu -> blas_lib: 5 artifact dirs" in quiet.stdout
    loud = subprocess.run(
        [*cmd, str(tmp_path / "v"), "-v"], capture_output=True, text=True, cwd=REPO, check=False
    )
    assert loud.returncode == 0, loud.stderr
    assert "INFO kpack.split:" in loud.stderr and "INFO kpack.split._archives: wrote" in loud.stderr
    splitting = [line for line in loud.stderr.splitlines() if "splitting " in line]
    assert splitting and all(line.endswith((" B)", " kB)")) for line in splitting), loud.stderr
    helped = subprocess.run(
        [sys.executable, "-m", "kpack", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert helped.returncode == 0 and "split-artifacts" in helped.stdout


# --- split-artifacts: every option --------------------------------------------------------------


def test_split_defaults(capsys: pytest.CaptureFixture[str], tree: BlasTree, tmp_path: Path) -> None:
    rc, out, err = split_cli(capsys, tree, tmp_path)
    assert (rc, err) == (0, "6 notes (-v shows them)\n")
    assert "4 archives" in out and "0 database files" in out and "note" not in out
    kpack = tmp_path / "blas_lib_gfx942" / BLAS / ".kpack" / "blas_lib_gfx942.kpack"
    with KpackArchive.open(kpack) as archive:
        assert archive.scheme == "zstd-per-kernel"


def test_split_databases_option(
    capsys: pytest.CaptureFixture[str], tree: BlasTree, tmp_path: Path
) -> None:
    rc, out, _ = split_cli(capsys, tree, tmp_path / "a", "--split-databases", "rocblas")
    assert rc == 0 and "4 database files" in out
    generic = files_of(tmp_path / "a" / "blas_lib_generic")
    assert f"{BLAS}/{TENSILE}/TensileLibrary_lazy_gfx942.dat" not in generic
    assert f"{MIOPEN}/share/miopen/db/gfx942130.db.txt" in generic  # miopen not selected
    rc, out, _ = split_cli(capsys, tree, tmp_path / "b", "--split-databases", "miopen", "rocblas")
    assert rc == 0 and "7 database files" in out
    rc, _, err = split_cli(capsys, tree, tmp_path / "c", "--split-databases", "rocfft")
    assert rc == 2 and "--split-databases: invalid choice: 'rocfft'" in one_error_line(err)


def test_gpu_targets_option(
    capsys: pytest.CaptureFixture[str], tree: BlasTree, tmp_path: Path
) -> None:
    rc, _, _ = split_cli(
        capsys,
        tree,
        tmp_path / "a",
        "--split-databases",
        "rocblas",
        "miopen",
        "--gpu-targets",
        "gfx942",
        "gfx90a:xnack+",
    )
    assert rc == 0
    names = names_in(tmp_path / "a")
    assert names == [
        "blas_lib_generic",
        "blas_lib_gfx90a",
        "blas_lib_gfx90a:xnack-",
        "blas_lib_gfx942",
        "blas_lib_gfx942:xnack+",
    ]
    rc, _, _ = split_cli(capsys, tree, tmp_path / "b", "--gpu-targets", "gfx1100,gfx90a")
    assert rc == 0
    assert names_in(tmp_path / "b") == [
        "blas_lib_generic",
        "blas_lib_gfx1100",
        "blas_lib_gfx90a:xnack-",
    ]
    rc, _, err = split_cli(capsys, tree, tmp_path / "c", "--gpu-targets", "gfx94X-dcgpu")
    assert rc == 2 and "gfx94X-dcgpu" in one_error_line(err)
    assert not (tmp_path / "c").exists()


def test_compression_options(
    capsys: pytest.CaptureFixture[str], tree: BlasTree, tmp_path: Path
) -> None:
    rc, _, _ = split_cli(capsys, tree, tmp_path / "none", "--compression", "none")
    assert rc == 0
    kpack = tmp_path / "none" / "blas_lib_gfx942" / BLAS / ".kpack" / "blas_lib_gfx942.kpack"
    with KpackArchive.open(kpack) as archive:
        assert archive.scheme == "none"
        archive.verify()
    rc, _, err = split_cli(
        capsys, tree, tmp_path / "x", "--compression", "none", "--compression-level", "5"
    )
    assert rc == 2 and "--compression-level applies to --compression zstd" in one_error_line(err)
    rc, _, err = split_cli(capsys, tree, tmp_path / "y", "--compression-level", "23")
    assert rc == 2 and "1..22" in one_error_line(err)
    rc, _, err = split_cli(capsys, tree, tmp_path / "z", "--compression", "lz4")
    assert rc == 2 and "--compression: invalid choice: 'lz4'" in one_error_line(err)


def test_compression_level_is_honoured(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Levels 1 and 19 give different frames for the same code objects."""
    require(shutil.which("gcc") is not None, "gcc is not installed")
    rng = random.Random(7)
    words = [bytes(rng.choice(b"abcdefghij") for _ in range(6)) for _ in range(300)]
    code = fake_code_object("gfx942", 64) + b" ".join(rng.choice(words) for _ in range(40_000))
    bundle = spec_plain_bundle([(AMDGCN + "gfx942", code)])
    content, starts = section(bundle)
    lib = synthetic(tmp_path / "build", "lvl", content, starts)
    art = tmp_path / "lvl_lib_gfx942"
    put(art, "s/stage", "lib/liblvl.so", lib)
    manifest(art, "s/stage")
    sizes = {}
    for level in ("1", "19"):
        rc, _, _ = run_cli(
            capsys,
            "split-artifacts",
            "--artifact-dir",
            art,
            "--output-dir",
            tmp_path / level,
            "--compression-level",
            level,
        )
        assert rc == 0
        kpack = tmp_path / level / "lvl_lib_gfx942" / "s/stage/.kpack/lvl_lib_gfx942.kpack"
        sizes[level] = kpack.stat().st_size
        with KpackArchive.open(kpack) as archive:
            assert archive.read("s/stage/lib/liblvl.so#0", "gfx942") == code
    assert sizes["19"] < sizes["1"] * 0.95, sizes


def test_jobs_option(
    capsys: pytest.CaptureFixture[str],
    tree: BlasTree,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[int, int]] = []
    real_pool = split_pool._pool

    def spy(jobs: int, count: int, **kw: str):  # type: ignore[no-untyped-def]
        seen.append((jobs, count))
        return real_pool(jobs, count, **kw)

    monkeypatch.setattr(split_pool, "_pool", spy)
    monkeypatch.setenv("KPACK_POOL_MIN_BYTES", "0")  # small inputs through the workers too
    assert split_cli(capsys, tree, tmp_path / "one", "-j", "1")[0] == 0
    assert split_cli(capsys, tree, tmp_path / "two", "--jobs", "2")[0] == 0
    assert seen == [(1, 3), (2, 3)]  # three fat binaries get transformed
    assert listing(tmp_path / "one") == listing(tmp_path / "two")
    rc, _, err = split_cli(capsys, tree, tmp_path / "zero", "-j", "0")
    assert rc == 2 and "jobs must be >= 1" in one_error_line(err)


def test_force_option(capsys: pytest.CaptureFixture[str], tree: BlasTree, tmp_path: Path) -> None:
    (tmp_path / "blas_lib_generic").mkdir()
    (tmp_path / "blas_lib_generic" / "mine.txt").write_text("a user's")
    rc, _, err = split_cli(capsys, tree, tmp_path)
    assert rc == 1
    line = one_error_line(err)
    assert "in the way" in line and "--force" in line and "blas_lib_generic" in line
    rc, _, _ = split_cli(capsys, tree, tmp_path, "--force")
    assert rc == 0 and (tmp_path / "blas_lib_generic" / "artifact_manifest.txt").is_file()


def test_artifact_prefix_option(
    capsys: pytest.CaptureFixture[str], tree: BlasTree, tmp_path: Path
) -> None:
    rc, out, _ = split_cli(capsys, tree, tmp_path / "a", "--artifact-prefix", "rocblas_lib")
    assert rc == 0 and "-> rocblas_lib:" in out
    assert (
        tmp_path / "a" / "rocblas_lib_gfx942" / BLAS / ".kpack" / "rocblas_lib_gfx942.kpack"
    ).is_file()
    rc, _, err = split_cli(capsys, tree, tmp_path / "b", "--artifact-prefix", "rocblas")
    assert rc == 2 and "'rocblas' is not {name}_{component}" in one_error_line(err)
    rc, _, err = run_cli(
        capsys,
        "split-artifacts",
        "--batch-artifact-parent-dir",
        tree.artifact.parent,
        "--output-dir",
        tmp_path / "c",
        "--artifact-prefix",
        "x_lib",
    )
    assert rc == 2 and "--artifact-prefix applies to --artifact-dir only" in one_error_line(err)


def test_batch_option(capsys: pytest.CaptureFixture[str], tree: BlasTree, tmp_path: Path) -> None:
    parent = tmp_path / "unsplit"
    shutil.copytree(tree.artifact, parent / tree.artifact.name, symlinks=True)
    shutil.copytree(tree.artifact, parent / "core_lib_generic", symlinks=True)
    rc, out, err = run_cli(
        capsys,
        "split-artifacts",
        "--batch-artifact-parent-dir",
        parent,
        "--output-dir",
        tmp_path / "out",
        "--split-databases",
        "rocblas",
    )
    assert rc == 0 and re.fullmatch(r"[0-9]+ notes \(-v shows them\)\n", err), err
    assert "-> blas_lib:" in out and "core_lib" not in out
    bad = parent / "bad_lib_gfx942"
    put(bad, "s/stage", "lib/libbad.so", corrupt_fat(tmp_path / "build", "bad"))
    manifest(bad, "s/stage")
    rc, out, err = run_cli(
        capsys,
        "split-artifacts",
        "--batch-artifact-parent-dir",
        parent,
        "--output-dir",
        tmp_path / "out2",
    )
    assert rc == 1
    counted, err = err.split("\n", 1)  # the good one's notes, counted
    assert counted == "6 notes (-v shows them)"
    line = one_error_line(err)
    assert "1 of 2 artifacts failed" in line and "bad_lib_gfx942" in line
    assert "-> blas_lib:" in out  # the good one was still split
    rc, _, err = run_cli(
        capsys,
        "split-artifacts",
        "--artifact-dir",
        tree.artifact,
        "--batch-artifact-parent-dir",
        parent,
        "--output-dir",
        tmp_path / "out3",
    )
    assert rc == 2 and "not allowed with argument --artifact-dir" in one_error_line(err)


def test_corrupt_input_one_line_error_and_no_output(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    art = tmp_path / "bad_lib_gfx942"
    put(art, "s/stage", "lib/libbad.so", corrupt_fat(tmp_path / "build", "bad"))
    manifest(art, "s/stage")
    rc, out, err = run_cli(
        capsys, "split-artifacts", "--artifact-dir", art, "--output-dir", tmp_path / "out"
    )
    assert (rc, out) == (1, "")
    assert "s/stage/lib/libbad.so" in one_error_line(err)
    assert not (tmp_path / "out").exists()


# --- inspect and extract --------------------------------------------------------------------------


def test_inspect_fat_binary_kpack_bundle_and_other(
    capsys: pytest.CaptureFixture[str], tree: BlasTree, tmp_path: Path
) -> None:
    rc, out, _ = run_cli(capsys, "inspect", tree.miopen.path)
    assert rc == 0
    assert "HIP fat binary" in out and "wrappers: 3, relocation: rela" in out
    assert out.count("bundle ") == 3 and "gfx90a:xnack-            3 code objects" in out
    split_cli(capsys, tree, tmp_path / "out")
    kpack = tmp_path / "out" / "blas_lib_gfx942" / BLAS / ".kpack" / "blas_lib_gfx942.kpack"
    rc, out, _ = run_cli(capsys, "inspect", kpack)
    assert rc == 0
    assert "scheme: zstd-per-kernel, group: blas_lib, family: gfx942" in out
    assert "kernels: 6 from 3 binaries" in out  # no handler: the CK library is split too
    generic = tmp_path / "out" / "blas_lib_generic" / BLAS / "lib/librocblas.so.5.1"
    rc, out, _ = run_cli(capsys, "inspect", generic)
    assert rc == 0 and "transformed host binary" in out
    assert "search paths: ../.kpack/blas_lib_@GFXARCH@.kpack" in out
    raw = tmp_path / "raw.bundle"
    raw.write_bytes(sample_bundle(["gfx900", "gfx1030"]))
    rc, out, _ = run_cli(capsys, "inspect", raw)
    assert rc == 0 and "offload bundle file" in out and "gfx1030" in out
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    rc, _, err = run_cli(capsys, "inspect", text)
    assert rc == 2 and "not an ELF or PE file, an offload bundle or a .kpack" in one_error_line(err)
    rc, out, _ = run_cli(capsys, "inspect", "/bin/sh")
    assert rc == 0 and "no device code" in out


def test_extract(capsys: pytest.CaptureFixture[str], tree: BlasTree, tmp_path: Path) -> None:
    rc, out, _ = run_cli(capsys, "extract", tree.miopen.path, "-o", tmp_path / "all")
    assert rc == 0 and "extracted 9 code objects" in out
    for index, per_target in tree.miopen.expected.items():
        for target, data in per_target.items():
            assert (tmp_path / "all" / f"libsynth.so#{index}.{target}.co").read_bytes() == data
    rc, out, _ = run_cli(
        capsys, "extract", tree.miopen.path, "-o", tmp_path / "one", "--target", "gfx90a"
    )  # a bare arch selects its feature variants
    assert rc == 0 and sorted(os.listdir(tmp_path / "one")) == [
        ".kpack-extract.json",  # the record of what it wrote (kpack.common.outputs)
        *(f"libsynth.so#{i}.gfx90a:xnack-.co" for i in range(3)),
    ]
    rc, _, err = run_cli(
        capsys, "extract", tree.miopen.path, "-o", tmp_path / "none", "--target", "gfx90a:xnack+"
    )
    assert rc == 2 and "no code objects for target gfx90a:xnack+" in one_error_line(err)
    kpack = tmp_path / "k.kpack"
    write_kpack(
        kpack,
        [KernelInput("a/lib/x.so#2", "gfx942", b"\x7fELFabc")],
        group_name="a_lib",
        gfx_arch_family="gfx942",
    )
    rc, _, _ = run_cli(capsys, "extract", kpack, "-o", tmp_path / "fromk")
    assert rc == 0 and (tmp_path / "fromk/a/lib/x.so#2.gfx942.co").read_bytes() == b"\x7fELFabc"
    raw = tmp_path / "raw.bundle"
    raw.write_bytes(sample_bundle(["gfx900"], size=333))
    rc, _, _ = run_cli(capsys, "extract", raw, "-o", tmp_path / "fromraw", "--target", "gfx900")
    assert rc == 0
    assert (tmp_path / "fromraw/raw.bundle#0.gfx900.co").read_bytes() == fake_code_object(
        "gfx900", 333
    )
    evil = tmp_path / "evil.kpack"
    write_kpack(
        evil,
        [KernelInput("../../etc/x#0", "gfx942", b"x")],
        group_name="a_lib",
        gfx_arch_family="gfx942",
    )
    rc, _, err = run_cli(capsys, "extract", evil, "-o", tmp_path / "evil")
    assert rc == 1 and "binary key '../../etc/x#0' has '..' path component" in one_error_line(err)
    assert not (tmp_path / "evil").exists() and not (tmp_path.parent / "etc").exists()


def test_extract_refuses_a_transformed_binary(
    capsys: pytest.CaptureFixture[str], tree: BlasTree, tmp_path: Path
) -> None:
    split_cli(capsys, tree, tmp_path / "out")
    generic = tmp_path / "out" / "blas_lib_generic" / BLAS / "lib/librocblas.so.5.1"
    rc, _, err = run_cli(capsys, "extract", generic, "-o", tmp_path / "x")
    assert rc == 2 and "extract from those" in one_error_line(err)


# --- verify and resolve ------------------------------------------------------------------------


@pytest.fixture()
def installed(capsys: pytest.CaptureFixture[str], tree: BlasTree, tmp_path: Path) -> Path:
    """The synthetic artifact split and flattened into one install tree."""
    assert split_cli(capsys, tree, tmp_path / "out")[0] == 0
    return flatten(tmp_path / "out", ["blas_lib_"], tmp_path / "install")


def test_verify(capsys: pytest.CaptureFixture[str], installed: Path, tmp_path: Path) -> None:
    lib = installed / "lib/librocblas.so.5.1"
    rc, out, err = run_cli(capsys, "verify", lib)
    assert rc == 0, err
    assert "OK, 2 wrappers, 4 kernels in 4 archives" in out
    assert "(gfx90a:xnack-, gfx942, gfx942:xnack+, gfx1100)" in out
    assert "no kernels of this binary for gfx1100" in err  # warnings only
    rc, out, _ = run_cli(capsys, "verify", installed / "lib/libMIOpen.so.1")
    assert rc == 0 and "9 kernels" in out
    only = installed / ".kpack/blas_lib_gfx942.kpack"
    rc, out, _ = run_cli(capsys, "verify", lib, "--archive", only)
    assert rc == 0 and "2 kernels in 1 archives (gfx942)" in out
    # an archive holding only some of the wrappers fails
    partial = tmp_path / "partial.kpack"
    write_kpack(
        partial,
        [KernelInput(f"{BLAS}/lib/librocblas.so.5.1#1", "gfx942", fake_code_object("gfx942", 464))],
        group_name="blas_lib",
        gfx_arch_family="gfx942",
    )
    rc, _, err = run_cli(capsys, "verify", lib, "--archive", partial)
    line = one_error_line(err)
    assert rc == 1 and "1 wrapper key(s) missing for gfx942" in line and "#0" in line
    # a key beyond the last wrapper, and a code object that is not AMDGPU ELF
    stale = tmp_path / "stale.kpack"
    write_kpack(
        stale,
        [KernelInput(f"{BLAS}/lib/librocblas.so.5.1#{i}", "gfx942", b"junk") for i in range(3)],
        group_name="blas_lib",
        gfx_arch_family="gfx942",
    )
    rc, _, err = run_cli(capsys, "verify", lib, "--archive", stale)
    line = one_error_line(err)
    assert "#2 (gfx942) matches no wrapper" in line and "not an AMDGPU ELF" in line
    # nothing to verify against
    (tmp_path / "empty").mkdir()
    rc, _, err = run_cli(capsys, "verify", lib, "--search-root", tmp_path / "empty")
    assert rc == 1 and "no archive found" in one_error_line(err)
    rc, _, err = run_cli(capsys, "verify", make_plain(tmp_path))
    assert rc == 1 and "not transformed" in one_error_line(err)


def make_plain(tmp_path: Path) -> Path:
    return make_fat(tmp_path / "plainbuild", "plain", [["gfx900"]]).path


def test_verify_reports_partial_overlays(
    capsys: pytest.CaptureFixture[str], installed: Path, tmp_path: Path
) -> None:
    lib = installed / "lib/librocblas.so.5.1"
    key = f"{BLAS}/lib/librocblas.so.5.1"
    overlay = installed / ".kpack/blas_lib_gfx942:xnack+.kpack"
    bare = installed / ".kpack/blas_lib_gfx942.kpack"
    write_kpack(
        overlay,
        [KernelInput(f"{key}#0", "gfx942:xnack+", fake_code_object("gfx942:xnack+", 464))],
        group_name="blas_lib",
        gfx_arch_family="gfx942:xnack+",
    )
    rc, _, err = run_cli(capsys, "verify", lib, "--archive", bare, "--archive", overlay)
    assert rc == 1  # the overlay lacks #1 for its own target
    assert "older runtimes would fail" in err


def test_resolve(capsys: pytest.CaptureFixture[str], installed: Path) -> None:
    lib = installed / "lib/libMIOpen.so.1"
    rc, out, _ = run_cli(capsys, "resolve", lib, "--arch", "gfx90a:sramecc+:xnack-")
    assert rc == 0
    lines = out.splitlines()
    assert len(lines) == 3
    assert all("blas_lib_gfx90a:xnack-.kpack [gfx90a:xnack-]" in line for line in lines)
    assert lines[0].startswith(f"{MIOPEN}/lib/libMIOpen.so.1#0 -> ")
    rc, out, err = run_cli(capsys, "resolve", lib, "--arch", "gfx90a:xnack+")
    assert rc == 1 and out.count("not found") == 3
    assert "3 of 3 kernels not found for gfx90a:xnack+" in one_error_line(err)
    rc, out, _ = run_cli(capsys, "resolve", lib, "--arch", "gfx1201", "--arch", "gfx1100")
    assert rc == 0 and "[gfx1100]" in out  # the second ISA (e.g. a generic) is tried next
    rc, _, err = run_cli(capsys, "resolve", lib, "--arch", "gfx942:bad")
    assert rc == 2 and "--arch 'gfx942:bad' is not an agent ISA" in one_error_line(err)


def test_resolve_honours_the_environment(
    capsys: pytest.CaptureFixture[str], installed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lib = installed / "lib/libMIOpen.so.1"
    monkeypatch.setenv("ROCM_KPACK_DISABLE", "1")
    rc, out, _ = run_cli(capsys, "resolve", lib, "--arch", "gfx942")
    assert rc == 1 and "kpack loading is off" in out
    monkeypatch.delenv("ROCM_KPACK_DISABLE")
    monkeypatch.setenv("ROCM_KPACK_PATH", str(installed / ".kpack/blas_lib_gfx1100.kpack"))
    rc, out, _ = run_cli(capsys, "resolve", lib, "--arch", "gfx942")
    assert rc == 1  # only the listed file is searched
    rc, out, _ = run_cli(capsys, "resolve", lib, "--arch", "gfx1100")
    assert rc == 0 and out.count("blas_lib_gfx1100.kpack") == 3


def test_bundle_triples_in_metadata(capsys: pytest.CaptureFixture[str], installed: Path) -> None:
    with KpackArchive.open(installed / ".kpack/blas_lib_gfx942:xnack+.kpack") as archive:
        entry = archive.entry(f"{BLAS}/lib/librocblas.so.5.1#0", "gfx942:xnack+")
        assert dict(entry.metadata or {}) == {
            "target": AMDGCN + "gfx942:xnack+",
            "source_prefix": BLAS,
        }


def test_rocm_kpack_command_line_as_therock_calls_it(
    tree: BlasTree, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """rocm-kpack's split_artifacts.py options, exactly as TheRock's CMake passes them:
    --clang-offload-bundler is accepted and ignored with one notice, --tmp-dir and
    --verbose work, and the artifact set is the one our own command line writes."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    theirs = tmp_path / "theirs"
    proc = subprocess.run(
        [sys.executable, "-m", "kpack", "split-artifacts", "--artifact-dir", str(tree.artifact),
         "--artifact-prefix", "blas_lib", "--output-dir", str(theirs), "--split-databases",
         "rocblas", "--tmp-dir", str(tmp), "--verbose", "--clang-offload-bundler",
         "/opt/rocm/llvm/bin/clang-offload-bundler"],
        capture_output=True, text=True, cwd=REPO, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    notices = [line for line in proc.stderr.splitlines() if line.startswith("notice:")]
    assert len(notices) == 1 and "--clang-offload-bundler" in notices[0] and "ignored" in notices[0]
    ours = tmp_path / "ours"
    rc, _, err = run_cli(
        capsys, "split-artifacts", "--artifact-dir", tree.artifact, "--output-dir", ours,
        "--split-databases", "rocblas",
    )  # fmt: skip
    assert rc == 0, err
    assert listing(theirs) == listing(ours)
    assert list(tmp.iterdir()) == []  # nothing left in --tmp-dir
    proc = subprocess.run(
        [sys.executable, "-m", "kpack", "split-artifacts", "--artifact-dir", str(tree.artifact),
         "--output-dir", str(tmp_path / "x"), "--tmp-dir", str(tmp_path / "missing")],
        capture_output=True, text=True, cwd=REPO, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and "--tmp-dir is not a directory" in one_error_line(proc.stderr)


# --- every subcommand on bad input: one error line naming it, exit 1, nothing written ------


@pytest.fixture()
def bad(tmp_path: Path) -> Path:
    """``tmp_path/in``: inputs of every kind a careless or hostile caller passes."""
    import socket

    from tests.kpack.wheel_fixtures import make_plain_wheel

    root = tmp_path / "in"
    root.mkdir()
    write_kpack(
        root / "a.kpack",
        [KernelInput("lib/a.so#0", "gfx942", b"\x7fELF" + bytes(60))],
        group_name="a",
        gfx_arch_family="gfx942",
    )
    (root / "empty").write_bytes(b"")
    (root / "junk").write_bytes(bytes(range(256)) * 2)
    (root / "trunc.kpack").write_bytes((root / "a.kpack").read_bytes()[:50])
    (root / "adir").mkdir()
    (root / "afile").write_text("x")
    (root / "loop").symlink_to("loop")
    os.mkfifo(root / "fifo")
    os.mkfifo(root / "fifo-1-py3-none-any.whl")
    (root / "dir-1-py3-none-any.whl").mkdir()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "sock"))
    sock.close()
    art = root / "blas_lib_generic"
    put(art, "s", "lib/notes.txt", b"notes\n")
    manifest(art, "s")
    make_plain_wheel(root)
    return root


_WHEEL = "torch-2.9.0-py3-none-linux_x86_64.whl"
_SPLIT_WHEEL = ("split-wheel", "--overlay-root", "torch/", "--device-package-prefix", "amd-torch")

#: (argv with {in} for the inputs dir and {out} for a new output, what the line must say)
BAD_INPUTS = [
    # inputs that are not readable files (a FIFO would block a reader opening it)
    *(
        (("inspect", f"{{in}}/{name}"), f"{{in}}/{name}: {why}")
        for name, why in [
            ("missing", "cannot read the input: No such file or directory"),
            ("adir", "the input is a directory, not a file"),
            ("loop", "cannot read the input: Too many levels of symbolic links"),
            ("fifo", "the input is not a regular file"),
            ("sock", "the input is not a regular file"),
            ("empty", "not an ELF or PE file, an offload bundle or a .kpack archive"),
            ("junk", "not an ELF or PE file, an offload bundle or a .kpack archive"),
            ("trunc.kpack", "50 bytes is too small for a .kpack header"),
        ]
    ),
    (("extract", "{in}/fifo", "-o", "{out}"), "{in}/fifo: the input is not a regular file"),
    (("extract", "{in}/adir", "-o", "{out}"), "{in}/adir: the input is a directory"),
    (
        ("verify", "{in}/fifo-1-py3-none-any.whl"),
        "{in}/fifo-1-py3-none-any.whl: the wheel is not a regular file",
    ),
    (("verify", "{in}/fifo"), "{in}/fifo: the binary is not a regular file"),
    (("resolve", "{in}/adir", "--arch", "gfx942"), "{in}/adir: the binary is a directory"),
    (("resolve", "{in}/missing", "--arch", "gfx942"), "{in}/missing: cannot read the binary"),
    (("verify", "{in}/junk", "--archive", "{in}/adir"), "{in}/adir: --archive is a directory"),
    (
        ("verify", "{in}/junk", "--search-root", "{in}/afile"),
        "{in}/afile: --search-root is not a directory",
    ),
    (
        ("split-artifacts", "--artifact-dir", "{in}/missing", "--output-dir", "{out}"),
        "{in}/missing: --artifact-dir is not a directory",
    ),
    (
        ("split-artifacts", "--batch-artifact-parent-dir", "{in}/afile", "--output-dir", "{out}"),
        "{in}/afile: --batch-artifact-parent-dir is not a directory",
    ),
    (
        (
            "split-wheel",
            "--input",
            "{in}/junk",
            "--output-dir",
            "{out}",
            "--overlay-root",
            "torch/",
            "--device-package-prefix",
            "amd-torch",
        ),
        "{in}/junk: not a wheel",
    ),
    (
        (
            "split-wheel",
            "--input",
            "{in}/adir/x-1-py3-none-any.whl",
            "--output-dir",
            "{out}",
            "--overlay-root",
            "torch/",
            "--device-package-prefix",
            "amd-torch",
        ),
        "{in}/adir/x-1-py3-none-any.whl: --input: no such file or directory",
    ),
    (
        (
            "split-wheel",
            "--input",
            "{in}/dir-1-py3-none-any.whl",
            "--output-dir",
            "{out}",
            "--overlay-root",
            "torch/",
            "--device-package-prefix",
            "amd-torch",
        ),
        "{in}/dir-1-py3-none-any.whl: not an unpacked wheel",
    ),
    (
        (
            "split-wheel",
            "--input",
            "{in}/fifo-1-py3-none-any.whl",
            "--output-dir",
            "{out}",
            "--overlay-root",
            "torch/",
            "--device-package-prefix",
            "amd-torch",
        ),
        "{in}/fifo-1-py3-none-any.whl: not a wheel: not a regular file",
    ),
    # outputs that cannot be directories
    (("extract", "{in}/a.kpack", "-o", "{in}/afile"), "{in}/afile: output exists and is not a dir"),
    (
        ("extract", "{in}/a.kpack", "-o", "{in}/afile/sub"),
        "{in}/afile/sub: output cannot be created: {in}/afile is not a directory",
    ),
    (
        (
            "split-artifacts",
            "--artifact-dir",
            "{in}/blas_lib_generic",
            "--output-dir",
            "{in}/afile",
        ),
        "{in}/afile: --output-dir exists and is not a directory",
    ),
    (
        (*_SPLIT_WHEEL, "--input", f"{{in}}/{_WHEEL}", "--output-dir", "{in}/afile/x"),
        "{in}/afile/x: --output-dir cannot be created: {in}/afile is not a directory",
    ),
    # flag values
    (
        ("extract", "{in}/a.kpack", "-o", "{out}", "--target", "../x"),
        "--target '../x' is not a target id",
    ),
    (
        ("extract", "{in}/a.kpack", "-o", "{out}", "--target", "gfx942:xnack"),
        "--target 'gfx942:xnack' is not a target id",
    ),
    (
        ("resolve", "{in}/junk", "--arch", "gfx942:" + ":".join(f"f{i}+" for i in range(20))),
        "is not an agent ISA (gfx942:sramecc+:xnack-, gfx1100; at most 4 features)",
    ),
    (("resolve", "{in}/junk", "--arch", "../../x"), "--arch '../../x' is not an agent ISA"),
    (
        (
            "split-artifacts",
            "--artifact-dir",
            "{in}/blas_lib_generic",
            "--output-dir",
            "{out}",
            "--compression-level",
            "23",
        ),
        "compression level must be 1..22, got 23",
    ),
    (
        (
            "split-artifacts",
            "--artifact-dir",
            "{in}/blas_lib_generic",
            "--output-dir",
            "{out}",
            "--compression-level",
            "abc",
        ),
        "kpack split-artifacts: argument --compression-level: invalid int value: 'abc'",
    ),
    (
        (
            "split-artifacts",
            "--artifact-dir",
            "{in}/blas_lib_generic",
            "--output-dir",
            "{out}",
            "-j",
            "0",
        ),
        "jobs must be >= 1, got 0",
    ),
    (
        (
            "split-artifacts",
            "--artifact-dir",
            "{in}/blas_lib_generic",
            "--output-dir",
            "{out}",
            "-j",
            "-2",
        ),
        "jobs must be >= 1, got -2",
    ),
    (
        (
            "split-artifacts",
            "--artifact-dir",
            "{in}/blas_lib_generic",
            "--output-dir",
            "{out}",
            "--gpu-targets",
            "../x",
        ),
        "--gpu-targets needs gfx target ids",
    ),
    (
        (
            "split-artifacts",
            "--artifact-dir",
            "{in}/blas_lib_generic",
            "--output-dir",
            "{out}",
            "--tmp-dir",
            "{in}/afile",
        ),
        "{in}/afile: --tmp-dir is not a directory",
    ),
    (
        ("split-artifacts", "--output-dir", "{out}"),
        "one of the arguments --artifact-dir --batch-artifact-parent-dir is required",
    ),
    (
        (*_SPLIT_WHEEL, "--input", f"{{in}}/{_WHEEL}", "--output-dir", "{out}", "-j", "0"),
        "--jobs must be at least 1, got 0",
    ),
    (
        (
            *_SPLIT_WHEEL,
            "--input",
            f"{{in}}/{_WHEEL}",
            "--output-dir",
            "{out}",
            "--compression-level",
            "0",
        ),
        "--compression-level must be 1-22, got 0",
    ),
    (
        (
            *_SPLIT_WHEEL,
            "--input",
            f"{{in}}/{_WHEEL}",
            "--output-dir",
            "{out}",
            "--max-unpacked-size",
            "inf",
        ),
        "not a size: 'inf'",
    ),
    (
        (
            *_SPLIT_WHEEL,
            "--input",
            f"{{in}}/{_WHEEL}",
            "--output-dir",
            "{out}",
            "--max-expansion-ratio",
            "nan",
        ),
        "--max-expansion-ratio must be at least 1, got nan",
    ),
    (
        (
            *_SPLIT_WHEEL,
            "--input",
            f"{{in}}/{_WHEEL}",
            "--output-dir",
            "{out}",
            "--overlay-root",
            "../x",
        ),
        "--overlay-root '../x/' is not a relative directory",
    ),
    (
        (
            *_SPLIT_WHEEL,
            "--input",
            f"{{in}}/{_WHEEL}",
            "--output-dir",
            "{out}",
            "--overlay-root",
            "/abs",
        ),
        "--overlay-root '/abs/' is not a relative directory",
    ),
    (
        (
            *_SPLIT_WHEEL,
            "--input",
            f"{{in}}/{_WHEEL}",
            "--output-dir",
            "{out}",
            "--device-package-prefix",
            "Bad Prefix",
        ),
        "--device-package-prefix 'Bad Prefix' is not a normalized distribution name",
    ),
    (
        (
            *_SPLIT_WHEEL,
            "--input",
            f"{{in}}/{_WHEEL}",
            "--output-dir",
            "{out}",
            "--variant-label",
            "../x",
        ),
        "invalid variant label '../x'",
    ),
    (("bogus",), "kpack: argument command: invalid choice: 'bogus'"),
]

#: The bad inputs whose bytes or tree are wrong (exit 1); every other one is a usage error
#: (a flag value, a path on the command line that cannot be used: exit 2, as argparse's).
DATA_ERRORS = frozenset(
    {
        "{in}/trunc.kpack: 50 bytes is too small for a .kpack header",
        "{in}/junk: not a wheel",
        "{in}/dir-1-py3-none-any.whl: not an unpacked wheel",
        "{in}/fifo-1-py3-none-any.whl: not a wheel: not a regular file",
    }
)


@pytest.mark.parametrize(("argv", "needle"), BAD_INPUTS, ids=[" ".join(a) for a, _ in BAD_INPUTS])
def test_bad_input_is_one_error_line(
    bad: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: tuple[str, ...],
    needle: str,
) -> None:
    def fill(text: str) -> str:
        return text.replace("{in}", str(bad)).replace("{out}", str(tmp_path / "out"))

    before = sorted(
        (str(p), p.is_file() and p.read_bytes())
        for p in tmp_path.rglob("*")
        if not p.is_fifo() and not p.is_socket()
    )
    rc, out, err = run_cli(capsys, *(fill(a) for a in argv))
    assert (rc, out) == (1 if needle in DATA_ERRORS else 2, ""), err
    assert fill(needle) in one_error_line(err)
    after = sorted(
        (str(p), p.is_file() and p.read_bytes())
        for p in tmp_path.rglob("*")
        if not p.is_fifo() and not p.is_socket()
    )
    assert after == before


def test_a_dead_worker_is_one_error_naming_the_file(
    capsys: pytest.CaptureFixture[str],
    tree: BlasTree,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker process killed while it splits (the OOM killer) is one error naming the
    binary, not a ``BrokenProcessPool`` traceback; nothing is published."""
    monkeypatch.setattr(split_work, "run_fat_job", _die)
    monkeypatch.setenv("KPACK_POOL_MIN_BYTES", "0")  # in a worker, never in this process
    rc, out, err = split_cli(capsys, tree, tmp_path / "out", "-j", "2")
    assert (rc, out) == (1, "")
    line = one_error_line(err)
    assert "the worker process splitting it died" in line and ".so" in line
    assert not (tmp_path / "out").exists()


def _die(*args: object, **kwargs: object) -> None:
    os._exit(9)


def test_small_inputs_are_split_in_process(
    capsys: pytest.CaptureFixture[str],
    tree: BlasTree,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under the pool threshold no worker is started (it costs more than it saves), and the
    outputs are the ones the workers write."""
    started: list[int] = []
    real_pool = split_pool._pool

    def spy(jobs: int, count: int, **kw: str):  # type: ignore[no-untyped-def]
        started.append(jobs)
        return real_pool(jobs, count, **kw)

    monkeypatch.setattr(split_pool, "_pool", spy)
    assert split_cli(capsys, tree, tmp_path / "here", "-j", "2")[0] == 0
    assert started == []
    monkeypatch.setenv("KPACK_POOL_MIN_BYTES", "0")
    assert split_cli(capsys, tree, tmp_path / "pool", "-j", "2")[0] == 0
    assert started == [2]
    assert listing(tmp_path / "here") == listing(tmp_path / "pool")


def test_inspect_lists_targets_in_natural_order_with_decimal_sizes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 33, item 5: gfx803 before gfx1030, sizes as every tool prints them."""
    from tests.kpack.split.test_split import make_fat

    fat = make_fat(tmp_path, "libnat.so", [["gfx1030", "gfx803", "gfx90a", "gfx1100"]])
    rc, out, _ = run_cli(capsys, "inspect", fat.path)
    assert rc == 0
    per_target = out.split("per target:\n", 1)[1].splitlines()
    assert [row.split()[0] for row in per_target] == ["gfx803", "gfx90a", "gfx1030", "gfx1100"]
    assert all(row.endswith(" B") or row.endswith(" kB") for row in per_target), out
    assert " bytes" not in out.split(".hip_fatbin:", 1)[1].split("\n", 1)[1]


def test_split_notes_go_to_stderr_each_with_verbose(
    capsys: pytest.CaptureFixture[str], tree: BlasTree, tmp_path: Path
) -> None:
    """One list on stdout (the artifact dirs), the notes on stderr (issue 33, item 5)."""
    rc, out, err = split_cli(capsys, tree, tmp_path / "v", "-v")
    notes = [line for line in err.splitlines() if line.startswith("note: ")]
    assert rc == 0 and len(notes) == 6, err
    assert "removed 4.1 kB of device code" in err and "note:" not in out
