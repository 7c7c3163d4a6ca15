"""Every bad input: one clear error naming the file, exit 1 (2 for a usage error: a bad flag
value), nothing left in the destination."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from build_tools.build_python_packages import main

from .treeutil import add_artifact, write_manifest


def _tree(root: Path) -> Path:
    write_manifest(root)
    add_artifact(root, "core-hip_lib_generic", "core/clr/stage", {"share/hip/version": b"5.2"})
    return root


def _run(tree: Path, dest: Path, *extra: str) -> int:
    return main(["--artifact-dir", str(tree), "--dest-dir", str(dest), "--version", "1.0", *extra])


def _assert_failed(
    rc: int, dest: Path, capsys: pytest.CaptureFixture[str], *needles: str, status: int = 1
) -> None:
    err = capsys.readouterr().err
    assert rc == status, err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in err, err
    leftovers = [p for p in dest.rglob("*")] if dest.exists() else []
    assert leftovers == [], leftovers


def _corrupt(tree: Path, case: str) -> str:
    """Break the tree; return a string the error must contain."""
    therock = tree / "base_lib_generic/base/aux-overlay/stage/share/therock/therock_manifest.json"
    if case == "missing-therock-manifest":
        therock.unlink()
        return "therock_manifest.json"
    if case == "malformed-json":
        therock.write_text("{")
        return str(therock)
    if case == "no-artifact-manifest":
        (tree / "blas_lib_generic" / "s").mkdir(parents=True)
        return "blas_lib_generic"
    if case in ("absolute-line", "dotdot-line", "missing-stage"):
        line = {"absolute-line": "/abs", "dotdot-line": "../x", "missing-stage": "nope/stage"}[case]
        add_artifact(tree, "blas_lib_generic", "s", {"a": b"a"}, manifest=f"s\n{line}\n")
        return "blas_lib_generic/artifact_manifest.txt"
    if case == "conflict":
        add_artifact(
            tree, "core-runtime_lib_generic", "core/rocr/stage", {"share/hip/version": b"6.0"}
        )
        return "share/hip/version"
    if case == "escaping-symlink":
        add_artifact(
            tree, "core-runtime_lib_generic", "s", {"lib/evil": "symlink:../../../../../etc"}
        )
        return "lib/evil"
    if case == "corrupt-elf":
        add_artifact(
            tree,
            "core-runtime_lib_generic",
            "s",
            {"lib/libbad.so.1": b"\x7fELF\x02\x01\x01" + b"\0" * 20},
        )
        return "libbad.so.1"
    raise AssertionError(case)


@pytest.mark.parametrize(
    "case",
    [
        "missing-therock-manifest",
        "malformed-json",
        "no-artifact-manifest",
        "absolute-line",
        "dotdot-line",
        "missing-stage",
        "conflict",
        "escaping-symlink",
        "corrupt-elf",
    ],
)
def test_bad_tree(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = _tree(tmp_path / "tree")
    needle = _corrupt(tree, case)
    dest = tmp_path / "out"
    _assert_failed(_run(tree, dest), dest, capsys, needle)


def test_unknown_family_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = _tree(tmp_path / "tree")
    dest = tmp_path / "out"
    rc = _run(tree, dest, "--linux-amdgpu-families", "gfx94X-dcgpu,gfx999X-nope")
    _assert_failed(rc, dest, capsys, "gfx999X-nope", status=2)


def test_bad_version(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = _tree(tmp_path / "tree")
    dest = tmp_path / "out"
    rc = main(["--artifact-dir", str(tree), "--dest-dir", str(dest), "--version", "7.x-beta!"])
    _assert_failed(rc, dest, capsys, "7.x-beta!", status=2)


def test_version_past_the_digit_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A release number longer than int() converts was a ValueError traceback."""
    tree = _tree(tmp_path / "tree")
    dest = tmp_path / "out"
    version = "1.0.dev" + "9" * 5000
    rc = main(["--artifact-dir", str(tree), "--dest-dir", str(dest), "--version", version])
    _assert_failed(rc, dest, capsys, "is not a valid PEP 440 version", status=2)


def test_unwritable_destination(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = _tree(tmp_path / "tree")
    blocker = tmp_path / "file"
    blocker.write_text("a file where the destination directory should be")
    rc = _run(tree, blocker / "out")
    err = capsys.readouterr().err
    assert rc == 1 and "not writable" in err and str(blocker) in err


def test_failed_run_keeps_previous_dist(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = tmp_path / "out"
    (dest / "dist").mkdir(parents=True)
    (dest / "dist" / "previous.whl").write_text("old")
    (dest / "unrelated.txt").write_text("keep me")
    tree = _tree(tmp_path / "tree")
    _corrupt(tree, "conflict")
    assert _run(tree, dest) == 1
    assert (dest / "dist" / "previous.whl").read_text() == "old"
    assert (dest / "unrelated.txt").read_text() == "keep me"
    assert sorted(p.name for p in dest.iterdir()) == ["dist", "unrelated.txt"]


def test_json_flag_string_is_rejected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = _tree(tmp_path / "tree")
    therock = tree / "base_lib_generic/base/aux-overlay/stage/share/therock/therock_manifest.json"
    therock.write_text(json.dumps({"flags": {"KPACK_SPLIT_ARTIFACTS": "ON"}}))
    dest = tmp_path / "out"
    _assert_failed(_run(tree, dest), dest, capsys, "KPACK_SPLIT_ARTIFACTS")
