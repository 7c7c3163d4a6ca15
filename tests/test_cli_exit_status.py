"""Exit statuses every tool shares (issue 29): a usage error — an unknown flag or command, a
flag value out of its range, a missing argument, options that exclude each other, a path on
the command line that cannot be used — is one ``error:`` line and exit status 2, as argparse,
rocm-kpack and TheRock's ``rocm-sdk`` exit; bad input data and failures stay exit status 1.

Walks every console script of the project, every ``kpack`` subcommand, rocm-kpack's
``python -m rocm_kpack.tools.*`` names (and the files TheRock runs by path), and the installed
runtime's ``rocm-sdk``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

import pytest

from kpack import cli as kpack_cli
from kpack.common.cli import DIST_NAME

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PY = sys.executable


def _scripts() -> dict[str, str]:
    """The project's console scripts: name -> entry point."""
    eps = metadata.distribution(DIST_NAME).entry_points
    return {ep.name: ep.value for ep in eps if ep.group == "console_scripts"}


def _kpack_subcommands() -> list[str]:
    parser = kpack_cli._parser()
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(subs[0].choices)


def _run(argv: Sequence[str | Path], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=environ, capture_output=True, text=True, check=False
    )


def _usage_error(proc: subprocess.CompletedProcess[str], prefix: str = "error: ") -> str:
    """Exit status 2, nothing on stdout, one ``error:`` line on stderr (an unknown family
    lists the valid ones on indented lines below it)."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stdout == "", proc.stdout
    lines = proc.stderr.splitlines()
    assert lines and lines[0].startswith(prefix), proc.stderr
    assert all(line.startswith("  ") for line in lines[1:]), proc.stderr
    assert "Traceback" not in proc.stderr and "usage:" not in proc.stderr
    return lines[0]


def test_the_walk_covers_every_console_script() -> None:
    assert set(_scripts()) == {"kpack", "build-python-packages", "assemble-shards"}
    assert set(_kpack_subcommands()) == {
        "inspect", "extract", "split-artifacts", "verify", "resolve", "split-wheel",
        "finalize-wheel", "assemble-wheel-shards",
    }  # fmt: skip


@pytest.mark.parametrize("name", sorted(_scripts()))
def test_every_console_script_answers_an_unknown_flag_with_exit_2(
    name: str, tmp_path: Path
) -> None:
    line = _usage_error(_run([BIN / name, "--no-such-flag"], tmp_path))
    assert "--no-such-flag" in line or "required" in line, line


@pytest.mark.parametrize("sub", _kpack_subcommands())
def test_every_kpack_subcommand_answers_an_unknown_flag_with_exit_2(
    sub: str, tmp_path: Path
) -> None:
    line = _usage_error(_run([BIN / "kpack", sub, "--no-such-flag"], tmp_path))
    assert f"kpack {sub}" in line or "--no-such-flag" in line, line


#: rocm-kpack's module names, as TheRock runs them (``python -m``), and ours.
MODULES = (
    "rocm_kpack.tools.split_python_wheels",
    "kpack.tools.split_python_wheels",
    "rocm_kpack.tools.split_artifacts",
    "rocm_kpack.tools.bulk_unbundle",
    "rocm_kpack.tools.recombine_artifacts",
)


@pytest.mark.parametrize("module", MODULES)
def test_every_module_tool_answers_an_unknown_flag_with_exit_2(module: str, tmp_path: Path) -> None:
    _usage_error(_run([PY, "-m", module, "--no-such-flag"], tmp_path))
    _usage_error(_run([PY, "-m", module], tmp_path))  # its required arguments missing


@pytest.mark.parametrize(
    "script",
    ["build_tools/build_python_packages.py", "build_tools/assemble_shards.py",
     "python/rocm_kpack/tools/split_artifacts.py", "python/rocm_kpack/tools/bulk_unbundle.py"],
)  # fmt: skip
def test_the_files_therock_runs_by_path_exit_2_too(script: str, tmp_path: Path) -> None:
    _usage_error(_run([PY, ROOT / script, "--no-such-flag"], tmp_path))


#: (argv, what the line says): usage errors argparse does not see — each one the code
#: raises as a UsageError after parsing.
CODE_USAGE_ERRORS: list[tuple[tuple[str, ...], str]] = [
    (("kpack", "inspect", "{tmp}/missing"), "cannot read the input"),
    (("kpack", "inspect", "{tmp}"), "the input is a directory"),
    (("kpack", "extract", "{tmp}/f", "-o", "{tmp}/o", "--target", "../x"), "is not a target id"),
    (("kpack", "resolve", "{tmp}/f", "--arch", "../x"), "is not an agent ISA"),
    (("kpack", "verify", "{tmp}/f", "--search-root", "{tmp}/f"), "is not a directory"),
    (
        (
            "kpack",
            "split-artifacts",
            "--artifact-dir",
            "{tmp}",
            "--output-dir",
            "{tmp}/o",
            "--compression",
            "none",
            "--compression-level",
            "3",
        ),
        "--compression-level applies to --compression zstd only",
    ),
    (
        (
            "kpack",
            "split-wheel",
            "--input",
            "{tmp}/x-1-py3-none-any.whl",
            "--output-dir",
            "{tmp}/o",
            "--wheel-type",
            "no-such-type",
        ),
        "unknown wheel type 'no-such-type'",
    ),
    (
        (
            "build-python-packages",
            "--artifact-dir",
            "{tmp}/tree",
            "--dest-dir",
            "{tmp}/o",
            "--version",
            "x y",
        ),
        "not a valid PEP 440 version",
    ),
    (
        (
            "build-python-packages",
            "--artifact-dir",
            "{tmp}/tree",
            "--dest-dir",
            "{tmp}/o",
            "--version",
            "1",
            "--linux-amdgpu-families",
            "gfx999X-bogus",
        ),
        "unknown GPU family 'gfx999X-bogus'",
    ),
    (
        ("assemble-shards", "--input", "{tmp}", "--dest-dir", "{tmp}/o", "--version", "x y"),
        "not a PEP 440 version",
    ),
    (
        ("-m", "rocm_kpack.tools.bulk_unbundle", "--output-dir", "{tmp}/o", "a.so", "b.so"),
        "--output-dir requires exactly one input file",
    ),
    (("-m", "rocm_kpack.tools.bulk_unbundle", "{tmp}/missing.so"), "no such file"),
    (
        ("kpack", "split-artifacts", "--artifact-dir", "{tmp}/missing", "--output-dir", "{tmp}/o"),
        "--artifact-dir is not a directory",
    ),
    (
        (
            "kpack",
            "split-artifacts",
            "--batch-artifact-parent-dir",
            "{tmp}/f",
            "--output-dir",
            "{tmp}/o",
        ),
        "--batch-artifact-parent-dir is not a directory",
    ),
    (
        (
            "kpack",
            "split-wheel",
            "--input",
            "{tmp}/missing-1-py3-none-any.whl",
            "--output-dir",
            "{tmp}/o",
            "--wheel-type",
            "torch-fat",
        ),
        "--input: no such file or directory",
    ),
    (
        ("kpack", "finalize-wheel", "{tmp}/missing-1-py3-none-any.whl", "--output-dir", "{tmp}/o",
         "--rocm-version", "7.1.0", "--rocm-set", "{tmp}"),
        "no such wheel",
    ),
    (
        ("kpack", "finalize-wheel", "{tmp}/f", "--output-dir", "{tmp}/o", "--rocm-version",
         "x y", "--rocm-set", "{tmp}"),
        "--rocm-version 'x y' is not a PEP 440 version",
    ),
    (
        ("kpack", "finalize-wheel", "{tmp}/f", "--output-dir", "{tmp}/o", "--rocm-version",
         "7.1.0", "--rocm-set", "{tmp}/f"),
        "--rocm-set: not a directory",
    ),
    (
        ("kpack", "finalize-wheel", "{tmp}/f", "--output-dir", "{tmp}/o", "--rocm-version",
         "7.1.0", "--rocm-set", "{tmp}", "--expected-gpu-target", "gfx94X-dcgpu"),
        "not a GPU target: 'gfx94X-dcgpu'",
    ),
    (
        ("kpack", "finalize-wheel", "{tmp}/f", "--output-dir", "{tmp}/o", "--rocm-version",
         "7.1.0", "--rocm-set", "{tmp}", "--max-wheel-size", "0"),
        "size must be at least 1 byte",
    ),
    (
        ("kpack", "split-wheel", "--input", "{tmp}/f", "--output-dir", "{tmp}/o",
         "--wheel-type", "torch-fat", "--rocm-version", "7.1.0"),
        "need --finalize",
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "needle"),
    CODE_USAGE_ERRORS,
    ids=[" ".join(a[:3]) for a, _ in CODE_USAGE_ERRORS],
)
def test_a_usage_error_the_code_finds_is_exit_2(
    argv: tuple[str, ...], needle: str, tmp_path: Path
) -> None:
    (tmp_path / "f").write_bytes(b"not a binary")
    words = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    command = [PY, *words] if words[0] == "-m" else [BIN / words[0], *words[1:]]
    line = _usage_error(_run(command, tmp_path))
    assert needle in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]  # nothing written


def test_bad_input_data_stays_exit_1(tmp_path: Path) -> None:
    """The contrast: a file whose bytes are wrong, a tree that is not an artifact tree."""
    (tmp_path / "trunc.kpack").write_bytes(b"KPAK" + b"\0" * 10)
    proc = _run([BIN / "kpack", "inspect", tmp_path / "trunc.kpack"], tmp_path)
    assert proc.returncode == 1 and proc.stderr.startswith("error: "), proc.stderr
    (tmp_path / "tree").mkdir()
    argv = ["--artifact-dir", "tree", "--dest-dir", "out", "--version", "1", "-q"]
    proc = _run([BIN / "build-python-packages", *argv], tmp_path)
    assert proc.returncode == 1 and "therock_manifest.json is missing" in proc.stderr
    (tmp_path / "version.json").write_text("[" * 200_000)
    argv = ["--artifact-dir", "tree", "--dest-dir", "out", "--version-file", "version.json"]
    proc = _run([BIN / "build-python-packages", *argv, "-q"], tmp_path)
    assert proc.returncode == 1 and "version.json: malformed JSON" in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()


# --- the installed runtime's rocm-sdk ---------------------------------------------------------


@pytest.fixture(scope="module")
def rocm_sdk_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The rendered ``rocm_sdk`` runtime, importable from the returned directory."""
    from tests.templates.tpl_kit import rocm_sdk_tree
    from tests.templates.tpl_rendering import context

    rendered = rocm_sdk_tree(context("kpack", ("gfx942",)), tmp_path_factory.mktemp("rocm"))
    return rendered / "src"


@pytest.mark.parametrize(
    "argv",
    [["bogus"], [], ["--bogus", "version"], ["path"], ["path", "--cmake", "--bin"]],
    ids=["command", "none", "flag", "missing", "exclusive"],
)
def test_rocm_sdk_usage_errors_exit_2(rocm_sdk_site: Path, argv: list[str]) -> None:
    """As TheRock's ``rocm-sdk`` (argparse) exits; the previous release exited 1 here."""
    proc = _run([PY, "-m", "rocm_sdk", *argv], rocm_sdk_site, PYTHONPATH=str(rocm_sdk_site))
    assert _usage_error(proc, "rocm-sdk: error: ").endswith("--help)")


def test_rocm_sdk_other_errors_stay_exit_1(rocm_sdk_site: Path) -> None:
    proc = _run([PY, "-m", "rocm_sdk", "targets"], rocm_sdk_site, PYTHONPATH=str(rocm_sdk_site))
    assert proc.returncode == 1 and proc.stderr.startswith("rocm-sdk: error: "), proc.stderr
