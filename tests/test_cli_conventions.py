"""The conventions every tool keeps (issue 22, deliverable 7): ``-V``/``--version``, ``-q``/``-v``,
help for every argument and no markup in it, one spelling for list flags (with the others
TheRock uses), the absolute output path as the last line, decimal sizes."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from rocm_kpack.tools import bulk_unbundle, recombine_artifacts, split_artifacts

from build_tools import assemble_shards, build_python_packages
from kpack import cli as kpack_cli
from kpack.common import cli as conventions
from kpack.common.cli import format_size, split_list, tool_version
from kpack.wheelsplit import Parser as WheelsplitParser
from kpack.wheelsplit import add_arguments as wheelsplit_arguments
from tests.build_tools.shards.test_assembly import make_shard
from tests.build_tools.treeutil import add_artifact, write_manifest
from tests.dist_listing import read_listing

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ("build-python-packages", "assemble-shards", "kpack")
#: The tools run as ``python -m MODULE``: rocm-kpack's names (TheRock's call sites) and ours.
MODULES = (
    "rocm_kpack.tools.split_python_wheels",
    "kpack.tools.split_python_wheels",
    "rocm_kpack.tools.split_artifacts",
    "rocm_kpack.tools.bulk_unbundle",
    "rocm_kpack.tools.recombine_artifacts",
)
#: reST and Markdown that must not reach --help: ``literal``, :role:`x`, `link`_, **bold**
MARKUP = re.compile(r"``|:[a-z]+:`|`_|\*\*")


def _script(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def _split_python_wheels_parser() -> argparse.ArgumentParser:
    parser = WheelsplitParser(prog="python -m rocm_kpack.tools.split_python_wheels")
    wheelsplit_arguments(parser)
    return parser


def _parsers() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every tool's parser and every subcommand's."""
    for name, parser in (
        ("build-python-packages", build_python_packages._parser()),
        ("assemble-shards", assemble_shards._parser()),
        ("kpack", kpack_cli._parser()),
        ("rocm_kpack.tools.split_python_wheels", _split_python_wheels_parser()),
        ("rocm_kpack.tools.split_artifacts", split_artifacts._parser()),
        ("rocm_kpack.tools.bulk_unbundle", bulk_unbundle._parser()),
        ("rocm_kpack.tools.recombine_artifacts", recombine_artifacts._parser()),
    ):
        yield name, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, subparser in action.choices.items():
                    yield f"{name} {sub}", subparser


# --- --version ---------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["-V", "--version"])
@pytest.mark.parametrize("name", TOOLS)
def test_every_tool_prints_the_project_version(name: str, flag: str) -> None:
    proc = subprocess.run([_script(name), flag], capture_output=True, text=True, check=False)
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
    assert proc.stdout == f"{name} {metadata.version('rocm-python-packaging')}\n"


@pytest.mark.parametrize("flag", ["-V", "--version"])
@pytest.mark.parametrize("module", MODULES)
def test_every_module_tool_prints_the_project_version(module: str, flag: str) -> None:
    """rocm-kpack's tools as TheRock runs them (``python -m rocm_kpack.tools.X``): the
    version alone, though their other flags are required (``arguments are required`` and
    exit 1 before)."""
    proc = subprocess.run(
        [sys.executable, "-m", module, flag], capture_output=True, text=True, check=False
    )
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
    assert proc.stdout == f"python -m {module} {metadata.version('rocm-python-packaging')}\n"


def test_kpack_subcommands_print_the_version_too() -> None:
    for argv in (["split-artifacts", "-V"], ["split-wheel", "--version"], ["inspect", "-V"]):
        proc = subprocess.run(
            [_script("kpack"), *argv], capture_output=True, text=True, check=False
        )
        assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
        assert proc.stdout == f"kpack {argv[0]} {tool_version()}\n"


def test_split_artifacts_run_as_a_file_prints_it_too() -> None:
    """TheRock's CMake runs ``python <kpack>/python/rocm_kpack/tools/split_artifacts.py``."""
    script = ROOT / "python" / "rocm_kpack" / "tools" / "split_artifacts.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--version"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0 and proc.stdout.split()[-1] == tool_version(), proc.stderr


def test_the_version_of_a_checkout_that_is_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)  # imported when -V asks
    declared = re.search(r'^version = "(.+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert declared is not None and tool_version() == declared.group(1)
    monkeypatch.setattr(conventions, "_PYPROJECT", ROOT / "no-such-file.toml")
    assert tool_version() == "unknown"


def test_run_as_a_script_from_a_checkout_prints_it_too() -> None:
    """TheRock runs ``python build_tools/build_python_packages.py``: ``-V`` works there."""
    for script in ("build_tools/build_python_packages.py", "build_tools/assemble_shards.py"):
        proc = subprocess.run(
            [sys.executable, script, "-V"], cwd=ROOT, capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0 and proc.stdout.split()[1] == tool_version(), proc.stderr


REQUIRED = {
    "build-python-packages": (build_python_packages, ["--artifact-dir", "a", "--dest-dir", "d"]),
    "assemble-shards": (assemble_shards, ["--input", "i", "--dest-dir", "o"]),
}


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_version_keeps_taking_the_package_version(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """TheRock passes ``--version=V`` (its package version): a value is never the tool's
    version, and a bare ``--version`` among other flags is an error, not a silent exit 0."""
    module, required = REQUIRED[name]
    for given in (["--version=7.1.0"], ["--version", "7.1.0"]):
        argv = [*given, *required]
        assert module._parser(argv).parse_args(argv).version == "7.1.0"
    argv = ["--version", *required]
    assert module.main(argv) == 2  # a usage error: one error line and exit status 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "given alone, --version prints the tool's version" in err


# --- -q / -v, help ------------------------------------------------------------------------------


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


@pytest.mark.parametrize(
    ("name", "parser"),
    [pytest.param(n, p, id=n) for n, p in _parsers()],
)
def test_every_command_has_quiet_verbose_and_help_for_every_argument(
    name: str, parser: argparse.ArgumentParser
) -> None:
    if name != "kpack":  # kpack's own parser only dispatches
        assert {"-q", "--quiet", "-v", "--verbose"} <= _options(parser), name
    undocumented = [
        a.dest
        for a in parser._actions
        if not isinstance(a, argparse._SubParsersAction) and not (a.help or "").strip()
    ]
    assert undocumented == [], name
    text = parser.format_help()
    assert not MARKUP.search(text), MARKUP.search(text)


def test_kpack_help_is_plain_text() -> None:
    proc = subprocess.run([_script("kpack"), "--help"], capture_output=True, text=True, check=True)
    assert "kpack: inspect, extract, split, verify and resolve HIP device code." in proc.stdout
    assert "``" not in proc.stdout and ":mod:" not in proc.stdout


@pytest.mark.parametrize("name", TOOLS + MODULES)
def test_quiet_and_verbose_exclude_each_other(name: str) -> None:
    argv = {"kpack": [_script("kpack"), "inspect", "x"]}.get(name, [_script(name)])
    if name in MODULES:
        argv = [sys.executable, "-m", name]
    proc = subprocess.run([*argv, "-q", "-v"], capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr


# --- list flags -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "given",
    [
        ["--linux-amdgpu-families=gfx94X-dcgpu,gfx110X-all"],  # TheRock's help spells it so
        ["--linux-amdgpu-families=gfx94X-dcgpu;gfx110X-all"],  # its workflows pass this
        ["--linux-amdgpu-families", "gfx94X-dcgpu", "gfx110X-all"],
        ["--linux-amdgpu-families", "gfx94X-dcgpu", "--linux-amdgpu-families", "gfx110X-all"],
        ["--linux-amdgpu-families", " gfx94X-dcgpu , gfx110X-all,gfx94X-dcgpu"],
    ],
)
def test_family_lists_in_every_spelling(given: list[str]) -> None:
    for module, required in REQUIRED.values():
        args = module._parser().parse_args([*required, *given])
        assert args.linux_amdgpu_families == ["gfx94X-dcgpu", "gfx110X-all"]


def test_an_empty_family_flag_means_not_given() -> None:
    """TheRock's workflows pass ``--windows-amdgpu-families=""`` on Linux-only releases."""
    args = build_python_packages._parser().parse_args(
        ["--artifact-dir", "a", "--dest-dir", "d", "--windows-amdgpu-families="]
    )
    assert args.windows_amdgpu_families == [] and split_list(args.windows_amdgpu_families) == ()


def test_kpack_list_flags_take_cmake_s_space_separated_form_and_commas() -> None:
    """TheRock's CMake passes ``--split-databases ${list}`` and ``--gpu-targets ${list}``,
    which CMake expands to separate words."""
    base = ["split-artifacts", "--artifact-dir", "a", "--output-dir", "o"]
    parse = kpack_cli._parser().parse_args
    spaced = parse(
        [*base, "--split-databases", "rocblas", "miopen", "--gpu-targets", "gfx942", "gfx90a"]
    )
    commas = parse([*base, "--split-databases=rocblas,miopen", "--gpu-targets=gfx942,gfx90a"])
    for args in (spaced, commas):
        assert args.split_databases == ["rocblas", "miopen"]
        assert args.gpu_targets == ["gfx942", "gfx90a"]
    resolve = parse(["resolve", "--arch", "gfx942:sramecc+:xnack-,gfx90a", "bin", "--arch", "x"])
    assert (
        resolve.arch == ["gfx942:sramecc+:xnack-", "gfx90a", "x"] and str(resolve.binary) == "bin"
    )


def test_a_bad_item_of_a_list_with_choices_is_one_error_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["split-artifacts", "--artifact-dir", "a", "--output-dir", "o"]
    assert kpack_cli.main([*argv, "--split-databases", "rocblas,rocfft"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--split-databases: invalid choice: 'rocfft'" in err


# --- sizes ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "shown"),
    [
        (0, "0 B"),
        (999, "999 B"),
        (1000, "1.0 kB"),
        (999_949, "999.9 kB"),
        (999_950, "1.0 MB"),
        (495_000_000, "495.0 MB"),
        (1_310_000_000, "1.3 GB"),
        (12 * 10**12, "12.0 TB"),
    ],
)
def test_sizes_are_decimal(n: int, shown: str) -> None:
    assert format_size(n) == shown


# --- the last line: the absolute output path ---------------------------------------------------


def _tree(root: Path) -> Path:
    write_manifest(root)
    add_artifact(root, "core-hip_lib_generic", "core/clr/stage", {"share/hip/version": b"5.2"})
    add_artifact(root, "blas_lib_gfx90a", "blas/stage", {"share/blas/x.dat": b"x"})
    return root


def _in(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False, env=env)


def test_the_builder_ends_with_the_absolute_dist_path(tmp_path: Path) -> None:
    _tree(tmp_path / "tree")
    common = ("--artifact-dir", "tree", "--dest-dir", "out", "--version", "1.0")
    for extra in ((), ("-q",), ("--dry-run",)):
        proc = _in(tmp_path, _script("build-python-packages"), *common, *extra)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.splitlines()[-1].endswith(str(tmp_path / "out" / "dist")), proc.stdout
    quiet = _in(tmp_path, _script("build-python-packages"), *common, "-q")
    assert quiet.stdout == f"{tmp_path / 'out' / 'dist'}\n"
    staged = _in(tmp_path, _script("build-python-packages"), *common, "--no-build-packages")
    assert staged.stdout.splitlines()[-1] == str(tmp_path / "out")


def test_the_assembler_ends_with_the_absolute_output_path(tmp_path: Path) -> None:
    make_shard(tmp_path / "a", ("gfx1200",))
    make_shard(tmp_path / "b", ("gfx1201",))
    argv = ["--input", "a/dist", "b/dist", "--dest-dir", "merged", "--index", "index"]
    proc = _in(tmp_path, _script("assemble-shards"), *argv)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1] == str(tmp_path / "merged" / "dist")
    assert f"index: {tmp_path / 'index'}" in proc.stderr.splitlines()  # a note, not the list
    assert re.search(r"^ rocm-sdk-device-gfx1200\s+\d+(\.\d)? (B|kB)$", proc.stdout, re.M)
    listing = read_listing("\n".join(lines[:-1]))  # the list: a table within 80 columns
    assert sorted(listing.rows) == sorted(p.name for p in (tmp_path / "merged/dist").iterdir())
    argv = ["-q", "--input", "a/dist", "--input", "b/dist", "--dest-dir", "merged2"]
    again = _in(tmp_path, _script("assemble-shards"), *argv)
    assert (again.returncode, again.stdout) == (0, f"{tmp_path / 'merged2' / 'dist'}\n")


def test_kpack_extract_ends_with_the_absolute_output_path(tmp_path: Path) -> None:
    from tests.kpack.bundle_fixtures import sample_bundle

    (tmp_path / "b.bundle").write_bytes(sample_bundle(["gfx900", "gfx1030"]))
    proc = _in(tmp_path, _script("kpack"), "extract", "b.bundle", "-o", "co")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == str(tmp_path / "co")
    quiet = _in(tmp_path, _script("kpack"), "extract", "-q", "b.bundle", "-o", "co2")
    assert quiet.stdout == f"{tmp_path / 'co2'}\n"


def test_kpack_split_artifacts_ends_with_the_absolute_output_path(tmp_path: Path) -> None:
    art = tmp_path / "blas_lib_generic"
    (art / "s" / "lib").mkdir(parents=True)
    (art / "s" / "lib" / "notes.txt").write_text("notes\n")
    (art / "artifact_manifest.txt").write_text("s\n")
    argv = ["split-artifacts", "--artifact-dir", "blas_lib_generic", "--output-dir"]
    proc = _in(tmp_path, _script("kpack"), *argv, "out")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == str(tmp_path / "out")
    assert "blas_lib_generic -> blas_lib" in proc.stdout  # the summary, before
    quiet = _in(tmp_path, _script("kpack"), *argv, "out2", "-q")
    assert quiet.stdout == f"{tmp_path / 'out2'}\n"


# --- families against the tree ----------------------------------------------------------------


def test_legacy_mode_refuses_a_family_the_tree_does_not_have(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _tree(tmp_path / "tree")
    argv = ["--artifact-dir", str(tree), "--dest-dir", str(tmp_path / "out"), "--version", "1"]
    rc = build_python_packages.main([*argv, "--linux-amdgpu-families", "gfx1100", "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and not (tmp_path / "out").exists()  # a flag value: a usage error
    assert err == (
        f"error: {tree}: --linux-amdgpu-families: gfx1100 not in the artifact tree "
        "(its GPU families: gfx90a)\n"
    )
    assert build_python_packages.main([*argv, "--windows-amdgpu-families=gfx1100", "-q"]) == 2
    assert build_python_packages.main([*argv, "--linux-amdgpu-families=gfx90a", "-q"]) == 0


@pytest.mark.parametrize("name", ["build-python-packages", "assemble-shards"])
def test_an_unknown_family_is_answered_with_the_valid_ones(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if name == "build-python-packages":
        tree = _tree(tmp_path / "t")
        argv = ["--artifact-dir", str(tree), "--dest-dir", str(tmp_path / "o"), "--version", "1"]
        rc = build_python_packages.main([*argv, "--linux-amdgpu-families", "gfx94x-dcgpu"])
    else:
        shard = make_shard(tmp_path / "a", ("gfx1200",))
        argv = ["--input", str(shard), "--dest-dir", str(tmp_path / "o")]
        rc = assemble_shards.main([*argv, "--linux-amdgpu-families", "gfx94x-dcgpu"])
    err = capsys.readouterr().err.splitlines()
    assert rc == 2
    assert err[0].startswith(
        "error: unknown GPU family 'gfx94x-dcgpu' in --linux-amdgpu-families "
        "(did you mean gfx94X-dcgpu"
    )
    assert "gfx110X-all" in "\n".join(err) and "targets.yaml" not in "\n".join(err)
    assert all(len(line) <= 100 for line in err[1:])
