"""Every JSON file the project reads is depth- and size-bounded by one loader (issue 29):
``kpack.common.jsonfile`` for the tools, ``rocm_sdk._jsonfile`` (stdlib only) for the runtime,
with the same cap. 200,000 nested ``[`` are one error line naming the file, never a
``RecursionError`` — nor a crash of the interpreter where the recursion limit was raised
(json's C scanner recurses once per bracket)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from build_tools import assemble_shards, build_python_packages
from kpack.common.jsonfile import MAX_JSON_DEPTH, json_too_deep, parse_json_object
from kpack.errors import ManifestError
from tests.build_tools.shards.test_assembly import make_shard
from tests.build_tools.treeutil import add_artifact, write_manifest

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ROOT / "templates" / "rocm" / "src" / "rocm_sdk" / "_jsonfile.py"
DEEP = "[" * 200_000
TOO_DEEP = f"nested too deeply (more than {MAX_JSON_DEPTH} levels of [ and {{)"


def _runtime_too_deep(text: str) -> bool:
    """The runtime loader's check, run from its file (it is package data, not a module of
    the tree)."""
    namespace: dict[str, object] = {"__name__": "rocm_sdk_jsonfile"}
    exec(compile(RUNTIME.read_text(encoding="utf-8"), str(RUNTIME), "exec"), namespace)
    check = namespace["too_deep"]
    assert callable(check)
    return bool(check(text))


@pytest.mark.parametrize(
    ("text", "deep"),
    [
        ("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH, False),
        ("[" * (MAX_JSON_DEPTH + 1), True),
        ('{"a": ' * (MAX_JSON_DEPTH + 1), True),
        ("[{" * (MAX_JSON_DEPTH // 2 + 1), True),
        ('["' + "[" * 100_000 + '"]', False),  # brackets in a string do not nest
        ('["\\"' + "[" * 100_000 + '"]', False),  # nor after an escaped quote in it
        ("[" + "[1], " * 100_000 + "[]]", False),  # many, side by side
        ('"' + "[" * 100_000, False),  # an unterminated string to the end
        (DEEP, True),
    ],
)
def test_the_depth_is_counted_outside_strings(text: str, deep: bool) -> None:
    assert json_too_deep(text) is deep
    assert _runtime_too_deep(text) is deep  # the runtime keeps the same cap


@pytest.mark.parametrize("raw", [DEEP, '{"a": ' * 200_000, "[{" * 100_000, DEEP + "]" * 200_000])
def test_deep_nesting_is_one_error(raw: str) -> None:
    with pytest.raises(ManifestError) as caught:
        parse_json_object(raw.encode(), source="x.json", error=ManifestError)
    assert str(caught.value) == f"x.json: malformed JSON: {TOO_DEEP}"


def test_a_raised_recursion_limit_does_not_crash_either(tmp_path: Path) -> None:
    """Where something raised the recursion limit, json's C scanner overflowed the stack
    on 200,000 brackets (a segmentation fault); both loaders refuse them before."""
    path = tmp_path / "deep.json"
    path.write_text(DEEP)
    code = (
        "import sys; sys.setrecursionlimit(10**7)\n"
        "from kpack.common.jsonfile import load_json_object\n"
        "from kpack.errors import ManifestError\n"
        "try:\n    load_json_object(sys.argv[1], error=ManifestError)\n"
        "except ManifestError as exc:\n    print(exc)\n"
        "ns = {}\n"
        f"exec(open({str(RUNTIME)!r}).read(), ns)\n"
        "try:\n    ns['read_json'](__import__('pathlib').Path(sys.argv[1]))\n"
        "except ValueError as exc:\n    print(exc)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.splitlines() == [f"{path}: malformed JSON: {TOO_DEEP}", TOO_DEEP]


# --- each reader, through its command line ------------------------------------------------------


def _error_lines(err: str) -> list[str]:
    assert "Traceback" not in err and "RecursionError" not in err, err
    return [line for line in err.splitlines() if line.startswith("error:")]


def _tree(root: Path) -> Path:
    write_manifest(root)
    add_artifact(root, "core-hip_lib_generic", "core/clr/stage", {"share/hip/version": b"5.2"})
    return root


def test_build_python_packages_therock_manifest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _tree(tmp_path / "tree")
    manifest = write_manifest(tree, raw=DEEP)
    argv = ["--artifact-dir", str(tree), "--dest-dir", str(tmp_path / "out"), "--version", "1"]
    assert build_python_packages.main([*argv, "-q"]) == 1
    assert _error_lines(capsys.readouterr().err) == [
        f"error: {manifest}: malformed JSON: {TOO_DEEP}"
    ]
    assert not (tmp_path / "out").exists()


def test_build_python_packages_version_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _tree(tmp_path / "tree")
    version = tmp_path / "version.json"
    version.write_text(DEEP)
    argv = ["--artifact-dir", str(tree), "--dest-dir", str(tmp_path / "out")]
    assert build_python_packages.main([*argv, "--version-file", str(version), "-q"]) == 1
    assert _error_lines(capsys.readouterr().err) == [
        f"error: {version}: malformed JSON: {TOO_DEEP}"
    ]
    assert not (tmp_path / "out").exists()


def test_assemble_shards_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = make_shard(tmp_path / "a", ("gfx1200",))
    b = make_shard(tmp_path / "b", ("gfx1201",))
    report = a.parent / "report.json"
    report.write_text(DEEP)
    argv = ["--input", str(a), str(b), "--dest-dir", str(tmp_path / "out"), "-q"]
    assert assemble_shards.main(argv) == 1
    err = capsys.readouterr().err
    assert _error_lines(err) == ["error: invalid shard input"], err
    assert f"  - {report}: malformed JSON: {TOO_DEEP}" in err.splitlines(), err
    assert not (tmp_path / "out").exists()


def test_recombine_artifacts_config(tmp_path: Path) -> None:
    """rocm-kpack's config, named by ``--config``: kpack.split refuses it as a usage error."""
    (tmp_path / "shards" / "s").mkdir(parents=True)
    config = tmp_path / "config.json"
    config.write_text(DEEP)
    argv = ["--input-shards-dir", "shards", "--config", "config.json", "--output-dir", "out"]
    proc = subprocess.run(
        [sys.executable, "-m", "rocm_kpack.tools.recombine_artifacts", *argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'python'}"},
    )
    assert proc.returncode == 2, proc.stderr
    assert _error_lines(proc.stderr) == [f"error: config.json: malformed JSON: {TOO_DEEP}"]
    assert proc.stderr.count("\n") == 1 and not (tmp_path / "out").exists()


def test_the_runtime_reads_dist_info_json_through_its_loader(tmp_path: Path) -> None:
    """``rocm-sdk targets`` on a 200,000-deep dist_info.json, also with the recursion limit
    raised: one ``rocm-sdk: error:`` line naming the file, exit status 1."""
    from tests.templates.tpl_kit import fake_install, rocm_sdk_tree
    from tests.templates.tpl_rendering import context

    ctx = context("kpack", ("gfx942",), nonce="_v7", version="7.1.0")
    rocm_sdk_tree(ctx, tmp_path / "rocm")
    site = tmp_path / "site"
    (tmp_path / "rocm" / "src").rename(site)
    dist_info = Path("_rocm_sdk_core_v7", "share", "therock", "dist_info.json")
    files = {"_rocm_sdk_core_v7/__init__.py": b"", dist_info.as_posix(): DEEP.encode()}
    fake_install(site, "rocm-sdk-core", "7.1.0", files)
    env = {**os.environ, "PYTHONPATH": str(site), "ROCM_BOOTSTRAP_DISABLE_DETECTION": "1"}
    raised = "import sys; sys.setrecursionlimit(10**7); from rocm_sdk.__main__ import main; "
    for code in ("from rocm_sdk.__main__ import main; ", raised):
        proc = subprocess.run(
            [sys.executable, "-c", code + "raise SystemExit(main(['targets']))"],
            capture_output=True,
            text=True,
            env=env,
        )
        assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])
        assert proc.stderr == (
            f"rocm-sdk: error: cannot read dist_amdgpu_targets from {site / dist_info}: "
            f"{TOO_DEEP}\n"
        )


def test_no_reader_parses_json_around_the_loaders() -> None:
    """``json.load``/``json.loads`` only in the two loaders (and the wheel splitter's record
    of its outputs, which the records' own loader is to take over)."""
    allowed = {
        ROOT / "kpack" / "common" / "jsonfile.py",
        RUNTIME,
        ROOT / "kpack" / "wheelsplit" / "_publish.py",
    }
    found = []
    for top in ("kpack", "build_tools", "python", "templates"):
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix not in (".py", ".j2") or "__pycache__" in path.parts:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            if ("json.load(" in text or "json.loads(" in text) and path not in allowed:
                found.append(str(path.relative_to(ROOT)))
    assert found == ["templates/rocm/src/rocm_sdk/tests/utils.py"], found  # argv, not files
