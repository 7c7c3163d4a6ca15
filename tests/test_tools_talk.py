"""Every tool talks the same way (issue 33, item 5): ``-q``/``-v``/``-V`` before and after a
subcommand, ``-j`` defaulting to the CPU count, sizes parsed as they are printed (decimal;
binary only when spelled so), every bad value from the environment named."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from rocm_kpack.tools import split_artifacts

from build_tools import build_python_packages
from kpack import cli as kpack_cli
from kpack.wheelsplit import Parser as WheelsplitParser
from kpack.wheelsplit import add_arguments as wheelsplit_arguments
from tests.build_tools.treeutil import add_artifact, write_manifest
from tests.pypi_inputs import JAX_PLUGIN, pypi_wheel

KPACK = str(Path(sys.executable).parent / "kpack")
REPO = Path(__file__).resolve().parent.parent
#: The CPUs this process may run on: what every -j defaults to (an oracle apart from the code).
CPUS = len(os.sched_getaffinity(0))


def _kpack(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KPACK, *argv], capture_output=True, text=True, check=False)


@pytest.mark.parametrize("flag", ["-q", "-v", "-vv"])
def test_verbosity_is_taken_before_and_after_a_subcommand(flag: str) -> None:
    before, after = _kpack(flag, "inspect", "/bin/true"), _kpack("inspect", flag, "/bin/true")
    assert before.returncode == after.returncode == 0, before.stderr + after.stderr
    assert before.stdout == after.stdout != ""
    assert before.stderr == after.stderr


def test_quiet_before_a_subcommand_is_not_reset_by_it() -> None:
    args = ["--input", "x.whl", "--output-dir", "out"]
    parser = kpack_cli._parser()
    assert parser.parse_args(["-q", "split-wheel", *args]).quiet is True
    assert parser.parse_args(["-q", "inspect", "x"]).quiet is True
    assert parser.parse_args(["-v", "inspect", "x"]).verbose == 1
    assert parser.parse_args(["inspect", "-vv", "x"]).verbose == 2
    assert parser.parse_args(["inspect", "x"]).verbose == 0


def test_quiet_and_verbose_on_both_sides_exclude_each_other() -> None:
    proc = _kpack("-v", "inspect", "-q", "/bin/true")
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and "exclude each other" in proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize("where", ["before", "after"])
def test_version_before_and_after_a_subcommand(where: str) -> None:
    argv = ["-V", "inspect", "/bin/true"] if where == "before" else ["inspect", "-V", "/bin/true"]
    proc = _kpack(*argv)
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.startswith("kpack") and proc.stdout.split()[-1][0].isdigit()


def _jobs_parsers() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    wheelsplit = WheelsplitParser(prog="split_python_wheels")
    wheelsplit_arguments(wheelsplit)
    yield "split_python_wheels", wheelsplit
    yield "build-python-packages", build_python_packages._parser()
    yield "rocm_kpack.tools.split_artifacts", split_artifacts._parser()
    for action in kpack_cli._parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if any(a.dest == "jobs" for a in sub._actions):
                    yield f"kpack {name}", sub


@pytest.mark.parametrize(("name", "parser"), [pytest.param(n, p, id=n) for n, p in _jobs_parsers()])
def test_jobs_default_to_the_cpu_count_everywhere(
    name: str, parser: argparse.ArgumentParser
) -> None:
    (jobs,) = [a for a in parser._actions if a.dest == "jobs"]
    assert jobs.default == CPUS, name
    assert jobs.option_strings == ["-j", "--jobs"], name


def test_the_jobs_of_every_kpack_command_that_has_them() -> None:
    names = {n for n, _ in _jobs_parsers()}
    assert {"kpack split-wheel", "kpack split-artifacts"} <= names


@pytest.mark.parametrize(
    ("given", "limit"),
    [("64GB", 64 * 10**9), ("64G", 64 * 10**9), ("64GiB", 64 << 30), ("500MB", 500 * 10**6)],
)
def test_max_unpacked_size_is_decimal_unless_spelled_binary(given: str, limit: int) -> None:
    parser = WheelsplitParser(prog="split_python_wheels")
    wheelsplit_arguments(parser)
    args = parser.parse_args(["--input", "x", "--output-dir", "o", "--max-unpacked-size", given])
    assert args.max_unpacked_size == limit
    default = parser.parse_args(["--input", "x", "--output-dir", "o"]).max_unpacked_size
    assert default == 64 * 10**9


# --- values from the environment ---------------------------------------------------------


def _small_tree(root: Path) -> Path:
    write_manifest(root)
    add_artifact(root, "core-hip_lib_generic", "core/clr/stage", {"share/hip/version": b"5.2"})
    return root


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("ROCM_SDK_WHEEL_PLATFORM_TAG", "linux-x86_64"),  # '-' splits a wheel name's fields
        ("ROCM_SDK_WHEEL_PLATFORM_TAG", "bad tag"),
        ("ROCM_SDK_WHEEL_PLATFORM_TAG", "../x"),
        ("SOURCE_DATE_EPOCH", "yesterday"),
        ("KPACK_POOL_MIN_BYTES", "32MB"),
        ("KPACK_THREAD_MIN_BYTES", "-1"),
    ],
)
def test_a_bad_environment_value_is_named(variable: str, value: str, tmp_path: Path) -> None:
    tree, dest = _small_tree(tmp_path / "tree"), tmp_path / "out"
    env = {**os.environ, variable: value}
    if variable.startswith("KPACK_"):  # read where device code is split
        wheel = str(pypi_wheel(JAX_PLUGIN))
        argv = [KPACK, "split-wheel", "--input", wheel, "--output-dir", str(dest),
                "--device-package-prefix", "jax-device"]  # fmt: skip
    else:
        argv = [sys.executable, "-m", "build_tools.build_python_packages", "--artifact-dir",
                str(tree), "--dest-dir", str(dest), "--version", "1.0"]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, env=env, check=False)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    (line,) = [line for line in lines if not line.startswith("[")]  # after progress lines
    assert line == lines[-1] and line.startswith(f"error: {variable}={value!r}"), line
    assert not dest.exists()  # nothing written


def test_a_good_platform_tag_names_the_wheels(tmp_path: Path) -> None:
    tree, dest = _small_tree(tmp_path / "tree"), tmp_path / "out"
    env = {**os.environ, "ROCM_SDK_WHEEL_PLATFORM_TAG": "manylinux_2_28_x86_64"}
    argv = [sys.executable, "-m", "build_tools.build_python_packages", "--artifact-dir",
            str(tree), "--dest-dir", str(dest), "--version", "1.0", "-q"]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    wheels = sorted(p.name for p in (dest / "dist").glob("*.whl"))
    assert wheels and all(w.endswith("-py3-none-manylinux_2_28_x86_64.whl") for w in wheels)


def test_the_python_apis_default_to_the_cpu_count_too() -> None:
    """The options a caller builds without -j use as many processes as the CLI would."""
    from build_tools.options import BuildOptions
    from kpack.split import SplitOptions
    from kpack.wheelsplit._options import SplitOptions as WheelSplitOptions

    assert SplitOptions().jobs == CPUS
    assert WheelSplitOptions(overlay_root=None, device_package_prefix="p").jobs == CPUS
    build = BuildOptions(artifact_dir=Path("a"), dest_dir=Path("d"), version="1", nonce="n")
    assert build.jobs == CPUS
