"""The ``rocm_kpack`` library names and tools beyond TheRock's command lines: what they write
on real and synthetic inputs, the output-dir rule, and bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from rocm_kpack import binutils, ccob_parser, database_handlers

from kpack.bundle import make_plain_bundle
from kpack.errors import UsageError
from kpack.transform import extract_kernels, inspect_fat_binary
from kpack.unbundle import unbundle_binary, unbundled_names

REPO = Path(__file__).resolve().parents[2]
ROCRAND_LIB = "usr/lib/x86_64-linux-gnu/librocrand.so.1.1"
AMDGCN = "hipv4-amdgcn-amd-amdhsa--"


def tool(module: str, *argv: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    return subprocess.run(
        [sys.executable, "-m", f"rocm_kpack.tools.{module}", *map(str, argv)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        check=False,
    )


@pytest.fixture()
def rocrand(debian_package: Callable[[str], Path]) -> Path:
    return debian_package("librocrand1") / ROCRAND_LIB


def test_names_follow_rocm_kpack() -> None:
    assert unbundled_names([AMDGCN + "gfx90a", AMDGCN + "gfx942"]) == [
        AMDGCN + "gfx90a.hsaco",
        AMDGCN + "gfx942.hsaco",
    ]
    # a triple seen twice (one bundle per translation unit): every name carries its position
    assert unbundled_names([AMDGCN + "gfx90a", AMDGCN + "gfx942", AMDGCN + "gfx90a"]) == [
        AMDGCN + "gfx90a_0.hsaco",
        AMDGCN + "gfx942_1.hsaco",
        AMDGCN + "gfx90a_2.hsaco",
    ]
    assert unbundled_names(["openmp-amdgcn-amd-amdhsa--gfx90a"]) == [
        "openmp-amdgcn-amd-amdhsa--gfx90a.elf"
    ]


def test_two_bundles_of_one_target(tmp_path: Path) -> None:
    first = make_plain_bundle([(AMDGCN + "gfx90a", b"\x7fELF one")])
    second = make_plain_bundle([(AMDGCN + "gfx90a", b"\x7fELF two")])
    fatbin = tmp_path / "two.hipfb"
    fatbin.write_bytes(first + bytes(-len(first) % 4096) + second)
    result = unbundle_binary(fatbin, tmp_path / "out")
    assert result.names == (AMDGCN + "gfx90a_0.hsaco", AMDGCN + "gfx90a_1.hsaco")
    assert (tmp_path / "out" / result.names[1]).read_bytes() == b"\x7fELF two"
    found = ccob_parser.extract_code_objects_from_fatbin(fatbin.read_bytes())
    assert [(c.target, c.data, c.bundle_index) for c in found] == [
        (AMDGCN + "gfx90a", b"\x7fELF one", 0),
        (AMDGCN + "gfx90a", b"\x7fELF two", 1),
    ]


@pytest.mark.real
def test_bundled_binary_on_debian_librocrand(rocrand: Path) -> None:
    binary = binutils.BundledBinary(rocrand, toolchain=binutils.Toolchain())
    assert sorted(binary.list_bundles()) == sorted(k.target for k in extract_kernels(rocrand))
    with binary.unbundle(gfx_arch="gfx90a") as contents:
        assert contents.target_list == [
            (AMDGCN + "gfx90a:xnack+", AMDGCN + "gfx90a:xnack+.hsaco"),
            (AMDGCN + "gfx90a:xnack-", AMDGCN + "gfx90a:xnack-.hsaco"),
        ]
        by_target = {k.target: k.read() for k in extract_kernels(rocrand)}
        for target, name in contents.target_list:
            data = (contents.dest_dir / name).read_bytes()
            assert data == by_target[target.rpartition("--")[2]]
        scratch = contents.dest_dir
    assert not scratch.exists()  # delete_on_close
    with pytest.raises(UsageError, match="gfx1250"):
        binary.unbundle(dest_dir=scratch, gfx_arch="gfx1250")
    assert not scratch.exists()


@pytest.mark.real
def test_ccob_parser_reads_a_real_section(rocrand: Path) -> None:
    info = inspect_fat_binary(rocrand)
    assert info is not None
    with open(rocrand, "rb") as f:
        f.seek(info.hip_fatbin_offset)
        section = f.read(info.hip_fatbin_size)
    found = ccob_parser.extract_code_objects_from_fatbin(section)
    assert sorted(c.target.rpartition("--")[2] for c in found) == sorted(
        k.target for k in extract_kernels(rocrand)
    )


def test_database_handlers() -> None:
    names = database_handlers.list_available_handlers()
    assert "rocblas" in names and "hipblaslt" in names
    assert [h.name for h in database_handlers.get_database_handlers(["rocblas"])] == ["rocblas"]
    with pytest.raises(UsageError, match="nope"):
        database_handlers.get_database_handlers(["nope"])


@pytest.mark.real
def test_bulk_unbundle_output_rule(rocrand: Path, tmp_path: Path) -> None:
    out = tmp_path / "unbundled"
    out.mkdir()
    (out / "notes.txt").write_text("not ours")
    assert (
        tool("bulk_unbundle", "--gfx-arch", "gfx90a", "-o", out, rocrand, cwd=tmp_path).returncode
        == 0
    )
    gfx90a = sorted(p.name for p in out.iterdir() if p.name.endswith(".hsaco"))
    # another architecture: as in rocm-kpack, the files it writes are added; nothing else
    # (the last run's files, the user's file) is touched
    proc = tool("bulk_unbundle", "--gfx-arch", "gfx1030", "-o", out, rocrand, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [*gfx90a, AMDGCN + "gfx1030.hsaco", "notes.txt"]
    )
    assert proc.stdout.splitlines()[-1] == str(out.absolute())
    # a file of a name it writes is replaced, whoever wrote it (a build dir rocm-kpack
    # populated runs as written), with or without --force
    for flags in ((), ("--force",)):
        (out / (AMDGCN + "gfx1030.hsaco")).write_bytes(b"rocm-kpack's")
        argv = ["--gfx-arch", "gfx1030", *flags, "-o", out, rocrand]
        proc = tool("bulk_unbundle", *argv, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert (out / (AMDGCN + "gfx1030.hsaco")).read_bytes() != b"rocm-kpack's"
        assert (out / "notes.txt").read_text() == "not ours"


@pytest.mark.real
def test_bulk_unbundle_default_dir_and_bundler_notice(rocrand: Path, tmp_path: Path) -> None:
    lib = tmp_path / "librocrand.so"
    lib.write_bytes(rocrand.read_bytes())
    proc = tool("bulk_unbundle", "--clang-offload-bundler", "/x/bundler", lib, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    written = sorted(p.name for p in (tmp_path / "librocrand.unbundled").iterdir())
    assert written == sorted(f"{AMDGCN}{k.target}.hsaco" for k in extract_kernels(rocrand))
    assert [line for line in proc.stderr.splitlines() if line.startswith("notice:")] == [
        "notice: --clang-offload-bundler /x/bundler is not needed and ignored: offload "
        "bundles are read in-process"
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--output-dir", "o", "a.so", "b.so"], "--output-dir requires exactly one input file"),
        (["--gfx-arch", "gfx90a:xnack+", "a.so"], "not a base architecture"),
        (["missing.so"], "missing.so"),
    ],
)
def test_bulk_unbundle_bad_input(argv: list[str], message: str, tmp_path: Path) -> None:
    proc = tool("bulk_unbundle", *argv, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr  # usage errors, as argparse's
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"architecture_groups": {"g": {"architectures": ["gfx90a"]}}}, "primary_shard"),
        ({"primary_shard": "s", "architecture_groups": {}}, "architecture_groups"),
        ({"primary_shard": "s", "architecture_groups": {"g": {"architectures": []}}}, "non-empty"),
        ({"primary_shard": "s", "architecture_groups": {"g": {"architectures": ["x1"]}}}, "gfx"),
        (
            {"primary_shard": "s", "architecture_groups": {"a/b": {"architectures": ["gfx9"]}}},
            "'/'",
        ),
    ],
)
def test_recombine_config_errors(config: dict[str, object], message: str, tmp_path: Path) -> None:
    (tmp_path / "shards" / "s").mkdir(parents=True)
    (tmp_path / "c.json").write_text(json.dumps(config))
    proc = tool(
        "recombine_artifacts",
        "--input-shards-dir",
        tmp_path / "shards",
        "--config",
        tmp_path / "c.json",
        "--output-dir",
        tmp_path / "out",
        cwd=tmp_path,
    )
    # the config named by --config is refused as a usage error (kpack.split's UsageError)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0]
    assert not (tmp_path / "out").exists()


def _shard_artifact(shard: Path, name: str, files: dict[str, str]) -> None:
    art = shard / name
    for rel, text in files.items():
        (art / rel).parent.mkdir(parents=True, exist_ok=True)
        (art / rel).write_text(text)
    (art / "artifact_manifest.txt").write_text("x/stage\n")


def test_recombine_one_component_leaves_the_others(tmp_path: Path) -> None:
    shards = tmp_path / "shards"
    for prefix in ("a_lib", "b_lib"):
        _shard_artifact(shards / "s1", f"{prefix}_generic", {"x/stage/lib/l.so": prefix})
        _shard_artifact(
            shards / "s2",
            f"{prefix}_gfx1100",
            {
                f"x/stage/.kpack/{prefix}_gfx1100.kpack": "archive",
                "x/stage/lib/rocblas/library/TensileLibrary_gfx1100.dat": "db",
                "x/stage/lib/other.txt": "not the arch's",
            },
        )
    config = {
        "primary_shard": "s1",
        "architecture_groups": {"gfx110X": {"architectures": ["gfx1100", "gfx1101"]}},
    }
    (tmp_path / "c.json").write_text(json.dumps(config))
    base = [
        "--input-shards-dir",
        shards,
        "--config",
        tmp_path / "c.json",
        "--output-dir",
        tmp_path / "out",
    ]
    proc = tool("recombine_artifacts", *base, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "a_lib_generic",
        "a_lib_gfx110X",
        "b_lib_generic",
        "b_lib_gfx110X",
    ]
    group = out / "a_lib_gfx110X/x/stage"
    assert sorted(str(p.relative_to(group)) for p in group.rglob("*") if p.is_file()) == [
        ".kpack/a_lib_gfx1100.kpack",
        "lib/rocblas/library/TensileLibrary_gfx1100.dat",
    ]
    (out / "b_lib_generic" / "x/stage/lib/l.so").write_text("edited by hand")
    proc = tool("recombine_artifacts", *base, "--component", "a_lib", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (out / "b_lib_generic" / "x/stage/lib/l.so").read_text() == "edited by hand"
    (out / "notes.txt").write_text("a user's")
    proc = tool("recombine_artifacts", *base, cwd=tmp_path)  # rocm-kpack's rule: the artifact
    assert proc.returncode == 0, proc.stderr  # dirs it writes are its own, edited or not
    assert (out / "b_lib_generic" / "x/stage/lib/l.so").read_text() == "b_lib"
    assert (out / "notes.txt").read_text() == "a user's"
    proc = tool("recombine_artifacts", *base, "--component", "c_lib", cwd=tmp_path)
    assert proc.returncode == 2 and "c_lib" in proc.stderr  # a --component naming nothing
